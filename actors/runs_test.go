package actors_test

import (
	"context"
	"errors"
	"testing"

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
