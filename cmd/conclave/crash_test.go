package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// The crash test runs `conclave serve` as a real process and kills it with
// SIGKILL at random moments. The process is this test binary: started with
// crashChildEnv=1, TestMain hands its arguments to execute (runCrashChild)
// instead of running the tests, so no separate build is needed.

// Environment of the crash test.
const (
	// crashChildEnv, set to "1", makes the test binary a conclave process
	// (a server that ends when its stdin does); set to stdioChildMode, a
	// conclave process with the real stdin, stdout and environment (tty
	// and README tests).
	crashChildEnv  = "CONCLAVE_TEST_CHILD"
	stdioChildMode = "stdio"
	// crashSeedEnv replays a run of the test (the seed is logged).
	crashSeedEnv = "CONCLAVE_CRASH_SEED"
	// crashItersEnv overrides the number of kills.
	crashItersEnv = "CONCLAVE_CRASH_ITERATIONS"
)

const (
	crashIterations  = 20
	crashMaxSessions = 3
	// crashMaxKillDelay bounds how long a server lives once its runs were started.
	crashMaxKillDelay = 400 * time.Millisecond
	// crashApprovalTimeout: no interrupt expires during the test, so every
	// interrupt pending before a kill must still be pending after it.
	crashApprovalTimeout = 3600
	// crashWait bounds every wait on the child, a stream or a request.
	crashWait = 20 * time.Second
	// crashFinishWait bounds the last phase, where every run is driven to its end.
	crashFinishWait = 60 * time.Second
)

// runCrashChild is TestMain's child-mode hook: with crashChildEnv=1 the
// process is `conclave <args>` (as main runs it) and exits; otherwise it
// returns and the tests run.
func runCrashChild() {
	mode := os.Getenv(crashChildEnv)
	if mode != "1" && mode != stdioChildMode {
		return
	}
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(sigCtx, stop)
	if mode == stdioChildMode { // `conclave` as main runs it
		code := execute(sigCtx, &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, isTTY: isTerminal, now: time.Now, getenv: os.Getenv}, os.Args[1:])
		stop()
		os.Exit(code)
	}
	// The parent holds our stdin; EOF means it is gone (it may have died
	// without killing us): shut down as on SIGTERM rather than live on.
	// EOF cancels its own context, not the signals' (stop would unregister
	// them: a SIGTERM the parent sent just before closing our stdin, still
	// on its way, would then kill us: "signal: terminated", seen in
	// TestBenchSoak_Tiny). This goroutine ends with the process.
	ctx, cancel := context.WithCancel(sigCtx)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	a := &app{stdin: strings.NewReader(""), stdout: os.Stdout, stderr: os.Stderr, isTTY: isTerminal, now: time.Now, getenv: os.Getenv}
	code := execute(ctx, a, os.Args[1:])
	cancel()
	stop()
	os.Exit(code)
}

// TestCrash_KillNineRecovers starts `conclave serve` on one data directory,
// runs councils with approval interrupts (hitl "tools") in a few sessions,
// follows every session over SSE, answers some interrupts and leaves others
// pending, and kills the process with SIGKILL after a random delay; then it
// starts it again on the same directory and checks, after every restart:
//
//  1. every event any client received is still there, with the same seq
//     and byte-identical data;
//  2. every session's seqs are gapless from 1 (each session is read fully);
//  3. every run that had not ended is listed and either still open or
//     ended with run_finished (a working run goes on after the restart);
//     every interrupt pending in the journal is listed with the same id,
//     and interrupts are resumable (POST resume: 200);
//  4. reconnecting with the last received Last-Event-ID yields exactly the
//     rest: the first frame is last+1, then gapless, byte-identical;
//  5. testkit.CheckPartial holds on every session's full stream.
//
// Sessions accumulate over the iterations. At the end every interrupt is
// answered and every run must finish with exactly one terminal event
// (testkit.Check on every session), and the server stops on SIGTERM.
func TestCrash_KillNineRecovers(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("needs SIGKILL and SIGTERM")
	}
	iterations := crashIterations
	if testing.Short() {
		iterations = 3
	}
	if v := os.Getenv(crashItersEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive integer", crashItersEnv, v)
		}
		iterations = n
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(crashSeedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", crashSeedEnv, v, err)
		}
		seed = s
	}
	t.Logf("seed %d (replay: %s=%d), %d iterations", seed, crashSeedEnv, seed, iterations)

	h := newCrashTest(t, seed)
	// Sessions leave the journal's memory a few hundred ms after their
	// last use, so the kills also land in evictions, and restarts meet
	// sessions Open leaves in the store; runs parked for 150 ms fall
	// asleep, so resumes wake runs asleep, and kills land while they
	// fall asleep, sleep and wake.
	h.serveArgs = []string{"--journal-idle-after", "200ms", "--sleep-after", "150ms"}
	began := time.Now()
	for i := range iterations {
		h.iteration(i)
		if t.Failed() {
			t.Fatalf("iteration %d failed (seed %d)", i, seed)
		}
	}
	h.finish()
	t.Logf("seed %d: %d kills in %v; %d sessions, %d events, %d runs (%d lost before their first event), %d interrupts resumed (%d of them recovered ones), %d agents restarted",
		seed, iterations, time.Since(began).Round(time.Millisecond), len(h.sessions), h.events(), len(h.runs), h.lostRuns,
		h.stats.resumed, h.stats.resumedRecovered, h.stats.restarted)
}

