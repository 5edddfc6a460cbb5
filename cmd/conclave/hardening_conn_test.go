package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// Black-box tests of the connection limits against a real `conclave serve`
// process (the test binary in child mode, as in crash_test.go). Each one
// failed on the server before the limits (commit 5191605).

// hardenToken is the one tenant's token of the servers that need tokens.
const hardenToken = "token-aaaaaaaaaaaaaaaa"

// startServe starts `conclave serve --memory` with args (without --memory
// when args name a --data directory) and waits until it listens. With
// ulimit > 0 it runs under `ulimit -n ulimit`. The process is stopped
// (SIGTERM, then SIGKILL) when the test ends. With CONCLAVE_TEST_SERVE_BIN
// set it runs that binary instead (see serveArgv in hardening_test.go).
func startServe(t *testing.T, ulimit int, env []string, args ...string) *crashChild {
	t.Helper()
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("needs a POSIX shell and signals")
	}
	argv := serveArgv(t, args)
	var cmd *exec.Cmd
	if ulimit > 0 {
		// Both limits: the Go runtime raises the soft one to the hard one.
		cmd = exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$@"`, ulimit), "sh"}, argv...)...)
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
	}
	cmd.Env = append(append(os.Environ(), crashChildEnv+"=1"), env...)
	c := startChild(t, cmd, "")
	t.Cleanup(func() {
		if !c.exited {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			c.reap()
		}
		for _, line := range c.log.problems() {
			t.Errorf("server log: %s", line)
		}
	})
	return c
}

// skipSSERetry skips the "retry:" block that starts a stream, if there
// is one, and returns the rest (testkit's strict reader knows only the
// fields of events; the transport tests check the block itself).
func skipSSERetry(body io.Reader) (io.Reader, error) {
	br := bufio.NewReader(body)
	head, err := br.Peek(len("retry:"))
	if err != nil || string(head) != "retry:" {
		return br, nil //nolint:nilerr // a short stream: the reader reports it
	}
	for range 2 { // "retry: N\n" and the blank line
		if _, err := br.ReadString('\n'); err != nil {
			return nil, fmt.Errorf("the stream's retry block: %w", err)
		}
	}
	return br, nil
}

// closedWithin reads conn until it ends and reports how long that took; it
// fails the test if the server keeps the connection open past limit.
func closedWithin(t *testing.T, conn net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, conn)
	took := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v", limit)
	}
	return took
}

// TestServe_IdleKeepAliveClosed: a keep-alive connection that sends no
// second request is closed after --idle-timeout.
func TestServe_IdleKeepAliveClosed(t *testing.T) {
	t.Parallel()
	srv := startServe(t, 0, nil, "--idle-timeout", "1s")
	conn, err := net.Dial("tcp", srv.base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /healthz = %d (close %v), want 200 keep-alive", resp.StatusCode, resp.Close)
	}
	took := closedWithin(t, conn, 5*time.Second)
	if took < 500*time.Millisecond {
		t.Errorf("closed after %v, before the idle timeout (1s)", took)
	}
	t.Logf("idle keep-alive connection closed after %v", took)
}

