package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