// crashTest is the test's model of what clients have seen, and the harness
// around the current server process.
type crashTest struct {
	t    *testing.T
	seed uint64
	rng  *rand.Rand
	dir  string
	exe  string

	tr     *http.Transport
	client *http.Client
	// ctx ends every request and follower when the test ends.
	ctx    context.Context
	cancel context.CancelFunc
	// followers counts the SSE follower goroutines; cleanup waits for them.
	followers sync.WaitGroup

	srv  *crashChild // the current server process
	iter int
	// serveArgs are added to the command line of the servers it starts.
	serveArgs []string

	sessions  []*crashSession
	bySession map[messages.SessionID]*crashSession
	runs      map[messages.RunID]*crashRun
	// created: runs a POST answered 201 for; lostRuns counts those that
	// did not exist after a restart (the kill came before run_started was
	// journaled; a 201 is not an acknowledgement).
	created  map[messages.RunID]*crashSession
	lostRuns int

	// Per server process.
	out        chan crashFrame // every follower's frames; unbuffered (followers block, nothing is dropped)
	live       int             // followers that have not sent their final frame
	killed     bool            // the process was killed: no more requests
	handled    map[string]bool // interrupts already answered or deliberately left pending
	approveAll bool            // last phase: answer every interrupt

	stats struct{ resumed, resumedRecovered, restarted int }
}

// crashSession is everything clients received of one session.
type crashSession struct {
	id messages.SessionID
	// data is each seq's envelope JSON as first received; every later
	// receipt of the seq (after a restart, by another reader) must match.
	data map[uint64]string
	envs map[uint64]*messages.Envelope
	max  uint64 // highest seq received; 1..max are all in data once checks passed
	// cursor is the last seq this session's follower received, sent as
	// Last-Event-ID when it reconnects.
	cursor uint64
	// raised and closed index interrupts by id: the seq of interrupt_raised,
	// and of its interrupt_resolved or interrupt_expired.
	raised map[string]uint64
	closed map[string]uint64
}

type crashRun struct {
	id        messages.RunID
	session   *crashSession
	started   bool
	terminals int
	terminal  *messages.Envelope
}

// crashFrame is one SSE event as a follower read it, or (final) the end of
// the follower with its error.
type crashFrame struct {
	f     *crashFollower
	seq   uint64
	event string
	data  string
	env   *messages.Envelope
	final bool
	err   error
}

// crashFollower is a client following one session from its cursor.
type crashFollower struct {
	s     *crashSession
	after uint64 // its Last-Event-ID
	next  uint64 // the seq it must receive next
}

func newCrashTest(t *testing.T, seed uint64) *crashTest {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	h := &crashTest{
		t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		dir: t.TempDir(), exe: exe, tr: tr, client: &http.Client{Transport: tr},
		ctx: ctx, cancel: cancel,
		bySession: map[messages.SessionID]*crashSession{}, runs: map[messages.RunID]*crashRun{},
		created: map[messages.RunID]*crashSession{},
	}
	// Registered after TempDir, so it runs first: the process is gone before
	// its data directory is removed, and no goroutine of the test outlives it.
	t.Cleanup(func() {
		if h.srv != nil && !h.srv.exited {
			_ = h.srv.cmd.Process.Kill()
			h.srv.reap()
		}
		h.cancel() // the current context; stopFollowers cancelled the earlier ones
		h.followers.Wait()
		tr.CloseIdleConnections()
	})
	return h
}

// iteration starts the server on the data directory, checks what it
// recovered, starts runs, answers some interrupts, and kills it.
func (h *crashTest) iteration(i int) {
	h.iter = i
	h.startServer()
	h.checkRecovered()
	if h.t.Failed() {
		return
	}
	h.followAll()
	h.resumeRecovered(0.6)
	n := 1 + h.rng.IntN(3)
	for range n {
		h.startRun()
	}
	if h.t.Failed() {
		return
	}
	// A quarter of the kills come within 25 ms, while the new runs plan and
	// the agents the restart resumed are in their first turn; the others
	// anywhere in 0..400 ms.
	limit := crashMaxKillDelay
	if h.rng.IntN(4) == 0 {
		limit = crashMaxKillDelay / 16
	}
	delay := time.Duration(h.rng.Int64N(int64(limit) + 1))
	// The delay is the experiment (the moment of the kill), not a way to
	// wait for something: this is a deliberate timer.
	kill := time.NewTimer(delay)
	defer kill.Stop()
	for !h.killed {
		select {
		case fr := <-h.out:
			h.onFrame(fr)
		case <-kill.C:
			h.killServer()
		}
	}
	h.drain()
	h.t.Logf("iteration %d: %d run(s) started, killed after %v; %d sessions, %d events, %d runs open, %d interrupts pending",
		i, n, delay.Round(time.Millisecond), len(h.sessions), h.events(), h.openRuns(), h.pendingCount())
}

