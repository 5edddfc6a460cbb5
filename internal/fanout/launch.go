package fanout

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sync"
	"time"
)

// Launcher starts a server under test and returns it running.
type Launcher func(ctx context.Context, cfg ServerConfig) (*Launched, error)

// Launched is a running server under test. Close stops it.
type Launched struct {
	Ready Ready
	// SharedProcess is true when the server runs in the measuring process,
	// so its CPU and memory figures include the clients'.
	SharedProcess bool

	once     sync.Once
	closeErr error
	close    func(context.Context) error
}

// Close stops the server and waits until it is gone. It is idempotent.
func (l *Launched) Close(ctx context.Context) error {
	l.once.Do(func() { l.closeErr = l.close(ctx) })
	return l.closeErr
}

// InProcess runs the server in this process. Its figures include the
// clients'; it is for tests and quick checks.
func InProcess(ctx context.Context, cfg ServerConfig) (*Launched, error) {
	s, err := StartServer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Launched{Ready: s.Ready(), SharedProcess: true, close: s.Shutdown}, nil
}

// readyTimeout bounds how long a server process may take to print its
// Ready line.
const readyTimeout = 30 * time.Second

// Exec runs each server as a child process: path with args, followed by
// the ServerConfig's Args, which must end up in RunServer. The child's
// stderr goes to stderr.
//
// The parent owns the child's life: the child serves until its stdin
// reaches EOF, which happens when Close closes the pipe and also when the
// parent dies, however it dies. Close then waits for the child to exit,
// and kills it when ctx ends first; so does the end of the ctx given to
// the Launcher.
func Exec(path string, args []string, stderr io.Writer) Launcher {
	return func(ctx context.Context, cfg ServerConfig) (*Launched, error) {
		ctx, kill := context.WithCancel(ctx)
		cmd := exec.CommandContext(ctx, path, append(slices.Clone(args), cfg.Args()...)...)
		cmd.Stderr = stderr
		cmd.WaitDelay = time.Second // after a kill, do not wait long for the pipes
		stdin, err := cmd.StdinPipe()
		if err != nil {
			kill()
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			kill()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			kill()
			return nil, fmt.Errorf("fanout: start server process: %w", err)
		}
		fail := func(err error) (*Launched, error) {
			kill()
			_ = cmd.Wait()
			return nil, err
		}
		// A child that prints nothing is killed, which ends the read.
		timer := time.AfterFunc(readyTimeout, kill)
		line, err := bufio.NewReader(stdout).ReadBytes('\n')
		timer.Stop()
		if err != nil {
			return fail(fmt.Errorf("fanout: server process did not report ready: %w", err))
		}
		var r Ready
		if err := json.Unmarshal(line, &r); err != nil || r.Stream == "" || r.Control == "" {
			return fail(fmt.Errorf("fanout: server process printed %q instead of its ready line", line))
		}
		return &Launched{Ready: r, close: func(ctx context.Context) error {
			_ = stdin.Close() // EOF: the child shuts down and exits
			stop := context.AfterFunc(ctx, kill)
			defer stop()
			err := cmd.Wait()
			kill()
			if err != nil {
				return fmt.Errorf("fanout: server process: %w", err)
			}
			return nil
		}}, nil
	}
}
