package mcp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/tool"
	"github.com/conclave-ai/conclave/tool/mcp"
)

// wait bounds every wait of these tests (wall-clock time; virtual time in
// a synctest bubble).
const wait = 30 * time.Second

// logRecorder is a log destination: it keeps the lines, copies them to
// t.Log, and signals started when a stdio server says blockStarted.
type logRecorder struct {
	t       testing.TB
	started chan struct{}

	mu    sync.Mutex // guards lines
	lines []string
}

func newLogRecorder(t testing.TB) *logRecorder {
	return &logRecorder{t: t, started: make(chan struct{}, 16)}
}

func (r *logRecorder) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(r, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (r *logRecorder) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
	r.t.Log(line)
	if strings.Contains(line, `line="`+blockStarted+`"`) {
		select {
		case r.started <- struct{}{}:
		default: // more than the test waits for
		}
	}
	return len(p), nil
}

// has reports whether a line holds every part.
func (r *logRecorder) has(parts ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// waitStarted waits until a block call has reached its server.
func waitStarted(t *testing.T, started <-chan struct{}) {
	t.Helper()
	select {
	case <-started:
	case <-time.After(wait):
		t.Fatal("the block call never reached the server")
	}
}

// stdioSpec is this test binary as a stdio server named name.
func stdioSpec(t *testing.T, name string) mcp.Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return mcp.Spec{Name: name, Command: []string{exe}}
}

// stdioConfig serves testServer from child processes (serverModeEnv),
// logging into rec, restarting after 10ms, without pings.
func stdioConfig(t *testing.T, rec *logRecorder, specs ...mcp.Spec) mcp.Config {
	return mcp.Config{
		Servers: specs, Logger: rec.logger(),
		Env:        append(os.Environ(), serverModeEnv+"="+modeServe),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, PingInterval: -1,
	}
}

// start starts cfg's servers and shuts them down when the test ends.
func start(t *testing.T, cfg mcp.Config) *mcp.Servers {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := mcp.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// lookup returns the tool called name.
func lookup(t *testing.T, s *mcp.Servers, name string) tool.Tool {
	t.Helper()
	for _, tl := range s.Tools() {
		if tl.Def().Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

// call calls tool name with args under the wait bound.
func call(t *testing.T, s *mcp.Servers, name, args string) (tool.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return lookup(t, s, name).Call(ctx, json.RawMessage(args))
}

// waitStatus waits until server name's status satisfies ok.
func waitStatus(t *testing.T, s *mcp.Servers, name string, ok func(mcp.Status) bool) mcp.Status {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		changed := s.Changed()
		for _, st := range s.Status() {
			if st.Name == name && ok(st) {
				return st
			}
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("server %s: status %+v never came", name, s.Status())
		}
	}
}