// finish starts the server a last time, answers every interrupt until
// every run has ended, checks every session in full, and stops the server
// with SIGTERM.
func (h *crashTest) finish() {
	h.iter = -1
	h.startServer()
	h.checkRecovered()
	if h.t.Failed() {
		return
	}
	h.approveAll = true
	h.followAll()
	h.resumeRecovered(1)
	deadline := time.NewTimer(crashFinishWait)
	defer deadline.Stop()
	for h.openRuns() > 0 {
		select {
		case fr := <-h.out:
			h.onFrame(fr)
			if h.t.Failed() {
				return
			}
		case <-deadline.C:
			h.t.Fatalf("%d runs still open after %v: %s\nserver log:\n%s", h.openRuns(), crashFinishWait, h.describeOpen(), h.srv.log.tail(8<<10))
		}
	}
	// Every run ended: stop the followers and read every session once more
	// from seq 1; the whole stream must satisfy every guarantee.
	h.stopFollowers()
	for _, s := range h.sessions {
		h.readFull(s, s.max)
		envs := s.ordered()
		for _, v := range testkit.Check(envs) {
			h.t.Errorf("session %s: %s\n%s", s.id, v, h.around(s, v.Seq))
		}
	}
	for _, r := range h.runs {
		if r.terminals != 1 {
			h.t.Errorf("run %s: %d terminal events, want 1", r.id, r.terminals)
		} else if r.terminal.Type != messages.RunFinished {
			h.t.Errorf("run %s ended with %s: %s", r.id, r.terminal.Type, h.around(r.session, r.terminal.Seq))
		}
	}
	for _, s := range h.sessions {
		for id := range s.raised {
			if s.closed[id] == 0 {
				h.t.Errorf("session %s: interrupt %s (seq %d) never resolved although every run ended", s.id, id, s.raised[id])
			}
		}
	}
	h.stopServer()
}

// ---- the server process ----

// crashChild is one server process.
type crashChild struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string // http://host:port
	log    *crashLog
	done   chan struct{} // the stderr reader ended: the process closed stderr (it exited)
	exited bool
}

// crashLog keeps the tail of a process's stderr.
type crashLog struct {
	mu    sync.Mutex
	lines []string
	bad   []string // ERROR lines, panics and data races
}

const crashLogLines = 2000

func (l *crashLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == crashLogLines {
		l.lines = slices.Delete(l.lines, 0, crashLogLines/2)
	}
	l.lines = append(l.lines, line)
	if strings.Contains(line, "level=ERROR") || strings.HasPrefix(line, `{"time":`) && strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, "DATA RACE") || strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
		l.bad = append(l.bad, line)
	}
}

func (l *crashLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.Join(l.lines, "\n")
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

func (l *crashLog) problems() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.bad)
}

// startServer starts `conclave serve` on the data directory and waits
// until it listens.
func (h *crashTest) startServer() {
	t := h.t
	t.Helper()
	cmd := exec.Command(h.exe, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", h.dir, "--log-level", "info"}, h.serveArgs...)...)
	cmd.Env = append(os.Environ(), crashChildEnv+"=1")
	c := startChild(t, cmd, fmt.Sprintf("iteration %d: ", h.iter))
	c.base = "http://" + c.base
	h.srv = c
	h.out = make(chan crashFrame)
	h.live, h.killed, h.handled = 0, false, map[string]bool{}
}

// startChild starts cmd (a `conclave serve` child), logs its stderr into
// the crashChild and waits until it says where it listens (c.base is that
// host:port). The child watches its stdin, so it ends when we do, even if
// we die. what prefixes failure messages.
func startChild(t *testing.T, cmd *exec.Cmd, what string) *crashChild {
	t.Helper()
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &crashChild{t: t, cmd: cmd, log: &crashLog{}, done: make(chan struct{})}
	addr := make(chan string, 1)
	// The stderr reader ends at EOF, when the process is gone; reap waits
	// for it before cmd.Wait (which closes the pipe).
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		found := false
		for sc.Scan() {
			line := sc.Text()
			c.log.add(line)
			if !found && (strings.Contains(line, `msg="conclave listening"`) || strings.Contains(line, `"msg":"conclave listening"`)) {
				if a := logField(line, "addr"); a != "" {
					addr <- a
					found = true
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr) // after a scanner error, keep the pipe drained
	}()
	wait := time.NewTimer(crashWait)
	defer wait.Stop()
	select {
	case a := <-addr:
		c.base = a
	case <-c.done:
		c.reap()
		t.Fatalf("%sthe server exited before listening: %v\n%s", what, c.cmd.ProcessState, c.log.tail(8<<10))
	case <-wait.C:
		_ = cmd.Process.Kill()
		c.reap()
		t.Fatalf("%sthe server did not listen within %v\n%s", what, crashWait, c.log.tail(8<<10))
	}
	return c
}

// reap waits for the stderr reader and the process (which must be exiting).
// terminate stops the server as an operator does (SIGTERM) and waits for
// it to exit; its status is then in c.cmd.ProcessState.
func (c *crashChild) terminate() {
	c.t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		c.t.Fatalf("SIGTERM: %v", err)
	}
	c.reap()
}

func (c *crashChild) reap() {
	wait := time.NewTimer(crashWait)
	defer wait.Stop()
	select {
	case <-c.done:
	case <-wait.C:
		c.t.Errorf("the server's stderr stayed open %v after it was told to exit", crashWait)
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	_ = c.cmd.Wait()
	c.exited = true
}

// killServer kills the server with SIGKILL: nothing is frozen, the
// journal simply stops.
func (h *crashTest) killServer() {
	h.killed = true
	if err := h.srv.cmd.Process.Kill(); err != nil {
		h.t.Fatalf("kill: %v", err)
	}
	h.srv.reap()
	if ws, ok := h.srv.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && !(ws.Signaled() && ws.Signal() == syscall.SIGKILL) {
		h.t.Errorf("iteration %d: the server was not killed but exited with %v\n%s", h.iter, h.srv.cmd.ProcessState, h.srv.log.tail(8<<10))
	}
	h.checkLog()
}

// stopServer stops the server with SIGTERM; it must exit 0.
func (h *crashTest) stopServer() {
	h.srv.terminate()
	if code := h.srv.cmd.ProcessState.ExitCode(); code != exitOK {
		h.t.Errorf("the server exited with %v after SIGTERM\n%s", h.srv.cmd.ProcessState, h.srv.log.tail(8<<10))
	}
	h.checkLog()
}

func (h *crashTest) checkLog() {
	for _, line := range h.srv.log.problems() {
		h.t.Errorf("iteration %d: server log: %s", h.iter, line)
	}
}

// logField returns key's value in a log/slog text line.
func logField(line, key string) string {
	if strings.HasPrefix(line, "{") { // --log-format json
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			return ""
		}
		if v, ok := m[key]; ok {
			return fmt.Sprint(v)
		}
		return ""
	}
	_, v, ok := strings.Cut(line, " "+key+"=")
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, " ")
	return v
}

