package transport_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport"
)

// served configures newServedHarness.
type served struct {
	h2     bool                            // HTTP/2 over TLS (else HTTP/1.1, plain)
	wrap   func(http.Handler) http.Handler // middleware around the server's handler
	server func(*http.Server)              // adjusts the httptest server before it starts
	client func(*http.Transport)           // adjusts the client's transport
	listen func(net.Listener) net.Listener // wraps the server's listener
	_      struct{}                        // keyed fields only
}

// newServedHarness serves the server's Handler on an httptest server (not
// Serve: an embedder's server, without the connection tracker), behind
// s.wrap, over HTTP/2 when s.h2. Teardown: engine, server, httptest server.
func newServedHarness(t *testing.T, cfg transport.Config, s served) *harness {
	t.Helper()
	e, err := actors.New(actors.Config{Logger: testkit.TestLogger(t, 8)})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engine = e
	if cfg.Logger == nil {
		cfg.Logger = testkit.TestLogger(t, 8)
	}
	srv, err := transport.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var handler http.Handler = srv.Handler()
	if s.wrap != nil {
		handler = s.wrap(handler)
	}
	ts := httptest.NewUnstartedServer(handler)
	ts.Config.ErrorLog = nil
	if s.server != nil {
		s.server(ts.Config)
	}
	if s.listen != nil {
		ts.Listener = s.listen(ts.Listener)
	}
	if s.h2 {
		ts.EnableHTTP2 = true
		ts.StartTLS()
	} else {
		ts.Start()
	}
	tr := ts.Client().Transport.(*http.Transport).Clone() // speaks h2 when EnableHTTP2 (ForceAttemptHTTP2, the test CA)
	if s.client != nil {
		s.client(tr)
	}
	h := &harness{t: t, engine: e, srv: srv, base: ts.URL, client: &http.Client{Transport: tr, Timeout: testkit.Watchdog}, rt: tr}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Errorf("engine shutdown: %v", err)
		}
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
		ts.Close() // waits for every handler: a held stream still running would hang here (and leak)
		tr.CloseIdleConnections()
	})
	return h
}

// streamPath is which way the server delivered a stream.
type streamPath int

const (
	hijacked streamPath = iota // HTTP/1.1, connection taken over: close-delimited body
	heldH1                     // HTTP/1.1 through the ResponseWriter: chunked body
	heldH2                     // HTTP/2 through the ResponseWriter
)

func (p streamPath) String() string {
	return [...]string{"hijacked", "held HTTP/1.1", "held HTTP/2"}[p]
}

// pathOf tells from the response which path served a stream.
func pathOf(resp *http.Response) streamPath {
	switch {
	case resp.ProtoMajor == 2:
		return heldH2
	case resp.Close && len(resp.TransferEncoding) == 0:
		return hijacked
	default:
		return heldH1
	}
}

// sseEnd is a stream read to its end.
type sseEnd struct {
	events []*messages.Envelope
	final  string // the stream_closed frame's data ("" if none)
	err    error  // what ended the read: io.EOF for a clean end
	pings  int
}

// readToEnd reads a stream's frames until it ends, checking that nothing
// follows the final frame.
func readToEnd(t *testing.T, r *testkit.SSEReader) sseEnd {
	t.Helper()
	var out sseEnd
	for {
		f, err := r.Next()
		if err != nil {
			out.err = err
			return out
		}
		switch {
		case out.final != "":
			t.Fatalf("a frame after the final one: %+v", f)
		case f.Event == "stream_closed":
			out.final = f.Data
		case f.Comment == "ping":
			out.pings++
		case f.Data != "":
			env := new(messages.Envelope)
			if err := json.Unmarshal([]byte(f.Data), env); err != nil {
				t.Fatal(err)
			}
			if f.ID != strconv.FormatUint(env.Seq, 10) || f.Event != string(env.Type) {
				t.Fatalf("frame id/event %q/%q do not match envelope %d/%s", f.ID, f.Event, env.Seq, env.Type)
			}
			out.events = append(out.events, env)
		}
	}
}

