// Command conclave runs councils of agents.
//
//	conclave run "why is the sky blue" [flags]   run one council in-process and show it live
//	conclave serve [--addr 127.0.0.1:8080]      serve the HTTP API, SSE and WebSocket streams
//	conclave bench fanout [--transport sse|ws]  measure stream fan-out against a naive baseline
//	conclave bench soak [--runs 20000]          soak one serve --data process: do RSS and goroutines stay flat?
//	conclave keys generate NAME --dir DIR       make an approver's ML-DSA-65 key pair
//	conclave audit verify --data DIR            verify the audit log's hash chain and signatures
//
// Exit status: 0 when the run finished, 1 when it ended with run_error (or
// the CLI itself failed), 2 for bad usage, 130 when interrupted.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFailed      = 1 // the run ended with run_error, or the CLI failed
	exitUsage       = 2 // bad flags, arguments or request
	exitInterrupted = 130
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal the command winds down (aborting its run);
	// restoring the default handling lets a second Ctrl-C kill at once.
	context.AfterFunc(ctx, stop)
	code := execute(ctx, &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, isTTY: isTerminal, now: time.Now, getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}

// app is what every subcommand gets from main: where to write, how to tell
// a terminal, and the clock. Tests build one around buffers.
type app struct {
	stdin          io.Reader // answers to prompts
	stdout, stderr io.Writer
	// isTTY reports whether w is an interactive terminal.
	isTTY func(w io.Writer) bool
	now   func() time.Time
	// getenv reads the environment (NO_COLOR); nil reads an empty one.
	getenv func(string) string
}

// env is the environment variable key, "" when unset.
func (a *app) env(key string) string {
	if a.getenv == nil {
		return ""
	}
	return a.getenv(key)
}

// terminalWidth is w's width in columns, or 0 when w is not a terminal.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return width
}

// isTerminal reports whether w is a terminal (only an *os.File can be).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "conclave",
		Short: "Run councils of agents",
		// Errors are printed once, by execute, with the right exit status.
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError(errors.New("a command is required (see conclave --help)"))
		},
	}
	if a.stdin != nil {
		root.SetIn(a.stdin)
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.CompletionOptions.HiddenDefaultCmd = true
	// One line per subcommand; each lives in its own file.
	root.AddCommand(newRunCmd(a))
	root.AddCommand(newServeCmd(a))
	root.AddCommand(newBenchCmd(a))
	root.AddCommand(newApproveCmd(a))
	root.AddCommand(newToolsCmd(a))
	root.AddCommand(newDevNATSCmd(a))
	root.AddCommand(newKeysCmd(a))
	root.AddCommand(newAuditCmd(a))
	root.AddCommand(newSimCmd(a))
	return root
}

// execute runs the command line args and returns the process exit status.
func execute(ctx context.Context, a *app, args []string) int {
	root := newRootCmd(a)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		// Only cobra itself returns plain errors: unknown commands and
		// flags, unparsable values, wrong argument counts.
		ee = &exitError{code: exitUsage, err: err}
	}
	if ee.err != nil {
		fmt.Fprintf(a.stderr, "conclave: %v\n", ee.err)
	}
	if ee.code == exitUsage && cmd != nil {
		fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return ee.code
}

// exitError ends a command with a given exit status. err, when not nil, is
// printed on stderr.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

func failure(err error) error { return &exitError{code: exitFailed, err: err} }