// trickle sends a POST's headers and then its body one byte a second,
// until the connection fails or stop is closed. The pace is the
// experiment, not a way to wait for something.
func trickle(conn net.Conn, hdr string, stop <-chan struct{}) {
	if _, err := io.WriteString(conn, hdr); err != nil {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if _, err := conn.Write([]byte{' '}); err != nil {
			return
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

func trickleHeader(token string) string {
	h := "POST /api/v1/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n"
	if token != "" {
		h += "Authorization: Bearer " + token + "\r\n"
	}
	return h + "\r\n"
}

// TestServe_TrickledBodyIsCut: a body trickled at one byte a second is cut
// within --read-timeout; with a wrong token the request is answered 401
// and closed at once, its body unread.
func TestServe_TrickledBodyIsCut(t *testing.T) {
	t.Parallel()
	srv := startServe(t, 0, []string{"CONCLAVE_TOKENS=acme:" + hardenToken}, "--read-timeout", "2s")
	for _, tc := range []struct {
		name, token string
		within      time.Duration
		status      int
	}{
		{"valid token", hardenToken, 5 * time.Second, http.StatusBadRequest},
		{"wrong token", "token-wrong-wrong-wrong", 2 * time.Second, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", srv.base)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			stop := make(chan struct{})
			trickled := make(chan struct{})
			go func() { defer close(trickled); trickle(conn, trickleHeader(tc.token), stop) }()
			defer func() { close(stop); <-trickled }()
			start := time.Now()
			_ = conn.SetReadDeadline(start.Add(tc.within))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer within %v: %v", tc.within, err)
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			if resp.StatusCode != tc.status {
				t.Errorf("answer %d %s, want %d", resp.StatusCode, b, tc.status)
			}
			// The connection ends too (it does not wait for the body).
			_, err = io.Copy(io.Discard, br)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the connection stayed open %v after the request started", tc.within)
			}
			t.Logf("answered %d and closed after %v", resp.StatusCode, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestServe_HealthzUnderConnectionFlood: under `ulimit -n 1024`, 1,500
// idle connections and 200 slowloris ones (headers or a body with a wrong
// token, one byte a second) do not keep /healthz from answering within 1 s.
func TestServe_HealthzUnderConnectionFlood(t *testing.T) {
	t.Parallel()
	const idle, slow = 1500, 200
	srv := startServe(t, 1024, []string{"CONCLAVE_TOKENS=acme:" + hardenToken})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	d := net.Dialer{Timeout: 2 * time.Second}
	dialFails := 0
	for range idle + slow {
		c, err := d.Dial("tcp", srv.base)
		if err != nil {
			dialFails++ // the flood may overrun the accept queue; that is the attacker's problem
			continue
		}
		conns = append(conns, c)
	}
	stop := make(chan struct{})
	slowDone := make(chan struct{})
	slowConns := conns[max(0, len(conns)-slow):]
	go func() { // one goroutine paces every slowloris connection
		defer close(slowDone)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for i := 0; ; i++ {
			for j, c := range slowConns {
				var b []byte
				if j%2 == 0 { // headers, never finished
					b = []byte("GET /healthz HTTP/1.1\r\nX-Slow: "[min(i, 31):min(i+1, 31)])
					if i >= 31 {
						b = []byte("a")
					}
				} else if i == 0 { // a body with a wrong token
					b = []byte(trickleHeader("token-wrong-wrong-wrong"))
				} else {
					b = []byte(" ")
				}
				_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
				_, _ = c.Write(b)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { close(stop); <-slowDone }()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
	defer client.CloseIdleConnections()
	var worst time.Duration
	// Probes spread over the flood's first seconds; the pace is the
	// experiment, not a synchronisation.
	pace := time.NewTicker(300 * time.Millisecond)
	defer pace.Stop()
	for i := range 10 {
		start := time.Now()
		resp, err := client.Get("http://" + srv.base + "/healthz")
		took := time.Since(start)
		if err != nil {
			t.Fatalf("GET /healthz #%d after %v: %v (%d dials failed)\nserver log:\n%s", i, took, err, dialFails, srv.log.tail(4<<10))
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /healthz #%d = %d", i, resp.StatusCode)
		}
		worst = max(worst, took)
		<-pace.C
	}
	m := metricsText(t, "http://"+srv.base, hardenToken)
	t.Logf("%d connections opened (%d dials failed); /healthz worst %v; %s; %s", len(conns), dialFails, worst,
		metricLine(m, "conclave_connections_evicted_total"), metricLine(m, "conclave_connections_open"))
}

// metricsText fetches /metrics with the token.
func metricsText(t *testing.T, base, token string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// metricLine returns the lines of the metric name (without comments).
func metricLine(text, name string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, name) {
			out = append(out, l)
		}
	}
	return strings.Join(out, ", ")
}

// pacedReader hands at most n bytes per Read, one Read per tick: a client
// that reads about one event a second.
type pacedReader struct {
	r    io.Reader
	n    int
	tick <-chan time.Time
	stop <-chan struct{}
}

func (p *pacedReader) Read(b []byte) (int, error) {
	select {
	case <-p.tick:
	case <-p.stop:
		return 0, io.EOF
	}
	return p.r.Read(b[:min(len(b), p.n)])
}

// TestServe_SlowSSEReaderIsNotCut: a client reading about one event a
// second through a small receive buffer, far behind a long run (~100k
// events, more than the kernel's send buffer holds), is still
// connected after 40 s and has received every event in order.
func TestServe_SlowSSEReaderIsNotCut(t *testing.T) {
	t.Parallel()
	const hold = 40 * time.Second
	srv := startServe(t, 0, nil)
	base := "http://" + srv.base
	body, _ := json.Marshal(messages.StartRun{Question: "a long run", Scenario: &messages.Scenario{Nodes: 16, Tokens: 6000}})
	resp, err := http.Post(base+"/api/v1/runs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var rc messages.RunCreated
	if err := json.NewDecoder(resp.Body).Decode(&rc); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/v1/runs = %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()

	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }); err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", srv.base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /api/v1/events/stream?session_id="+url.QueryEscape(string(rc.SessionID))+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	deadline := time.AfterFunc(hold, func() { close(stop) })
	defer deadline.Stop()
	br := bufio.NewReaderSize(&pacedReader{r: conn, n: 300, tick: tick.C, stop: stop}, 64<<10)
	sresp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sresp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream = %d", sresp.StatusCode)
	}
	sbody, err := skipSSERetry(sresp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := testkit.NewSSEReader(sbody)
	var next uint64 = 1
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			select {
			case <-stop: // our own end after hold: the server never cut us
			default:
				t.Fatalf("the stream ended after seq %d: %v\nserver log:\n%s", next-1, err, srv.log.tail(4<<10))
			}
			break
		}
		if err != nil {
			t.Fatalf("after seq %d: %v", next-1, err)
		}
		if f.Comment != "" {
			continue
		}
		if f.Event == "stream_closed" {
			t.Fatalf("the server closed the stream after seq %d: %s", next-1, f.Data)
		}
		if seq, _ := strconv.ParseUint(f.ID, 10, 64); seq != next {
			t.Fatalf("frame id %q, want %d (gapless)", f.ID, next)
		}
		next++
	}
	if next < 20 {
		t.Fatalf("only %d events in %v", next-1, hold)
	}
	// The client is far behind: the lag metric says so, counting what the
	// server's socket still holds.
	m := metricsText(t, base, "")
	lag := metricLine(m, "conclave_stream_lag_events_max")
	t.Logf("received seqs 1..%d in %v; %s; %s", next-1, hold, lag, metricLine(m, "conclave_stream_lag_bytes_max"))
	if v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(lag, "conclave_stream_lag_events_max")), 64); err != nil || v < 100 {
		t.Errorf("%s: want the client's backlog (>= 100 events)", lag)
	}
}
