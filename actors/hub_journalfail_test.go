package actors_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// breakableJournal journals until it is broken, then refuses every append.
type breakableJournal struct {
	*journal.Memory
	mu  sync.Mutex
	err error
}

func (j *breakableJournal) Append(ctx context.Context, s messages.SessionID, evs []*messages.Encoded) error {
	j.mu.Lock()
	err := j.err
	j.mu.Unlock()
	if err != nil {
		return err
	}
	return j.Memory.Append(ctx, s, evs)
}

func (j *breakableJournal) breakWith(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.err = err
}

// TestHub_UnrecordedEndListsRunFailed: the journal fails while a run goes
// on (it is parked on its plan gate when the journal breaks, then
// approved): the run ends, but its terminal event is not recorded. It is
// listed failed (code internal, saying why), not running for good as
// before, when the run index waited for a terminal event that never came.
func TestHub_UnrecordedEndListsRunFailed(t *testing.T) {
	t.Parallel()
	j := &breakableJournal{Memory: journal.NewMemory()}
	e := testkit.NewEngine(t, actors.Config{Journal: j})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", HITL: messages.HITLPlan, SessionID: "s",
		Scenario: &messages.Scenario{Nodes: 2, Waves: 1, Tokens: 2}})
	if err != nil {
		t.Fatal(err)
	}
	probe, err := testkit.NewProbe(ctx, e, "", "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	var gate string
	if _, err := probe.Until(ctx, func(env *messages.Envelope) bool {
		if pl, ok := env.Payload.(*messages.InterruptRaisedPayload); ok {
			gate = pl.InterruptID
		}
		return gate != ""
	}); err != nil {
		t.Fatal(err)
	}
	j.breakWith(journal.ErrWriteFailed)
	_, _ = e.Resume(messages.Resume{InterruptID: gate, Decision: messages.DecisionApprove}) // its record may fail: the run goes on

	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		sum, err := e.Run("", ref.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Status.Terminal() {
			if sum.Status != messages.StatusFailed || sum.ErrorCode != messages.ErrCodeInternal || !strings.Contains(sum.Error, "not recorded") || sum.EndedAt == nil {
				t.Fatalf("run listed %s (%s: %q), want failed (internal: not recorded)", sum.Status, sum.ErrorCode, sum.Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run still listed %s 10 s after the journal failed", sum.Status)
		}
		<-tick.C
	}
	if n := e.RunsByStatus()[messages.StatusFailed]; n != 1 {
		t.Fatalf("RunsByStatus()[failed] = %d, want 1", n)
	}
}
