package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/conclave-ai/conclave/actors/interrupts"
	"github.com/conclave-ai/conclave/cluster"
	"github.com/conclave-ai/conclave/internal/natstest"
	"github.com/conclave-ai/conclave/messages"
)

// A call to the wrong node is answered by the right one: on a 421 with
// the owner's id, to the owner; on a 404, by whichever other node has it.
func TestForwarder_RoutesToTheNodeThatHasIt(t *testing.T) {
	srv := natstest.Start(t)
	a := join(t, natstest.Connect(t, srv), "a", time.Second)
	bConn := natstest.Connect(t, srv)
	b := join(t, bConn, "b", time.Second)
	aConn := natstest.Connect(t, srv)
	fa := cluster.NewForwarder(aConn, a.node, cluster.ForwardOptions{Logger: quiet})
	fb := cluster.NewForwarder(bConn, b.node, cluster.ForwardOptions{Logger: quiet})
	t.Cleanup(func() { _ = fa.Shutdown(context.Background()); _ = fb.Shutdown(context.Background()) })
	// a knows nothing: it says b owns the session, or that it has no such interrupt.
	aAPI := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/runs" {
			w.Header().Set(messages.OwnerHeader, "b")
			w.WriteHeader(http.StatusMisdirectedRequest)
			return
		}
		http.NotFound(w, r)
	})
	// b echoes what it got.
	bAPI := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"path": r.URL.Path, "body": string(body), "from": r.Header.Get(messages.ForwardedHeader), "auth": r.Header.Get("Authorization")})
	})
	if err := fb.Serve(bAPI); err != nil {
		t.Fatal(err)
	}
	h := fa.Handler(aAPI)
	for _, path := range []string{"/api/v1/runs", "/api/v1/interrupts/x/resume"} {
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader([]byte(`{"q":1}`)))
		req.Header.Set("Authorization", "Bearer t")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var got map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &got); rec.Code != http.StatusCreated || err != nil {
			t.Fatalf("%s: %d %q", path, rec.Code, rec.Body.String())
		}
		if got["path"] != path || got["body"] != `{"q":1}` || got["from"] != "a" || got["auth"] != "Bearer t" {
			t.Fatalf("%s: b got %v", path, got)
		}
	}
	if n := metric(t, a.node.Collector(fa), "conclave_cluster_forwarded_total", "call"); n != 2 {
		t.Fatalf("conclave_cluster_forwarded_total{kind=call} = %v, want 2", n)
	}
}

// An answer too large for one NATS message is a prompt 502, not a call
// left to its timeout.
func TestForwarder_AnswerTooLarge(t *testing.T) {
	srv := natstest.Start(t)
	a := join(t, natstest.Connect(t, srv), "a", time.Second)
	bConn := natstest.Connect(t, srv)
	b := join(t, bConn, "b", time.Second)
	fa := cluster.NewForwarder(natstest.Connect(t, srv), a.node, cluster.ForwardOptions{Logger: quiet, Timeout: 10 * time.Second})
	fb := cluster.NewForwarder(bConn, b.node, cluster.ForwardOptions{Logger: quiet})
	t.Cleanup(func() { _ = fa.Shutdown(context.Background()); _ = fb.Shutdown(context.Background()) })
	big := bytes.Repeat([]byte("x"), 2<<20)
	if err := fb.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(big) })); err != nil {
		t.Fatal(err)
	}
	h := fa.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(messages.OwnerHeader, "b")
		w.WriteHeader(http.StatusMisdirectedRequest)
	}))
	rec := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/runs/r1", nil))
	if rec.Code != http.StatusBadGateway || !bytes.Contains(rec.Body.Bytes(), []byte("too large to forward")) {
		t.Fatalf("answer = %d %.200s", rec.Code, rec.Body.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("answered after %v", d)
	}
}

