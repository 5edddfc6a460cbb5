package runindex_test

import (
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors/runindex"
	"github.com/conclave-ai/conclave/messages"
)

func env(seq uint64, run messages.RunID, p messages.Payload) *messages.Envelope {
	return &messages.Envelope{Seq: seq, Type: p.EventType(), RunID: run, Timestamp: time.Unix(int64(seq), 0).UTC(), Payload: p}
}

func TestIndex_FoldLifecycle(t *testing.T) {
	t.Parallel()
	x := runindex.New()
	x.Register("t1", "r1", "s1", "why", time.Unix(0, 0))
	steps := []struct {
		p    messages.Payload
		want messages.RunStatus
	}{
		{&messages.PlanProposedPayload{Plan: messages.Plan{Nodes: []messages.PlanNode{{ID: "a"}, {ID: "b"}}}, Waves: [][]string{{"a"}, {"b"}}}, messages.StatusPlanning},
		{&messages.PlanApprovedPayload{Automatic: true}, messages.StatusRunning},
		{&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"a"}}, messages.StatusRunning},
		{&messages.NodeStartedPayload{NodeID: "a"}, messages.StatusRunning},
		{&messages.NodeCompletedPayload{NodeID: "a"}, messages.StatusRunning},
		{&messages.NodeSkippedPayload{NodeID: "b"}, messages.StatusRunning},
		{&messages.RunErrorPayload{Code: messages.ErrCodeAborted, Message: "stop", Nodes: messages.NodeCounts{Total: 2, Completed: 1, Skipped: 1}}, messages.StatusAborted},
	}
	for i, st := range steps {
		x.Apply(env(uint64(i+1), "r1", st.p))
		got, ok := x.Get("t1", "r1")
		if !ok || got.Status != st.want {
			t.Fatalf("after %s: status %q, want %q", st.p.EventType(), got.Status, st.want)
		}
	}
	got, _ := x.Get("t1", "r1")
	if got.Nodes.Total != 2 || got.Nodes.Completed != 1 || got.Nodes.Skipped != 1 || got.ErrorCode != messages.ErrCodeAborted || got.EndedAt == nil || got.LastSeq != 7 || got.Waves != 2 {
		t.Fatalf("summary = %+v", got)
	}
	if _, ok := x.Get("t2", "r1"); ok {
		t.Fatal("another tenant can read the run")
	}
	if c := x.CountByStatus(); c[messages.StatusAborted] != 1 || c[messages.StatusPlanning] != 0 || c[messages.StatusRunning] != 0 {
		t.Fatalf("counts = %v", c)
	}
}

func TestIndex_ListFiltersAndPages(t *testing.T) {
	t.Parallel()
	x := runindex.New()
	for i, r := range []messages.RunID{"r1", "r2", "r3", "r4", "r5"} {
		tenant, session := messages.TenantID("t1"), messages.SessionID("s1")
		if i == 2 {
			tenant = "t2"
		}
		if i == 4 {
			session = "s2"
		}
		x.Register(tenant, r, session, "q", time.Unix(int64(i), 0))
	}
	x.Apply(env(1, "r2", &messages.RunFinishedPayload{}))
	page, next := x.List(runindex.Filter{Tenant: "t1", Limit: 2})
	if len(page) != 2 || page[0].RunID != "r1" || page[1].RunID != "r2" || next != "r2" {
		t.Fatalf("page 1 = %v next %q", page, next)
	}
	page, next = x.List(runindex.Filter{Tenant: "t1", Limit: 2, After: next})
	if len(page) != 2 || page[0].RunID != "r4" || page[1].RunID != "r5" || next != "" {
		t.Fatalf("page 2 = %v next %q", page, next)
	}
	if page, _ := x.List(runindex.Filter{Tenant: "t1", Session: "s2", Limit: 10}); len(page) != 1 || page[0].RunID != "r5" {
		t.Fatalf("session filter = %v", page)
	}
	if page, _ := x.List(runindex.Filter{Tenant: "t1", Status: messages.StatusFinished, Limit: 10}); len(page) != 1 || page[0].RunID != "r2" {
		t.Fatalf("status filter = %v", page)
	}
}