// ---- HTTP ----

// call sends a JSON request to the current server and decodes a 2xx answer
// into out. It returns the status and the body.
func (h *crashTest) call(method, path string, in, out any) (int, []byte) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, crashWait)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			h.t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.srv.base+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("iteration %d: %s %s: %v\nserver log:\n%s", h.iter, method, path, err, h.srv.log.tail(8<<10))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("iteration %d: %s %s: read the answer: %v", h.iter, method, path, err)
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(b, out); err != nil {
			h.t.Fatalf("%s %s: %v\n%s", method, path, err, b)
		}
	}
	return resp.StatusCode, b
}

// listRuns lists every run of the session.
func (h *crashTest) listRuns(s messages.SessionID) []messages.RunSummary {
	var all []messages.RunSummary
	for cursor := ""; ; {
		var list messages.RunList
		path := "/api/v1/runs?limit=200&session_id=" + url.QueryEscape(string(s))
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		if code, b := h.call(http.MethodGet, path, nil, &list); code != http.StatusOK {
			h.t.Fatalf("GET %s = %d %s", path, code, b)
		}
		all = append(all, list.Runs...)
		if list.NextCursor == "" {
			return all
		}
		cursor = string(list.NextCursor)
	}
}

// listInterrupts lists the session's open interrupts.
func (h *crashTest) listInterrupts(s messages.SessionID) []messages.Interrupt {
	var all []messages.Interrupt
	for cursor := ""; ; {
		var list messages.InterruptList
		path := "/api/v1/interrupts?limit=200&session_id=" + url.QueryEscape(string(s))
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		if code, b := h.call(http.MethodGet, path, nil, &list); code != http.StatusOK {
			h.t.Fatalf("GET %s = %d %s", path, code, b)
		}
		all = append(all, list.Interrupts...)
		if list.NextCursor == "" {
			return all
		}
		cursor = list.NextCursor
	}
}

// stream reads the session's SSE stream after the cursor (sent as
// Last-Event-ID) and calls fn for every event until fn returns false (then
// it returns nil) or the stream fails.
func (h *crashTest) stream(ctx context.Context, base string, s messages.SessionID, after uint64, fn func(crashFrame) bool) error {
	return readSessionSSE(ctx, h.client, base, s, after, fn)
}

// readSessionSSE is crashTest.stream for any client: the cluster test's
// followers read their streams with it too.
func readSessionSSE(ctx context.Context, client *http.Client, base string, s messages.SessionID, after uint64, fn func(crashFrame) bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/events/stream?session_id="+url.QueryEscape(string(s)), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Last-Event-ID", strconv.FormatUint(after, 10))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("GET stream with Last-Event-ID %d = %d %s", after, resp.StatusCode, b)
	}
	body, err := skipSSERetry(resp.Body)
	if err != nil {
		return err
	}
	r := testkit.NewSSEReader(body)
	for {
		f, err := r.Next()
		if err != nil {
			return err
		}
		if f.Event == "" && f.Data == "" { // a comment (heartbeat)
			continue
		}
		if f.Event == "stream_closed" {
			return fmt.Errorf("stream_closed: %s", f.Data)
		}
		seq, err := strconv.ParseUint(f.ID, 10, 64)
		if err != nil {
			return fmt.Errorf("frame id %q: %w", f.ID, err)
		}
		env := new(messages.Envelope)
		if err := json.Unmarshal([]byte(f.Data), env); err != nil {
			return fmt.Errorf("seq %d: %w: %s", seq, err, f.Data)
		}
		if !fn(crashFrame{seq: seq, event: f.Event, data: f.Data, env: env}) {
			return nil
		}
	}
}

// ---- following sessions ----

// followAll starts a follower on every session, from its cursor.
func (h *crashTest) followAll() {
	for _, s := range h.sessions {
		h.follow(s)
	}
}

