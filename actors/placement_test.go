package actors_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/journal"
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

// gatedReads is a memory journal whose reads of one session wait for gate.
type gatedReads struct {
	*journal.Memory
	key     messages.SessionID
	gate    chan struct{}
	reading chan struct{} // closed by the first read that waits
	once    sync.Once
}

func (g *gatedReads) ReadAfter(ctx context.Context, s messages.SessionID, after uint64, limit int) ([]*messages.Encoded, error) {
	if s == g.key {
		g.once.Do(func() { close(g.reading) })
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Memory.ReadAfter(ctx, s, after, limit)
}

// TestEngine_AdoptReadsOffTheActor: a node that takes a session over reads
// and folds its runs' events before it asks the engine actor to start
// them, so while those reads are slow (a big session, a JetStream leader
// election) the node's other requests are served.
func TestEngine_AdoptReadsOffTheActor(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	mem := journal.NewMemory()
	// A run parked on its plan gate, frozen by its node's shutdown.
	before, err := actors.New(actors.Config{Journal: mem, KeepRunsOnShutdown: true, Logger: testkit.TestLogger(t, 8)})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := before.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "s", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 1, Tokens: 1}})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, func() bool {
		list, _, _ := before.PendingInterrupts(ctx, "", "s", "", 10)
		return len(list) == 1
	})
	if err := before.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	key := actors.JournalKey("", "s")
	j := &gatedReads{Memory: mem, key: key, gate: make(chan struct{}), reading: make(chan struct{})}
	p := &gatedPlacement{gate: make(chan struct{}), held: map[messages.SessionID]bool{}}
	close(p.gate)
	e := testkit.NewEngine(t, actors.Config{Journal: j, Placement: p, SleepAfter: -1})
	adopted := make(chan error, 1)
	go func() { adopted <- e.Adopt(ctx, key) }()
	<-j.reading
	// The adoption waits on its reads; another session's run starts.
	startCtx, cancelStart := context.WithTimeout(ctx, 5*time.Second)
	defer cancelStart()
	if _, err := e.StartRun(startCtx, messages.StartRun{Question: "q", SessionID: "t", Scenario: &messages.Scenario{Nodes: 1, Tokens: 1}}); err != nil {
		t.Fatalf("StartRun while a session is being adopted: %v", err)
	}
	close(j.gate)
	if err := <-adopted; err != nil {
		t.Fatal(err)
	}
	list, _, err := e.PendingInterrupts(ctx, "", "s", "", 10)
	if err != nil || len(list) != 1 || list[0].RunID != ref.RunID {
		t.Fatalf("after the adoption: %+v, %v; want the run's plan gate", list, err)
	}
}
