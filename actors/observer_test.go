package actors_test

import (
	"sync"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// recordingObserver keeps what it is told.
type recordingObserver struct {
	mu     sync.Mutex
	tenant []messages.TenantID
	events []*messages.Envelope
}

func (o *recordingObserver) Observe(tenant messages.TenantID, events []*messages.Envelope) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, env := range events {
		o.tenant = append(o.tenant, tenant)
		o.events = append(o.events, env)
	}
}

// TestEngine_ObserversSeeEveryJournaledEvent: every event of a run reaches
// each observer once, in seq order, with its tenant, before a subscriber
// sees the run end.
func TestEngine_ObserversSeeEveryJournaledEvent(t *testing.T) {
	t.Parallel()
	a, b := &recordingObserver{}, &recordingObserver{}
	e := testkit.NewEngine(t, actors.Config{Observers: []actors.Observer{a, b}})
	sc := messages.Scenario{Nodes: 3, Waves: 2, Tokens: 4, Calls: []string{"search"}}
	_, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc, Tenant: "acme"})
	for _, o := range []*recordingObserver{a, b} {
		o.mu.Lock()
		if len(o.events) != len(events) {
			t.Fatalf("observed %d events, the stream had %d", len(o.events), len(events))
		}
		for i, env := range o.events {
			if env.Seq != events[i].Seq || env.Type != events[i].Type || o.tenant[i] != "acme" {
				t.Fatalf("observed event %d: seq %d %s tenant %q, want seq %d %s tenant acme", i, env.Seq, env.Type, o.tenant[i], events[i].Seq, events[i].Type)
			}
		}
		o.mu.Unlock()
	}
}