// follow starts a goroutine that reads the session's stream after its
// cursor and hands every frame to the test loop over h.out; its last
// message is a final frame. It ends when the stream fails (the server was
// killed) or when h.ctx ends.
func (h *crashTest) follow(s *crashSession) {
	fl := &crashFollower{s: s, after: s.cursor, next: s.cursor + 1}
	out, base, ctx := h.out, h.srv.base, h.ctx
	h.live++
	h.followers.Add(1)
	go func() {
		defer h.followers.Done()
		err := h.stream(ctx, base, s.id, fl.after, func(fr crashFrame) bool {
			fr.f = fl
			select {
			case out <- fr:
				return true
			case <-ctx.Done():
				return false
			}
		})
		select {
		case out <- crashFrame{f: fl, final: true, err: err}:
		case <-ctx.Done():
		}
	}()
}

// onFrame handles a follower's message: it checks that the follower
// receives exactly the rest of its session (check 4), records the event,
// and answers interrupts.
func (h *crashTest) onFrame(fr crashFrame) {
	fl := fr.f
	if fr.final {
		h.live--
		if !h.killed {
			h.t.Errorf("iteration %d: the stream of session %s (Last-Event-ID %d) ended while the server ran: %v\nserver log:\n%s",
				h.iter, fl.s.id, fl.after, fr.err, h.srv.log.tail(8<<10))
		}
		return
	}
	s := fl.s
	if fr.seq != fl.next {
		h.t.Errorf("iteration %d: session %s reconnected with Last-Event-ID %d: got seq %d, want %d\n%s",
			h.iter, s.id, fl.after, fr.seq, fl.next, h.around(s, fl.next))
	}
	fl.next = fr.seq + 1
	s.cursor = fr.seq
	h.record(s, fr, fmt.Sprintf("follower after %d", fl.after))
	if !h.killed {
		h.answer(s, fr.env)
	}
}

// drain takes the followers' last frames after a kill: what a follower
// read before its connection broke was received and counts.
func (h *crashTest) drain() {
	wait := time.NewTimer(crashWait)
	defer wait.Stop()
	for h.live > 0 {
		select {
		case fr := <-h.out:
			h.onFrame(fr)
		case <-wait.C:
			h.t.Fatalf("iteration %d: %d followers still reading %v after the kill", h.iter, h.live, crashWait)
		}
	}
}

// stopFollowers ends the followers of a live server.
func (h *crashTest) stopFollowers() {
	h.cancel()
	h.followers.Wait()
	h.live = 0
	h.ctx, h.cancel = context.WithCancel(context.Background())
}

// record adds a received frame to the model. A seq received before must
// come back byte-identical (check 1).
func (h *crashTest) record(s *crashSession, fr crashFrame, source string) {
	env := fr.env
	if env.Seq != fr.seq || string(env.Type) != fr.event || env.SessionID != s.id {
		h.t.Errorf("session %s (%s): frame id %d event %s carries seq %d type %s session %s", s.id, source, fr.seq, fr.event, env.Seq, env.Type, env.SessionID)
	}
	if old, ok := s.data[fr.seq]; ok {
		if old != fr.data {
			h.t.Errorf("iteration %d: session %s seq %d changed (%s):\n  first received: %s\n  now:            %s", h.iter, s.id, fr.seq, source, old, fr.data)
		}
		return
	}
	s.data[fr.seq], s.envs[fr.seq] = fr.data, env
	s.max = max(s.max, fr.seq)
	switch p := env.Payload.(type) {
	case *messages.InterruptRaisedPayload:
		if prev, dup := s.raised[p.InterruptID]; dup {
			h.t.Errorf("session %s: interrupt %s raised twice, at seq %d and %d\n%s", s.id, p.InterruptID, prev, fr.seq, h.around(s, fr.seq))
		}
		s.raised[p.InterruptID] = fr.seq
	case *messages.InterruptResolvedPayload:
		h.closeInterrupt(s, p.InterruptID, fr.seq)
	case *messages.InterruptExpiredPayload:
		h.closeInterrupt(s, p.InterruptID, fr.seq)
		h.t.Errorf("session %s seq %d: interrupt %s expired (timeout %d s)", s.id, fr.seq, p.InterruptID, crashApprovalTimeout)
	}
	r := h.run(env.RunID, s)
	switch {
	case env.Type == messages.RunStarted:
		r.started = true
	case env.Type == messages.AgentRestarted:
		h.stats.restarted++
	case env.Type.Terminal():
		r.terminals++
		r.terminal = env
		if r.terminals > 1 {
			h.t.Errorf("run %s: a second terminal event at seq %d\n%s", r.id, fr.seq, h.around(s, fr.seq))
		}
	}
}

func (h *crashTest) closeInterrupt(s *crashSession, id string, seq uint64) {
	if prev := s.closed[id]; prev != 0 {
		h.t.Errorf("session %s: interrupt %s ended twice, at seq %d and %d\n%s", s.id, id, prev, seq, h.around(s, seq))
	}
	if s.raised[id] == 0 {
		h.t.Errorf("session %s seq %d: interrupt %s ends but was never raised", s.id, seq, id)
	}
	s.closed[id] = seq
}

