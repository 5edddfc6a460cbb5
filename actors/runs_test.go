package actors_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/runindex"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// lostSummaries drops every summary the engine stores, as a crash between
// a run's end and its summary's store would.
type lostSummaries struct{ *journal.Memory }

func (lostSummaries) PutRunSummary(context.Context, messages.RunID, []byte) error { return nil }

// TestEngine_EndedRunsLeaveMemory: an ended run's summary leaves the
// in-memory index for the journal's catalogue, and reads and listings
// return the same summary as before; a lost summary is folded again from
// the run's events.
func TestEngine_EndedRunsLeaveMemory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		j    journal.Journal
	}{
		{"stored", journal.NewMemory()},
		{"lost", lostSummaries{journal.NewMemory()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := testkit.NewEngine(t, actors.Config{Journal: tc.j, Limits: unlimited})
			ctx := context.Background()
			var refs []actors.RunRef
			var finals []*messages.RunFinishedPayload
			for i := range 5 {
				session := messages.SessionID("a")
				if i%2 == 1 {
					session = "b"
				}
				ref, events := testkit.RunCouncil(t, e, messages.StartRun{Tenant: "acme", Question: "q", SessionID: session, Scenario: &messages.Scenario{Nodes: 2, Tokens: 2}})
				refs = append(refs, ref)
				finals = append(finals, terminal[*messages.RunFinishedPayload](t, events, ref.RunID))
			}
			// The summaries are stored off the hubs' mailboxes: wait for it.
			testkit.Eventually(t, func() bool { return e.Stats().IndexedRuns == 0 })
			for i, ref := range refs {
				sum, err := e.Run("acme", ref.RunID)
				if err != nil {
					t.Fatal(err)
				}
				if sum.Status != messages.StatusFinished || sum.Answer != finals[i].Answer || sum.Nodes != finals[i].Nodes ||
					sum.SessionID != ref.SessionID || sum.Question != "q" || sum.EndedAt == nil || sum.CreatedAt.IsZero() {
					t.Fatalf("run %d from the catalogue: %+v", i, sum)
				}
				if _, err := e.Run("globex", ref.RunID); !errors.Is(err, actors.ErrRunNotFound) {
					t.Fatalf("another tenant reads an ended run: %v", err)
				}
				if err := e.Abort(ctx, messages.AbortRun{Tenant: "acme", RunID: ref.RunID}); !errors.Is(err, actors.ErrRunTerminal) {
					t.Fatalf("abort of an ended run = %v", err)
				}
			}
			var all []messages.RunSummary
			var after messages.RunID
			for {
				page, next, err := e.Runs(ctx, runindex.Filter{Tenant: "acme", Limit: 2, After: after})
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, page...)
				if next == "" {
					break
				}
				after = next
			}
			if len(all) != 5 {
				t.Fatalf("listed %d runs, want 5", len(all))
			}
			for i := range all {
				if all[i].RunID != refs[i].RunID {
					t.Fatalf("run %d listed as %s, want %s (start order)", i, all[i].RunID, refs[i].RunID)
				}
			}
			if b, _, err := e.Runs(ctx, runindex.Filter{Tenant: "acme", Session: "b", Limit: 10}); err != nil || len(b) != 2 {
				t.Fatalf("session filter: %d runs, %v", len(b), err)
			}
			if g, _, err := e.Runs(ctx, runindex.Filter{Tenant: "globex", Limit: 10}); err != nil || len(g) != 0 {
				t.Fatalf("globex lists %d runs, %v", len(g), err)
			}
		})
	}
}

// TestEngine_RefoldAfterTrim: a run whose summary was lost and whose
// events retention trimmed still reads as ended, never as planning, and
// that partial summary is not stored.
func TestEngine_RefoldAfterTrim(t *testing.T) {
	t.Parallel()
	j := lostSummaries{journal.NewMemory()}
	e := testkit.NewEngine(t, actors.Config{Journal: j})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", SessionID: "trim", Scenario: &messages.Scenario{Nodes: 2, Tokens: 2}})
	testkit.Eventually(t, func() bool { return e.Stats().IndexedRuns == 0 })
	head := events[len(events)-1].Seq
	if err := j.Trim(context.Background(), actors.JournalKey("", "trim"), head+1); err != nil {
		t.Fatal(err)
	}
	sum, err := e.Run("", ref.RunID)
	if err != nil || !sum.Status.Terminal() || sum.ErrorCode != messages.ErrCodeInternal {
		t.Fatalf("a trimmed run with no summary reads %+v, %v; want an ended run", sum, err)
	}
}

// TestEngine_LargeAnswerStaysInTheJournal: a summary too large for the
// catalogue is stored without its answer, which is read from the run's
// terminal event.
func TestEngine_LargeAnswerStaysInTheJournal(t *testing.T) {
	t.Parallel()
	j := journal.NewMemory()
	e := testkit.NewEngine(t, actors.Config{Journal: j, Limits: unlimited})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, Tokens: 1, SynthesisTokens: 200_000}})
	fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	if len(fin.Answer) <= journal.MaxRunSummary {
		t.Fatalf("the answer has %d bytes; the test needs more than %d", len(fin.Answer), journal.MaxRunSummary)
	}
	testkit.Eventually(t, func() bool { return e.Stats().IndexedRuns == 0 })
	if info, ok, err := j.Run(context.Background(), ref.RunID); err != nil || !ok || len(info.Summary) == 0 || len(info.Summary) > 64<<10 {
		t.Fatalf("the stored summary: %d bytes, %v, %v; want a small one", len(info.Summary), ok, err)
	}
	sum, err := e.Run("", ref.RunID)
	if err != nil || sum.Status != messages.StatusFinished || sum.Answer != fin.Answer {
		t.Fatalf("the run read back: status %s, answer of %d bytes (want %d), %v", sum.Status, len(sum.Answer), len(fin.Answer), err)
	}
}

// slowSummaries holds every summary store until release is closed.
type slowSummaries struct {
	*journal.Memory
	release chan struct{}
}

func (j slowSummaries) PutRunSummary(ctx context.Context, run messages.RunID, b []byte) error {
	<-j.release
	return j.Memory.PutRunSummary(ctx, run, b)
}

// TestEngine_ShutdownFinishesOnRetry: a Shutdown whose context ends part
// way (here while summaries are being stored) is finished by the next call.
func TestEngine_ShutdownFinishesOnRetry(t *testing.T) {
	t.Parallel()
	j := slowSummaries{Memory: journal.NewMemory(), release: make(chan struct{})}
	e, err := actors.New(actors.Config{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, Tokens: 1}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := e.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first Shutdown = %v, want the deadline", err)
	}
	close(j.release)
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Shutdown = %v", err)
	}
	select {
	case <-e.Done():
	default:
		t.Fatal("Done is not closed after Shutdown returned nil")
	}
}