// checkSSEStreams is what every way of serving an SSE stream must do alike
// (the hijacked connection and the held ResponseWriter): a real council
// session streamed with every event once and in order, until=run_end,
// Last-Event-ID resume without gap or duplicate, heartbeats on an idle
// stream (for longer than the server's ReadTimeout, when it has one), and
// the shutdown frame. The harness's Heartbeat must be short.
func checkSSEStreams(t *testing.T, h *harness, want streamPath, outlive time.Duration) {
	rc := h.startRun(messages.StartRun{Question: "why is the sky blue", Scenario: &messages.Scenario{
		Nodes: 6, Waves: 3, Tokens: 12, ToolsPerNode: 1, SubagentsPerNode: 1, TokenDelayMS: 1}})
	session := "session_id=" + string(rc.SessionID)

	// Live, until the run's end: every event once, in order, then the
	// final frame and a clean end of the body.
	resp, r := h.sse(context.Background(), session+"&until=run_end&run_id="+string(rc.RunID))
	if got := pathOf(resp); got != want {
		t.Fatalf("served %v (proto %s, close %v, transfer-encoding %v), want %v", got, resp.Proto, resp.Close, resp.TransferEncoding, want)
	}
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	all := readToEnd(t, r)
	resp.Body.Close()
	if all.err != io.EOF || !strings.Contains(all.final, `"code":"run_ended"`) {
		t.Fatalf("until=run_end ended with %v, final frame %q; want the run_ended frame and EOF", all.err, all.final)
	}
	if last := all.events[len(all.events)-1]; last.RunID != rc.RunID || last.Type != messages.RunFinished {
		t.Fatalf("the stream's last event is %s of %s", last.Type, last.RunID)
	}
	assertGapless(t, all.events, 1)
	testkit.AssertInvariants(t, all.events)

	// Resume from a cut, by Last-Event-ID: exactly the rest.
	for _, cut := range []int{1, 7, 40} {
		resp, r := h.sse(context.Background(), session+"&until=run_end", "Last-Event-ID", strconv.Itoa(cut))
		rest := readToEnd(t, r)
		resp.Body.Close()
		if rest.err != io.EOF || len(rest.events) != len(all.events)-cut {
			t.Fatalf("resumed after %d: %d events (%v), want %d", cut, len(rest.events), rest.err, len(all.events)-cut)
		}
		assertGapless(t, rest.events, uint64(cut)+1)
		for i, e := range rest.events {
			if e.ID != all.events[cut+i].ID {
				t.Fatalf("resumed after %d: seq %d is event %s, was %s", cut, e.Seq, e.ID, all.events[cut+i].ID)
			}
		}
	}

	// A live stream that catches up and goes idle: heartbeats, for longer
	// than the server's read timeout; then the server's shutdown frame.
	resp, r = h.sse(context.Background(), session+"&after=5")
	defer resp.Body.Close()
	caught := readUntil(t, r, func(e *messages.Envelope) bool { return e.Seq == all.events[len(all.events)-1].Seq })
	assertGapless(t, caught, 6)
	opened := time.Now()
	for pings := 0; pings < 2 || time.Since(opened) < outlive; pings++ {
		f, err := r.Next()
		if err != nil || f.Comment != "ping" || f.Data != "" {
			t.Fatalf("idle stream frame %d after %v = %+v, %v; want a ping comment", pings, time.Since(opened), f, err)
		}
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
		defer cancel()
		done <- h.srv.Shutdown(ctx)
	}()
	end := readToEnd(t, r)
	if end.err != io.EOF || !strings.Contains(end.final, `"code":"shutdown"`) || len(end.events) != 0 {
		t.Fatalf("at shutdown: %d events, final %q, then %v; want the shutdown frame and EOF", len(end.events), end.final, end.err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
}

// TestSSE_ServedAlike runs checkSSEStreams on every way a stream can be
// served: hijacked (HTTP/1.1), and held by its handler where hijacking is
// impossible (HTTP/2; HTTP/1.1 behind middleware that hides Hijack, with
// and without deadlines).
func TestSSE_ServedAlike(t *testing.T) {
	t.Parallel()
	const readTimeout = 150 * time.Millisecond
	withReadTimeout := func(s *http.Server) { s.ReadTimeout = readTimeout }
	for _, c := range []struct {
		name    string
		served  served
		want    streamPath
		outlive time.Duration // how long an idle stream is read: past the read timeout where it must not apply
	}{
		{"HTTP1", served{server: withReadTimeout}, hijacked, 2 * readTimeout},
		{"HTTP1/unwrapping middleware", served{wrap: middleware(unwrapping), server: withReadTimeout}, hijacked, 2 * readTimeout},
		{"HTTP2", served{h2: true, server: withReadTimeout}, heldH2, 2 * readTimeout},
		{"HTTP2/unwrapping middleware", served{h2: true, wrap: middleware(unwrapping), server: withReadTimeout}, heldH2, 2 * readTimeout},
		{"HTTP2/flushing middleware", served{h2: true, wrap: middleware(flushOnly), server: withReadTimeout}, heldH2, 2 * readTimeout},
		{"HTTP1/controller middleware", served{wrap: middleware(noHijack), server: withReadTimeout}, heldH1, 2 * readTimeout},
		// A writer without deadlines cannot clear the read timeout: served
		// without one (docs/api.md).
		{"HTTP1/flushing middleware", served{wrap: middleware(flushOnly)}, heldH1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newServedHarness(t, transport.Config{Heartbeat: 40 * time.Millisecond}, c.served)
			checkSSEStreams(t, h, c.want, c.outlive)
		})
	}
}

// Middleware whose ResponseWriters hide Hijack to different degrees.

// middleware wraps every ResponseWriter with wrap, as logging or metrics
// middleware does.
func middleware(wrap func(http.ResponseWriter) http.ResponseWriter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { next.ServeHTTP(wrap(w), r) })
	}
}