func (h *crashTest) run(id messages.RunID, s *crashSession) *crashRun {
	r := h.runs[id]
	if r == nil {
		r = &crashRun{id: id, session: s}
		h.runs[id] = r
	}
	if r.session != s {
		h.t.Errorf("run %s appears in sessions %s and %s", id, r.session.id, s.id)
	}
	return r
}

func (h *crashTest) session(id messages.SessionID) *crashSession {
	s := h.bySession[id]
	if s == nil {
		s = &crashSession{id: id, data: map[uint64]string{}, envs: map[uint64]*messages.Envelope{},
			raised: map[string]uint64{}, closed: map[string]uint64{}}
		h.bySession[id] = s
		h.sessions = append(h.sessions, s)
	}
	return s
}

// ---- runs and interrupts ----

// startRun starts a council with approval interrupts, in a new session or
// one of the existing ones.
func (h *crashTest) startRun() {
	rng := h.rng
	var s *crashSession
	if len(h.sessions) > 0 && (len(h.sessions) >= crashMaxSessions || rng.IntN(2) == 0) {
		s = h.sessions[rng.IntN(len(h.sessions))]
	}
	nodes := 2 + rng.IntN(3)
	sc := &messages.Scenario{
		Nodes: nodes, Waves: 1 + rng.IntN(min(2, nodes)), Tokens: 5 + rng.IntN(16), TokenDelayMS: 1 + rng.IntN(3),
		SynthesisTokens: 5 + rng.IntN(6), Approvals: 1 + rng.IntN(3), InfoRequests: rng.IntN(2), Seed: rng.Int64(),
	}
	cmd := messages.StartRun{Question: fmt.Sprintf("crash %d", h.iter), HITL: messages.HITLTools, Scenario: sc, ApprovalTimeoutSeconds: crashApprovalTimeout}
	if s != nil {
		cmd.SessionID = s.id
	}
	var rc messages.RunCreated
	if code, b := h.call(http.MethodPost, "/api/v1/runs", cmd, &rc); code != http.StatusCreated {
		h.t.Fatalf("iteration %d: POST /api/v1/runs = %d %s", h.iter, code, b)
	}
	if s == nil {
		s = h.session(rc.SessionID)
		h.follow(s) // from seq 1
	}
	h.created[rc.RunID] = s
}

// answer decides what to do about an interrupt the moment a follower sees
// it raised: answer it now, or leave it pending (a run parked at the kill).
func (h *crashTest) answer(s *crashSession, env *messages.Envelope) {
	p, ok := env.Payload.(*messages.InterruptRaisedPayload)
	if !ok || h.handled[p.InterruptID] || s.closed[p.InterruptID] != 0 {
		return
	}
	h.handled[p.InterruptID] = true
	odds := map[messages.InterruptKind]float64{
		messages.InterruptPlanApproval: 0.9, messages.InterruptNodeApproval: 0.8,
		messages.InterruptToolApproval: 0.6, messages.InterruptInfoRequest: 0.6,
	}[p.Kind]
	if h.approveAll || h.rng.Float64() < odds {
		h.resume(s, p.InterruptID, p.Kind, false)
	}
}

// resumeRecovered answers each interrupt pending in the journal (after a
// restart) with probability odds; the others stay pending for this process.
func (h *crashTest) resumeRecovered(odds float64) {
	for _, s := range h.sessions {
		for _, id := range h.pending(s) {
			h.handled[id] = true
			if h.rng.Float64() < odds {
				env := s.envs[s.raised[id]]
				h.resume(s, id, env.Payload.(*messages.InterruptRaisedPayload).Kind, true)
			}
		}
	}
}

// resume answers an interrupt; it must be accepted (200).
func (h *crashTest) resume(s *crashSession, id string, kind messages.InterruptKind, recovered bool) {
	body := messages.Resume{Decision: messages.DecisionApprove}
	switch {
	case kind == messages.InterruptInfoRequest:
		body = messages.Resume{Response: "forty-two"}
	case kind == messages.InterruptToolApproval && !h.approveAll && h.rng.IntN(4) == 0:
		body = messages.Resume{Decision: messages.DecisionReject, Feedback: "not this one"}
	}
	code, b := h.call(http.MethodPost, "/api/v1/events/resume/"+url.PathEscape(id), body, nil)
	if code != http.StatusOK {
		what := "raised in this process"
		if recovered {
			what = "pending in the journal at the restart"
		}
		h.t.Errorf("iteration %d: resume %s interrupt %s (%s) = %d %s\n%s", h.iter, kind, id, what, code, b, h.around(s, s.raised[id]))
		return
	}
	h.stats.resumed++
	if recovered {
		h.stats.resumedRecovered++
	}
}

