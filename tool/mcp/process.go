package mcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/internal/routine"
)

// process is a stdio server's child process. Its stdin and stdout are
// pipes the MCP connection owns (closing the connection closes them); its
// stderr is read line by line into the debug log, and its last lines are
// kept to explain an exit.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File // our end of its stdin
	stdout *os.File // our end of its stdout
	exited chan struct{}
	err    error // cmd.Wait's, set before exited is closed
	// stderrDone is closed when the stderr reader has read to the end
	// (every holder of the pipe closed it).
	stderrDone chan struct{}

	mu   sync.Mutex // guards tail
	tail []string   // the last stderrTail lines of stderr
}

const (
	// stderrTail is how many stderr lines a process keeps to explain an
	// exit; stderrLine bounds one line.
	stderrTail = 8
	stderrLine = 1 << 10
	// stderrDrain is how long an exited process's last stderr lines may
	// take to be read before exited is closed (a child of the process may
	// hold the pipe open: then they may be missing from exitError).
	stderrDrain = 500 * time.Millisecond
)

// startProcess starts argv with its stdin, stdout and stderr on pipes,
// in a process group of its own (unix) so that stop reaches its children
// too. Its waiter and its stderr reader run on g; both end once the
// process has exited and every holder of its stderr has closed it.
func startProcess(argv, env []string, log *slog.Logger, g *routine.Group, clock Clock) (*process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	ownGroup(cmd)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, err
	}
	closeAll(inR, outW, errW) // the child's ends
	p := &process{cmd: cmd, stdin: inW, stdout: outR, exited: make(chan struct{}), stderrDone: make(chan struct{})}
	if !g.Go(func() { p.readStderr(errR, log) }) {
		errR.Close()
		close(p.stderrDone)
	}
	if !g.Go(func() {
		p.err = cmd.Wait()
		// Its last words first: exitError quotes them.
		drain, stop := clock.Timer(stderrDrain)
		select {
		case <-p.stderrDone:
		case <-drain:
		}
		stop()
		close(p.exited)
	}) {
		// Shutting down: nobody may wait for it, so it must not live on.
		killGroup(cmd)
		_ = cmd.Wait()
		close(p.exited)
		closeAll(inW, outR)
		return nil, ErrClosed
	}
	return p, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// readStderr logs the process's stderr at debug level, one line at a
// time (longer lines are cut), and keeps its last lines.
func (p *process) readStderr(r *os.File, log *slog.Logger) {
	defer close(p.stderrDone)
	defer r.Close()
	br := bufio.NewReaderSize(r, stderrLine)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			s := strings.TrimRight(string(line), "\r\n")
			log.Debug("mcp server stderr", "line", s)
			p.mu.Lock()
			if len(p.tail) == stderrTail {
				p.tail = append(p.tail[:0], p.tail[1:]...)
			}
			p.tail = append(p.tail, s)
			p.mu.Unlock()
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			// Drop the rest of an overlong line.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
		}
		if err != nil {
			_, _ = io.Copy(io.Discard, r) // keep the pipe drained until every writer closed it
			return
		}
	}
}

// exitError describes how the process ended, with the last lines of its
// stderr. It must be called after exited is closed.
func (p *process) exitError() error {
	p.mu.Lock()
	tail := strings.Join(p.tail, " | ")
	p.mu.Unlock()
	what := "exited"
	if p.err != nil {
		what = p.err.Error()
	} else if p.cmd.ProcessState != nil {
		what = p.cmd.ProcessState.String()
	}
	if tail != "" {
		return fmt.Errorf("process %s; stderr: %s", what, tail)
	}
	return fmt.Errorf("process %s", what)
}

// stop ends the process: its stdin is closed (the MCP way to ask a stdio
// server to exit), then it gets grace to exit before SIGTERM, and grace
// again before SIGKILL, sent to its whole process group. ctx ending skips
// to SIGKILL. stop returns once the process has exited.
func (p *process) stop(ctx context.Context, grace time.Duration, clock Clock) {
	_ = p.stdin.Close()
	wait := func() bool {
		t, stop := clock.Timer(grace)
		defer stop()
		select {
		case <-p.exited:
			return true
		case <-ctx.Done():
			return false
		case <-t:
			return false
		}
	}
	if wait() {
		return
	}
	if ctx.Err() == nil {
		termGroup(p.cmd)
		if wait() {
			return
		}
	}
	killGroup(p.cmd)
	<-p.exited
}
