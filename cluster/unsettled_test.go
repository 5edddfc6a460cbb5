package cluster_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/cluster"
	"github.com/conclave-ai/conclave/internal/natstest"
	"github.com/conclave-ai/conclave/messages"
)

// A node dies holding a session with an open interrupt. The tenant-wide
// interrupts list, asked of the other node throughout, is never a 200
// without that interrupt: 503 with Retry-After while the dead node is
// still a member (it does not answer), after its lease lapsed while no
// node has taken the session over (before, 200 and an empty list), and
// while the takeover runs (held here until the list was asked); then 200
// with the interrupt, from its new owner.
func TestForwarder_TenantWideListWaitsForTakeovers(t *testing.T) {
	srv := natstest.Start(t)
	ncA := natstest.Connect(t, srv)
	a := join(t, ncA, "a", time.Second)
	ncB := natstest.Connect(t, srv)
	b := join(t, ncB, "b", time.Second)
	fa := cluster.NewForwarder(ncA, a.node, cluster.ForwardOptions{Logger: quiet, Timeout: time.Second})
	fb := cluster.NewForwarder(ncB, b.node, cluster.ForwardOptions{Logger: quiet, Timeout: time.Second})
	t.Cleanup(func() { _ = fa.Shutdown(context.Background()); _ = fb.Shutdown(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const session = messages.SessionID("t1/s1")
	if err := a.node.Claim(ctx, session); err != nil {
		t.Fatal(err)
	}
	// Each node's API lists the session's interrupt while it holds it.
	api := func(m *member) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			list := messages.InterruptList{Interrupts: []messages.Interrupt{}}
			if m.node.Holds(session) {
				list.Interrupts = append(list.Interrupts, messages.Interrupt{SessionID: "s1", RunID: "r",
					InterruptRaisedPayload: &messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptNodeApproval}})
			}
			_ = json.NewEncoder(w).Encode(list)
		})
	}
	if err := fa.Serve(api(a)); err != nil {
		t.Fatal(err)
	}
	hb := fb.Handler(api(b))
	var phase atomic.Int32 // 0 a alive, 1 a killed, 2 b's takeover held, 3 released
	// list asks b; it fails the test on a 200 without the interrupt.
	list := func() int {
		rec := httptest.NewRecorder()
		hb.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/interrupts", nil))
		var l messages.InterruptList
		switch {
		case rec.Code == http.StatusServiceUnavailable && rec.Header().Get("Retry-After") != "":
		case rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &l) != nil:
			t.Fatalf("list: %d %s", rec.Code, rec.Body.String())
		case len(l.Interrupts) != 1 || l.Interrupts[0].InterruptID != "i1":
			t.Fatalf("list: 200 with %+v, want the open interrupt i1 (or 503); phase %d", l.Interrupts, phase.Load())
		}
		return rec.Code
	}
	until(t, 10*time.Second, "b lists a's interrupt", func() bool { return list() == http.StatusOK })

	adopting, release := make(chan struct{}), make(chan struct{})
	b.node.OnAdopt(func(context.Context, messages.SessionID) error {
		close(adopting)
		<-release
		return nil
	})
	phase.Store(1)
	ncA.Close() // a dies: it stops answering, and its lease lapses
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting; {
		list()
		select {
		case <-adopting:
			waiting = false
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("b did not take the session over")
		}
	}
	phase.Store(2)
	for range 3 {
		if code := list(); code != http.StatusServiceUnavailable {
			t.Fatalf("list during the takeover: %d, want 503", code)
		}
	}
	phase.Store(3)
	close(release)
	until(t, 10*time.Second, "b lists the interrupt it took over", func() bool { return list() == http.StatusOK })
}