// pending lists the session's interrupts raised and not ended, of runs
// that have not ended, as far as clients have seen.
func (h *crashTest) pending(s *crashSession) []string {
	var ids []string
	for id, seq := range s.raised {
		if s.closed[id] == 0 && h.runs[s.envs[seq].RunID].terminals == 0 {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int { return int(s.raised[a]) - int(s.raised[b]) })
	return ids
}

// ---- checks after a restart ----

// checkRecovered runs checks 1, 2, 3 and 5 on every session.
func (h *crashTest) checkRecovered() {
	for _, s := range slices.Clone(h.sessions) {
		h.checkSession(s)
	}
	for id := range h.created {
		if h.runs[id] == nil || !h.runs[id].started {
			// Its POST was answered but the kill came before run_started
			// was journaled: it never existed for any client, and the
			// restarted server does not know it.
			if _, code := h.getRun(id); code != http.StatusNotFound {
				h.t.Errorf("run %s: never seen started, yet GET = %d", id, code)
			}
			h.lostRuns++
		}
		delete(h.created, id)
	}
}

func (h *crashTest) getRun(id messages.RunID) (messages.RunSummary, int) {
	var sum messages.RunSummary
	code, _ := h.call(http.MethodGet, "/api/v1/runs/"+url.PathEscape(string(id)), nil, &sum)
	return sum, code
}

func (h *crashTest) checkSession(s *crashSession) {
	t := h.t
	// What clients had seen before the kill.
	type before struct{ ended bool }
	runsBefore := map[messages.RunID]before{}
	for id, r := range h.runs {
		if r.session == s && r.started {
			runsBefore[id] = before{ended: r.terminals > 0}
		}
	}
	listed := map[messages.RunID]messages.RunSummary{}
	var head uint64
	for _, sum := range h.listRuns(s.id) {
		listed[sum.RunID] = sum
		head = max(head, sum.LastSeq)
	}
	if len(listed) == 0 {
		if s.max > 0 {
			t.Errorf("iteration %d: session %s (%d events received) has no runs after the restart", h.iter, s.id, s.max)
			return
		}
		// Created by a POST whose events never reached the journal.
		h.dropSession(s)
		return
	}
	if head < s.max {
		t.Errorf("iteration %d: session %s: the runs' last seq is %d after the restart, but clients had received up to seq %d", h.iter, s.id, head, s.max)
	}
	// Checks 1 and 2: the whole session, gapless from 1, identical bytes.
	h.readFull(s, max(head, s.max))
	if t.Failed() {
		return
	}
	// Check 5.
	for _, v := range testkit.CheckPartial(s.ordered()) {
		t.Errorf("iteration %d: session %s: %s\n%s", h.iter, s.id, v, h.around(s, v.Seq))
	}
	// Check 3: runs.
	for id, b := range runsBefore {
		sum, ok := listed[id]
		r := h.runs[id]
		switch {
		case !ok:
			t.Errorf("iteration %d: run %s is not listed after the restart (ended before the kill: %v)", h.iter, id, b.ended)
		case b.ended && !sum.Status.Terminal():
			t.Errorf("iteration %d: run %s had ended (%s) but is listed %s", h.iter, id, r.terminal.Type, sum.Status)
		case sum.Status.Terminal() && r.terminals == 0:
			t.Errorf("iteration %d: run %s is listed %s, but its stream has no terminal event up to seq %d", h.iter, id, sum.Status, s.max)
		case sum.Status.Terminal() && (r.terminal.Type != messages.RunFinished || sum.Status != messages.StatusFinished):
			t.Errorf("iteration %d: run %s is listed %s and ended with %s (the test never rejects a plan or aborts)\n%s",
				h.iter, id, sum.Status, r.terminal.Type, h.around(s, r.terminal.Seq))
		}
	}
	for id, sum := range listed {
		if r := h.runs[id]; r == nil || !r.started {
			t.Errorf("iteration %d: run %s is listed (%s, last seq %d) but its run_started is not in the stream", h.iter, id, sum.Status, sum.LastSeq)
		}
	}
	// Check 3: interrupts. Nothing resolves an interrupt between the full
	// read and the listing (the test answers none yet, none expires), so
	// every pending one must be listed; ones that ended must not be.
	open := map[string]messages.Interrupt{}
	for _, in := range h.listInterrupts(s.id) {
		open[in.InterruptID] = in
	}
	for _, id := range h.pending(s) {
		in, ok := open[id]
		raised := s.envs[s.raised[id]]
		switch {
		case !ok:
			t.Errorf("iteration %d: interrupt %s (%s, run %s, seq %d) is pending in the journal but not listed after the restart\n%s",
				h.iter, id, raised.Payload.(*messages.InterruptRaisedPayload).Kind, raised.RunID, raised.Seq, h.around(s, raised.Seq))
		case in.RunID != raised.RunID || in.Status != messages.InterruptPending || (in.Seq != 0 && in.Seq != raised.Seq):
			t.Errorf("iteration %d: interrupt %s listed as run %s status %s seq %d; raised by run %s at seq %d",
				h.iter, id, in.RunID, in.Status, in.Seq, raised.RunID, raised.Seq)
		}
	}
	for id, in := range open {
		if seq := s.closed[id]; seq != 0 {
			t.Errorf("iteration %d: interrupt %s is listed (%s) but ended at seq %d\n%s", h.iter, id, in.Status, seq, h.around(s, seq))
		}
	}
}

// readFull reads the session from seq 1 up to seq target: every seq must
// come, in order, and match what was received before.
func (h *crashTest) readFull(s *crashSession, target uint64) {
	if target == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, crashWait)
	defer cancel()
	next := uint64(1)
	err := h.stream(ctx, h.srv.base, s.id, 0, func(fr crashFrame) bool {
		if fr.seq != next {
			h.t.Errorf("iteration %d: session %s read from the start: got seq %d, want %d", h.iter, s.id, fr.seq, next)
		}
		next = fr.seq + 1
		h.record(s, fr, "read from seq 1")
		return fr.seq < target
	})
	if err != nil {
		h.t.Errorf("iteration %d: session %s: reading seqs 1..%d stopped after %d: %v", h.iter, s.id, target, next-1, err)
	}
}

