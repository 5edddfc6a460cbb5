package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conclave-ai/conclave/internal/routine"
)

// ServerConfig is what a Launcher needs to start the server under test.
type ServerConfig struct {
	// DataDir is the server's --data directory.
	DataDir string
	// ConcurrentRuns is its --concurrent-runs quota (the driver's runs in
	// flight); run creation is not rate limited.
	ConcurrentRuns int
	// HubIdleAfter is its --hub-idle-after; five times it is its
	// --journal-idle-after (idle sessions leave the journal's memory too;
	// each eviction pass flushes the store's memtable, so not as often).
	HubIdleAfter time.Duration
	// Heartbeat is its --heartbeat.
	Heartbeat time.Duration
}

// ServeArgs are the arguments of `conclave serve` for cfg.
func (cfg ServerConfig) ServeArgs() []string {
	return []string{"serve", "--data", cfg.DataDir, "--addr", "127.0.0.1:0", "--log-level", "info",
		"--runs-per-second", "-1", "--concurrent-runs", strconv.Itoa(cfg.ConcurrentRuns),
		"--hub-idle-after", cfg.HubIdleAfter.String(), "--journal-idle-after", (5 * cfg.HubIdleAfter).String(),
		"--heartbeat", cfg.Heartbeat.String()}
}

// Launcher starts a server under test and returns it listening.
type Launcher func(ctx context.Context, cfg ServerConfig) (*Server, error)

// Server is a running server under test: a child process.
type Server struct {
	// Addr is its listening address, host:port.
	Addr string
	// PID is its process id, whose RSS and CPU time the soak reads.
	PID int

	log  *serverLog
	done <-chan struct{}
	once sync.Once
	exit ServerExit
	stop func(context.Context) ServerExit
}

// ServerExit is how the server process ended.
type ServerExit struct {
	// Err is nil when it exited with status 0.
	Err error
	// CPUSeconds is its user + system time over its whole life (from
	// wait4's rusage; 0 if unavailable).
	CPUSeconds float64
}

// Stop asks the server to shut down (SIGTERM: a graceful stop) and waits
// until it exited, killing it when ctx ends first. It is idempotent.
func (s *Server) Stop(ctx context.Context) ServerExit {
	s.once.Do(func() { s.exit = s.stop(ctx) })
	return s.exit
}

// Done is closed when the server process has exited (and its log was
// read to the end).
func (s *Server) Done() <-chan struct{} { return s.done }

// LogProblems returns how many lines the server logged at level WARN or
// above, and the first of them.
func (s *Server) LogProblems() (n int, first []string) { return s.log.problems() }

// listenTimeout bounds how long a server may take to log that it listens
// (opening a journal is quick; a larger one replays first).
const listenTimeout = 60 * time.Second

// Exec runs the server as a child process: path with args, followed by
// cfg.ServeArgs(), with env added to this process's environment. The
// child's address comes from its log line `msg="conclave listening"
// addr=…`; its lines at level WARN and above are copied to stderr and
// counted, the others dropped.
//
// The child dies with this process: it is started with a parent-death
// signal where the platform has one (SIGTERM on Linux), and Stop, the end
// of ctx, or a failed start end it.
func Exec(path string, args, env []string, stderr io.Writer) Launcher {
	return func(ctx context.Context, cfg ServerConfig) (*Server, error) {
		ctx, kill := context.WithCancel(ctx)
		cmd := exec.CommandContext(ctx, path, append(slices.Clone(args), cfg.ServeArgs()...)...)
		cmd.Env = append(os.Environ(), env...)
		cmd.SysProcAttr = childProcAttr()
		cmd.WaitDelay = 5 * time.Second // after a kill, do not wait long for the pipe
		pipe, err := cmd.StderrPipe()
		if err != nil {
			kill()
			return nil, err
		}
		// The child's stdin stays open until Stop: a conclave built for
		// tests (cmd/conclave's child mode) shuts down at its EOF.
		stdin, err := cmd.StdinPipe()
		if err != nil {
			kill()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			kill()
			return nil, fmt.Errorf("soak: start the server: %w", err)
		}
		log := &serverLog{out: stderr}
		addr := make(chan string, 1)
		scanned := make(chan struct{})
		// The scanner ends at EOF, when the child is gone: reap waits for it.
		var scanner routine.Group
		scanner.Go(func() {
			defer close(scanned)
			log.scan(pipe, addr)
		})
		reap := func() ServerExit {
			_ = scanner.Wait(context.Background())
			err := cmd.Wait()
			kill()
			var ex ServerExit
			if err != nil {
				ex.Err = fmt.Errorf("soak: server process: %w", err)
			}
			if ps := cmd.ProcessState; ps != nil {
				ex.CPUSeconds = (ps.UserTime() + ps.SystemTime()).Seconds()
			}
			return ex
		}
		timer := time.NewTimer(listenTimeout)
		defer timer.Stop()
		select {
		case a := <-addr:
			s := &Server{Addr: a, PID: cmd.Process.Pid, log: log, done: scanned}
			s.stop = func(ctx context.Context) ServerExit {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = stdin.Close()
				stop := context.AfterFunc(ctx, kill)
				defer stop()
				return reap()
			}
			return s, nil
		case <-scanned:
			ex := reap()
			return nil, fmt.Errorf("soak: the server exited before listening (%v); its log ends:\n%s", ex.Err, log.tail())
		case <-timer.C:
			kill()
			reap()
			return nil, fmt.Errorf("soak: the server did not listen within %v; its log ends:\n%s", listenTimeout, log.tail())
		case <-ctx.Done():
			kill()
			reap()
			return nil, ctx.Err()
		}
	}
}

// serverLog reads the server's log (slog text lines).
type serverLog struct {
	out io.Writer

	mu    sync.Mutex // guards the fields below
	last  []string   // the last lines, for a failed start
	bad   int
	first []string
}

const (
	logTailLines  = 20
	logFirstLines = 5
)

// scan reads the log until EOF, sending the listening address on addr once.
func (l *serverLog) scan(r io.Reader, addr chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	found := false
	for sc.Scan() {
		line := sc.Text()
		if !found && strings.Contains(line, `msg="conclave listening"`) {
			if a := logField(line, "addr"); a != "" {
				addr <- a
				found = true
			}
		}
		l.add(line)
	}
	_, _ = io.Copy(io.Discard, r) // after a scanner error, keep the pipe drained
}

func (l *serverLog) add(line string) {
	problem := strings.Contains(line, " level=WARN ") || strings.Contains(line, " level=ERROR ")
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last = append(l.last, line); len(l.last) > logTailLines {
		l.last = l.last[1:]
	}
	if !problem {
		return
	}
	// The warning every server without tokens logs is not a problem here.
	if strings.Contains(line, "no tokens configured") {
		return
	}
	l.bad++
	if len(l.first) < logFirstLines {
		l.first = append(l.first, line)
	}
	if l.out != nil {
		fmt.Fprintf(l.out, "server: %s\n", line)
	}
}

func (l *serverLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.last, "\n")
}

func (l *serverLog) problems() (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bad, slices.Clone(l.first)
}

// logField returns the value of key in a slog text line (unquoted values
// only, as addresses are).
func logField(line, key string) string {
	_, v, ok := strings.Cut(line, " "+key+"=")
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, " ")
	return v
}

// errStopped is returned by the soak's parts when the soak was stopped.
var errStopped = errors.New("soak: stopped")