// unwrappingWriter exposes the writer it wraps through Unwrap, so
// http.ResponseController reaches every feature of it, Hijack included
// where it has one.
type unwrappingWriter struct{ http.ResponseWriter }

func (w unwrappingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func unwrapping(w http.ResponseWriter) http.ResponseWriter { return unwrappingWriter{w} }

// flushWriter has Flush and nothing else: no Hijack, no deadlines, no Unwrap.
type flushWriter struct{ http.ResponseWriter }

func (w flushWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func flushOnly(w http.ResponseWriter) http.ResponseWriter { return flushWriter{w} }

// controllerWriter passes on flushing and deadlines but not Hijack (and
// has no Unwrap).
type controllerWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (w controllerWriter) FlushError() error                  { return w.rc.Flush() }
func (w controllerWriter) SetReadDeadline(d time.Time) error  { return w.rc.SetReadDeadline(d) }
func (w controllerWriter) SetWriteDeadline(d time.Time) error { return w.rc.SetWriteDeadline(d) }
func noHijack(w http.ResponseWriter) http.ResponseWriter {
	return controllerWriter{w, http.NewResponseController(w)}
}

// plainWriter can neither hijack nor flush (it buffers, as
// http.TimeoutHandler's writer does).
type plainWriter struct{ http.ResponseWriter }

func (w plainWriter) Write(b []byte) (int, error) { return w.ResponseWriter.Write(b) }

// TestSSE_UnstreamableWriterIsRefused: a ResponseWriter that can neither
// hijack nor flush cannot carry a stream: the request is answered with a
// JSON error before any byte of a stream, and holds nothing.
func TestSSE_UnstreamableWriterIsRefused(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := newServedHarness(t, transport.Config{Registry: reg}, served{wrap: middleware(func(w http.ResponseWriter) http.ResponseWriter { return plainWriter{w} })})
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: scenario(1, 1)})
	resp, body := h.do("GET", "/api/v1/events/stream?session_id="+string(rc.SessionID), nil)
	if resp.StatusCode != http.StatusInternalServerError || bodyCode(t, resp, body) != "internal" || !strings.Contains(string(body), "neither be hijacked nor flushed") {
		t.Fatalf("= %d %s", resp.StatusCode, body)
	}
	if n := gauge(t, reg, "conclave_stream_connections", "sse"); n != 0 {
		t.Fatalf("%v SSE streams open", n)
	}
}