func (h *crashTest) dropSession(s *crashSession) {
	delete(h.bySession, s.id)
	h.sessions = slices.DeleteFunc(h.sessions, func(x *crashSession) bool { return x == s })
}

// ---- reporting ----

// ordered is the session's events 1..max (nil entries where one is missing).
func (s *crashSession) ordered() []*messages.Envelope {
	envs := make([]*messages.Envelope, 0, s.max)
	for seq := uint64(1); seq <= s.max; seq++ {
		if env := s.envs[seq]; env != nil {
			envs = append(envs, env)
		}
	}
	return envs
}

// around lists the session's events near seq, for failure messages.
func (h *crashTest) around(s *crashSession, seq uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  events of session %s around seq %d (seed %d):", s.id, seq, h.seed)
	lo := uint64(1)
	if seq > 8 {
		lo = seq - 8
	}
	for q := lo; q <= seq+4 && q <= s.max; q++ {
		env := s.envs[q]
		if env == nil {
			fmt.Fprintf(&b, "\n    %5d  (not received)", q)
			continue
		}
		mark := " "
		if q == seq {
			mark = ">"
		}
		fmt.Fprintf(&b, "\n  %s %5d  run %.8s  %-20s %-28s %s", mark, q, env.RunID, env.Type, env.Lane.StreamID, crashBrief(env))
	}
	return b.String()
}

func crashBrief(env *messages.Envelope) string {
	switch p := env.Payload.(type) {
	case *messages.InterruptRaisedPayload:
		return fmt.Sprintf("%s %s", p.Kind, p.InterruptID)
	case *messages.InterruptResolvedPayload:
		return fmt.Sprintf("%s %s %s", p.Kind, p.InterruptID, p.Decision)
	case *messages.RunErrorPayload:
		b, _ := json.Marshal(p)
		return string(b)
	case *messages.AgentRestartedPayload:
		b, _ := json.Marshal(p)
		return string(b)
	}
	return ""
}

func (h *crashTest) events() int {
	n := 0
	for _, s := range h.sessions {
		n += int(s.max)
	}
	return n
}

func (h *crashTest) openRuns() int {
	n := 0
	for _, r := range h.runs {
		if r.started && r.terminals == 0 {
			n++
		}
	}
	return n
}

func (h *crashTest) pendingCount() int {
	n := 0
	for _, s := range h.sessions {
		n += len(h.pending(s))
	}
	return n
}

func (h *crashTest) describeOpen() string {
	var b strings.Builder
	for _, r := range h.runs {
		if r.started && r.terminals == 0 {
			fmt.Fprintf(&b, "\n  run %s (session %s)", r.id, r.session.id)
		}
	}
	for _, s := range h.sessions {
		b.WriteString("\n" + h.around(s, s.max))
	}
	return b.String()
}

// TestCrash_EveryJournalPrefixRecovers is the deterministic companion of
// TestCrash_KillNineRecovers. A kill -9 leaves the journal ending at a batch
// boundary, and the hub may flush after any event, so every prefix of a
// run's events is a state a crash can leave. For each prefix of a finished
// run (sub-agents and tools included), an engine recovering from a journal
// holding exactly that prefix must finish the run with run_finished, and the
// whole session must satisfy testkit.Check.
func TestCrash_EveryJournalPrefixRecovers(t *testing.T) {
	t.Parallel()
	src := testkit.NewEngine(t, actors.Config{})
	const session = "prefixes"
	_, events := testkit.RunCouncil(t, src, messages.StartRun{Question: "q", SessionID: session, Scenario: &messages.Scenario{
		Nodes: 3, Waves: 2, Tokens: 3, SynthesisTokens: 3, ToolsPerNode: 1, SubagentsPerNode: 1, Seed: 7}})
	testkit.AssertInvariants(t, events)
	for k := 1; k < len(events); k++ {
		t.Run(fmt.Sprintf("after_seq_%03d_%s", k, events[k-1].Type), func(t *testing.T) {
			t.Parallel()
			j := journal.NewMemory()
			batch := make([]*messages.Encoded, k)
			for i, env := range events[:k] {
				enc, err := messages.Encode(env)
				if err != nil {
					t.Fatal(err)
				}
				batch[i] = enc
			}
			ctx, cancel := context.WithTimeout(context.Background(), crashWait)
			defer cancel()
			if err := j.Append(ctx, session, batch); err != nil {
				t.Fatal(err)
			}
			e := testkit.NewEngine(t, actors.Config{Journal: j, KeepRunsOnShutdown: true})
			p, err := testkit.NewProbe(ctx, e, "", session, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			got, err := p.Until(ctx, testkit.TerminalOf(events[0].RunID))
			if err != nil {
				t.Fatalf("the run did not end after recovering from seqs 1..%d: %v", k, err)
			}
			for _, v := range testkit.Check(got) {
				t.Errorf("journal cut after seq %d (%s): %s", k, events[k-1].Type, v)
			}
			if last := got[len(got)-1]; last.Type != messages.RunFinished {
				t.Errorf("journal cut after seq %d (%s): the run ended with %s", k, events[k-1].Type, last.Type)
			}
		})
	}
}
