package actors_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// gatedPlacement is a Placement whose Release waits for the test.
type gatedPlacement struct {
	gate chan struct{} // Release waits for it to close

	mu       sync.Mutex
	held     map[messages.SessionID]bool
	claims   int
	releases int
	entered  bool // a Release is waiting at the gate
}

func (p *gatedPlacement) Claim(_ context.Context, key messages.SessionID) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held[key] = true
	p.claims++
	return nil
}

func (p *gatedPlacement) Holds(key messages.SessionID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[key]
}

// Release waits for the gate only: the engine's own timeout on it
// (releaseTimeout) would pass while the test sleeps its idle minutes.
func (p *gatedPlacement) Release(_ context.Context, key messages.SessionID) error {
	p.mu.Lock()
	p.entered = true
	p.mu.Unlock()
	<-p.gate
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held[key] = false
	p.releases++
	return nil
}

func (p *gatedPlacement) counts() (claims, releases int, entered bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.claims, p.releases, p.entered
}

// TestEngine_IdleSessionIsGivenUp: in cluster mode the session of an idle
// hub is given up (Placement.Release). A run started while that is under
// way waits for it, then claims the session again: it never starts in a
// session the node no longer holds.
func TestEngine_IdleSessionIsGivenUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := &gatedPlacement{gate: make(chan struct{}), held: map[messages.SessionID]bool{}}
		e := testkit.NewEngine(t, actors.Config{HubIdleAfter: time.Minute, Placement: p})
		closeGate := sync.OnceFunc(func() { close(p.gate) })
		t.Cleanup(closeGate) // before the engine's shutdown, which waits for the release
		key := actors.JournalKey("", "s")
		_, first := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", SessionID: "s", Scenario: &messages.Scenario{Nodes: 1, Tokens: 1}})
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if claims, _, entered := p.counts(); claims != 1 || !entered {
			t.Fatalf("after two idle minutes: %d claims, release entered %v; want 1 and a release under way", claims, entered)
		}
		if h := e.Stats().Hubs; h != 0 {
			t.Fatalf("hubs = %d, want 0", h)
		}

		started := make(chan []*messages.Envelope)
		go func() {
			_, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "again", SessionID: "s", Scenario: &messages.Scenario{Nodes: 1, Tokens: 1}})
			started <- events
		}()
		synctest.Wait()
		select {
		case <-started:
			t.Fatal("a run started while its session was being given up")
		default:
		}
		closeGate() // the release completes: the start claims the session again
		events := <-started
		claims, releases, _ := p.counts()
		if claims != 3 || releases != 1 || !p.Holds(key) {
			t.Fatalf("claims %d, releases %d, held %v; want 3 (the run's, then again once given up), 1, held", claims, releases, p.Holds(key))
		}
		if events[len(first)].Seq != uint64(len(first)+1) {
			t.Fatalf("the second run starts at seq %d, want %d", events[len(first)].Seq, len(first)+1)
		}
		testkit.AssertInvariants(t, events)
	})
}