// TestWS_HTTP2IsRefused: a WebSocket needs HTTP/1.1's Upgrade; over HTTP/2
// the endpoint answers 505 with a JSON error that says so, whatever the
// method.
func TestWS_HTTP2IsRefused(t *testing.T) {
	t.Parallel()
	h := newServedHarness(t, transport.Config{}, served{h2: true})
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: scenario(1, 1)})
	for _, method := range []string{"GET", "POST"} {
		resp, body := h.do(method, "/api/v1/events/ws?session_id="+string(rc.SessionID), nil, "Sec-WebSocket-Version", "13")
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusHTTPVersionNotSupported ||
			bodyCode(t, resp, body) != "http_version_not_supported" || !strings.Contains(string(body), "HTTP/1.1") {
			t.Fatalf("%s over %s = %d %s", method, resp.Proto, resp.StatusCode, body)
		}
	}
}

// TestSSE_HTTP2SlowReaderDelaysNoOne: over one HTTP/2 connection, a stream
// whose reader stops (its flow-control window fills, so the server's write
// blocks) holds back neither the hub nor the other streams of the
// connection; it falls behind to the journal, as on HTTP/1.1, and gets
// every event once it reads again.
func TestSSE_HTTP2SlowReaderDelaysNoOne(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := newServedHarness(t, transport.Config{Registry: reg}, served{h2: true, client: smallH2Window})
	// The run waits at its plan gate until the slow stream follows it live,
	// so that its events are offered to that stream's queue, not read from
	// the journal by a stream that attached after the run ended.
	rc := h.startRun(messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 200, Tokens: 60}})
	slowResp, slow := h.sse(context.Background(), "session_id="+string(rc.SessionID))
	defer slowResp.Body.Close()
	if slowResp.ProtoMajor != 2 {
		t.Fatalf("proto %s", slowResp.Proto)
	}
	first := readUntil(t, slow, func(e *messages.Envelope) bool { return e.Type == messages.InterruptRaised }) // then stall
	gate := first[len(first)-1].Payload.(*messages.InterruptRaisedPayload).InterruptID
	if resp, body := h.do("POST", "/api/v1/interrupts/"+gate+"/resume", messages.Resume{Decision: messages.DecisionApprove}); resp.StatusCode != http.StatusOK {
		t.Fatalf("approve the plan: %d %s", resp.StatusCode, body)
	}
	for range 3 { // on the same connection
		resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID))
		events := readUntil(t, r, terminalOf(rc.RunID))
		resp.Body.Close()
		testkit.AssertInvariants(t, events)
	}
	rest := readUntil(t, slow, terminalOf(rc.RunID))
	// Counted once the stalled stream polls again (after its blocked write),
	// which it did before it wrote the events just read.
	if c := metricValue(t, reg, "conclave_stream_catchup_events_total", "", ""); c == 0 {
		t.Fatal("the stalled stream never fell behind to the journal: the test did not stall it")
	}
	all := append(first, rest...)
	assertGapless(t, all, 1)
	testkit.AssertInvariants(t, all)
}

// smallH2Window makes the client's per-stream HTTP/2 receive window 16 KiB:
// a stream whose body is not read stalls the server's writes early.
func smallH2Window(tr *http.Transport) {
	tr.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: 16 << 10}
}