// metric reads one sample of a collector.
func metric(t *testing.T, c prometheus.Collector, name, kind string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if kind == "" || len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == kind {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s{kind=%q}", name, kind)
	return 0
}

// GET /api/v1/interrupts without session_id lists the open interrupts of
// every session of the tenant, whichever node owns each: page by page, in
// the order one node holding them all would list them. A member that does
// not answer makes the list 503, not a list without its interrupts.
func TestForwarder_GathersTenantWideInterrupts(t *testing.T) {
	srv := natstest.Start(t)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var (
		fwd  []*cluster.Forwarder
		apis []http.Handler
		want []string
	)
	regs := make([]*interrupts.Registry, 3)
	for i, id := range []string{"a", "b", "c"} {
		nc := natstest.Connect(t, srv)
		m := join(t, nc, id, 10*time.Second)
		f := cluster.NewForwarder(nc, m.node, cluster.ForwardOptions{Logger: quiet})
		t.Cleanup(func() { _ = f.Shutdown(context.Background()) })
		reg := interrupts.New(func() time.Time { return at })
		regs[i] = reg
		// The node's own API: its registry's page, as transport serves it.
		api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
			list, next, err := reg.PendingAll("t1", r.URL.Query().Get("cursor"), limit)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			_ = json.NewEncoder(w).Encode(messages.InterruptList{Interrupts: list, NextCursor: next})
		})
		if err := f.Serve(api); err != nil {
			t.Fatal(err)
		}
		fwd, apis = append(fwd, f), append(apis, api)
	}
	for i, node := range []int{2, 0, 1, 1, 2, 0, 2} {
		id := fmt.Sprintf("i%d", i)
		in := messages.Interrupt{InterruptRaisedPayload: &messages.InterruptRaisedPayload{InterruptID: id, Kind: messages.InterruptNodeApproval},
			SessionID: messages.SessionID(fmt.Sprintf("s%d", node)), RunID: "r", AgentID: "n001", Seq: 1}
		created := at.Add(time.Duration(i) * time.Second)
		regs[node].RaiseAt("t1", in, created, created.Add(time.Hour), messages.DecisionReject, func(*messages.Resolution) {}, nil)
		want = append(want, id)
	}
	list := func(h http.Handler, cursor string) (int, messages.InterruptList, http.Header) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/interrupts?limit=3&cursor="+cursor, nil))
		var l messages.InterruptList
		_ = json.Unmarshal(rec.Body.Bytes(), &l)
		return rec.Code, l, rec.Header()
	}
	// Through b: pages of 3, every node's interrupts, oldest first.
	var got []string
	for cursor, pages := "", 0; ; pages++ {
		code, page, _ := list(fwd[1].Handler(apis[1]), cursor)
		if code != http.StatusOK || pages > 5 {
			t.Fatalf("page %d: %d %+v", pages, code, page)
		}
		for _, in := range page.Interrupts {
			got = append(got, in.InterruptID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	// c stops answering while its membership lasts.
	if err := fwd[2].Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, _, header := list(fwd[0].Handler(apis[0]), "")
	if code != http.StatusServiceUnavailable || header.Get("Retry-After") == "" {
		t.Fatalf("with c silent: %d, Retry-After %q; want 503 and a Retry-After", code, header.Get("Retry-After"))
	}
}

// A call forwarded to an owner that stopped renewing its membership (it
// was stopped: its forwarded calls arrive and are never answered) is
// answered 503 with Retry-After once the owner is late (3/4 of its lease
// without a renewal), not after the 15 s forward timeout; an owner that
// is slow but renews is waited for.
func TestForwarder_LateOwnerAnswers503(t *testing.T) {
	srv := natstest.Start(t)
	const lease = 2 * time.Second
	a := join(t, natstest.Connect(t, srv), "a", lease)
	// b's membership and its forwarded calls on separate connections:
	// closing the first stops its renewals, as a stopped process's.
	bMember := natstest.Connect(t, srv)
	b := join(t, bMember, "b", lease)
	fa := cluster.NewForwarder(natstest.Connect(t, srv), a.node, cluster.ForwardOptions{Logger: quiet, Timeout: 15 * time.Second})
	fb := cluster.NewForwarder(natstest.Connect(t, srv), b.node, cluster.ForwardOptions{Logger: quiet})
	released := make(chan struct{})
	t.Cleanup(func() {
		close(released)
		_ = fa.Shutdown(context.Background())
		_ = fb.Shutdown(context.Background())
	})
	slow := 2 * lease // longer than an owner may go without renewing
	if err := fb.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/runs/slow" {
			select { // a slow call: b's renewals go on meanwhile
			case <-time.After(slow):
			case <-released:
			}
			w.WriteHeader(http.StatusOK)
			return
		}
		<-released // stopped: never answers
	})); err != nil {
		t.Fatal(err)
	}
	h := fa.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(messages.OwnerHeader, "b")
		w.WriteHeader(http.StatusMisdirectedRequest)
	}))
	call := func(path string) (*httptest.ResponseRecorder, time.Duration) {
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader([]byte(`{}`))))
		return rec, time.Since(start)
	}

	if rec, d := call("/api/v1/runs/slow"); rec.Code != http.StatusOK || d < slow {
		t.Fatalf("a slow call to a live owner: %d after %v, want 200 after %v", rec.Code, d, slow)
	}

	bMember.Close() // b stops renewing
	rec, d := call("/api/v1/interrupts/x/resume")
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" ||
		!bytes.Contains(rec.Body.Bytes(), []byte(`"unavailable"`)) {
		t.Fatalf("a call to a stopped owner: %d Retry-After %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
	}
	// 3/4 of the lease plus a read of its key (every lease/8) at most;
	// well before the 15 s timeout even on a loaded machine.
	if d > 5*time.Second {
		t.Fatalf("a call to a stopped owner answered after %v", d)
	}
}