// TestSSE_HeldMaxLagCutsAStalledClient: a held stream whose client stops
// reading is cut over MaxLagEvents as a hijacked one is (close reason
// lagging): its blocked write gets finalWait, then the stream is reset (or
// ends after its final frame), and the handler returns.
func TestSSE_HeldMaxLagCutsAStalledClient(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		served served
	}{
		{"HTTP2", served{h2: true, client: smallH2Window}},
		// A held HTTP/1.1 stream cannot see its socket's send queue, so the
		// bytes the kernel took count as received (as without the Linux
		// probe): a small send buffer stalls its writes early.
		{"HTTP1/controller middleware", served{wrap: middleware(noHijack), listen: smallSendBuffers}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			h := newServedHarness(t, transport.Config{MaxLagEvents: 200, Heartbeat: 200 * time.Millisecond, Registry: reg}, c.served)
			if !c.served.h2 { // a small socket buffer, to stall early (as in TestSSE_MaxLagCutsAStalledClient)
				h.rt = smallBufferTransport()
			}
			rc := h.startRun(messages.StartRun{Question: "q", Scenario: scenario(8, 500)})
			resp, _ := h.sse(context.Background(), "session_id="+string(rc.SessionID))
			defer resp.Body.Close()
			// The client reads nothing until the server has cut it.
			testkit.Eventually(t, func() bool { return metricValue(t, reg, "conclave_stream_ends_total", "reason", "lagging") > 0 })
			tail := &strings.Builder{}
			_, err := io.Copy(&lastBytes{b: tail}, resp.Body)
			t.Logf("cut; the body ends with %v after %q", err, tail.String())
			testkit.Eventually(t, func() bool { return gauge(t, reg, "conclave_stream_connections", "sse") == 0 })
		})
	}
}

// smallSendBuffers gives accepted connections a 4 KiB send buffer.
func smallSendBuffers(l net.Listener) net.Listener { return sndBufListener{l} }

type sndBufListener struct{ net.Listener }

func (l sndBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// smallBufferTransport dials HTTP/1.1 with a 4 KiB receive buffer.
func smallBufferTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Control: smallRcvBuf}).DialContext
	return tr
}

// TestSSE_HTTP2ClientGoneIsNoticed: an HTTP/2 client that resets its
// stream (closes the body) ends the held stream at once, idle or not: the
// handler returns and the slot is free.
func TestSSE_HTTP2ClientGoneIsNoticed(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := newServedHarness(t, transport.Config{Registry: reg, Heartbeat: time.Hour}, served{h2: true})
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: scenario(1, 1)})
	resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID))
	readUntil(t, r, terminalOf(rc.RunID)) // now idle; no heartbeat for an hour
	if n := gauge(t, reg, "conclave_stream_connections", "sse"); n != 1 {
		t.Fatalf("%v SSE streams open, want 1", n)
	}
	_ = resp.Body.Close()
	testkit.Eventually(t, func() bool { return gauge(t, reg, "conclave_stream_connections", "sse") == 0 })
	if n := metricValue(t, reg, "conclave_stream_ends_total", "reason", "client_gone"); n != 1 {
		t.Fatalf("%v streams ended client_gone, want 1", n)
	}
}

// bodyCode decodes an error body's code.
func bodyCode(t *testing.T, resp *http.Response, body []byte) string {
	t.Helper()
	var eb messages.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil {
		t.Fatalf("%d %s: not an error body: %v", resp.StatusCode, body, err)
	}
	return eb.Error.Code
}

// metricValue returns the value of the metric name whose labels include
// label=value (any, when label is ""), summed.
func metricValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				match = match || (l.GetName() == label && l.GetValue() == value)
			}
			if !match {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// gauge is a metric's value for one transport.
func gauge(t *testing.T, reg *prometheus.Registry, name, transport string) float64 {
	t.Helper()
	return metricValue(t, reg, name, "transport", transport)
}
