package actors_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// TestEngine_IdleHubsStopAndReload: once a session has no live run, no
// subscriber and no event for HubIdleAfter, its hub stops; the session
// still answers from the journal, and its next run continues its seq.
func TestEngine_IdleHubsStopAndReload(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, actors.Config{HubIdleAfter: time.Minute})
		ctx := context.Background()
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", SessionID: "s", Scenario: &messages.Scenario{Nodes: 2, Tokens: 2}})
		if h := e.Stats().Hubs; h != 1 {
			t.Fatalf("hubs = %d while the session is in use", h)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if s := e.Stats(); s.Hubs != 0 || s.LiveRuns != 0 {
			t.Fatalf("after two idle minutes: %+v, want no hub and no run", s)
		}
		head, err := e.Head(ctx, "", "s")
		if err != nil || head != events[len(events)-1].Seq {
			t.Fatalf("head of the idle session = %d, %v; want %d", head, err, events[len(events)-1].Seq)
		}
		if e.Stats().Hubs != 0 {
			t.Fatal("Head started a hub")
		}
		if _, err := e.Head(ctx, "other", "s"); err == nil {
			t.Fatal("another tenant sees the session")
		}
		// A cursor checked against a hub that has just started again from
		// the journal (it must know the head before anything else).
		resumed, err := testkit.Follow(ctx, e, ref, 5)
		if err != nil || len(resumed) != len(events)-5 || resumed[0].Seq != 6 {
			t.Fatalf("resumed after seq 5 on a reloaded hub: %d events, %v", len(resumed), err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		replayed, err := testkit.Follow(ctx, e, ref, 0)
		if err != nil || len(replayed) != len(events) {
			t.Fatalf("replayed %d events, %v; want %d", len(replayed), err, len(events))
		}
		ref2, events2 := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", SessionID: "s", Scenario: &messages.Scenario{Nodes: 1, Tokens: 1}})
		if ref2.SessionID != "s" || events2[head].RunID != ref2.RunID || events2[head].Seq != head+1 {
			t.Fatalf("the next run starts at seq %d (run %s), want %d", events2[head].Seq, events2[head].RunID, head+1)
		}
		testkit.AssertInvariants(t, events2)
	})
}

// TestEngine_IdleHubsChurn: with hubs stopping as soon as they are idle,
// runs and subscriptions on one session race with the hub stopping and
// starting again; every run is accepted and the session stays gapless.
func TestEngine_IdleHubsChurn(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{HubIdleAfter: time.Millisecond, Limits: unlimited})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 4 {
		wg.Go(func() {
			for range 25 {
				ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "churn", Scenario: &messages.Scenario{Nodes: 1, Tokens: 1, SynthesisTokens: 1}})
				if err != nil {
					errs <- err
					return
				}
				if _, err := testkit.Follow(ctx, e, ref, 0); err != nil {
					errs <- err
					return
				}
				if w == 0 {
					if _, err := e.Head(ctx, "", "churn"); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, e, "", "churn", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	head, _ := e.Head(ctx, "", "churn")
	got, err := p.Until(ctx, func(env *messages.Envelope) bool { return env.Seq == head })
	if err != nil {
		t.Fatal(err)
	}
	testkit.AssertInvariants(t, got)
	if n := testkit.Count(got, messages.RunStarted); n != 100 {
		t.Fatalf("%d runs in the session, want 100", n)
	}
}

// holeJournal hides the events with seq in [from, to] from readers, as a
// repaired journal does with the events it lost.
type holeJournal struct {
	*journal.Memory
	from, to atomic.Uint64
}

func (j *holeJournal) ReadAfter(ctx context.Context, s messages.SessionID, after uint64, limit int) ([]*messages.Encoded, error) {
	evs, err := j.Memory.ReadAfter(ctx, s, after, limit+int(j.to.Load()-j.from.Load()+1))
	out := evs[:0:0]
	for _, e := range evs {
		if (e.Seq < j.from.Load() || e.Seq > j.to.Load()) && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, err
}

// TestEngine_HolesBecomeReplayTruncated: events lost inside the history
// or at its end reach a subscriber as one replay_truncated each, never a
// silent gap, and the subscriber then follows on.
func TestEngine_HolesBecomeReplayTruncated(t *testing.T) {
	t.Parallel()
	j := &holeJournal{Memory: journal.NewMemory()}
	j.from.Store(1 << 62)
	j.to.Store(1 << 62)
	e := testkit.NewEngine(t, actors.Config{Journal: j})
	ctx := context.Background()
	_, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", SessionID: "h", Scenario: &messages.Scenario{Nodes: 2, Tokens: 3}})
	head := events[len(events)-1].Seq
	for _, c := range []struct {
		name     string
		from, to uint64
		after    uint64
		want     []uint64 // the seqs delivered, 0 standing for replay_truncated
	}{
		{"inside", 4, 6, 0, []uint64{1, 2, 3, 0, 7}},
		{"at the end", head - 2, head, head - 4, []uint64{head - 3, 0}},
	} {
		j.from.Store(c.from)
		j.to.Store(c.to)
		p, err := testkit.NewProbe(ctx, e, "", "h", c.after)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		got, err := p.Until(ctx, func(env *messages.Envelope) bool { n++; return n >= len(c.want) })
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range c.want {
			env := got[i]
			if w == 0 {
				tr, ok := env.Payload.(*messages.ReplayTruncatedPayload)
				if !ok || tr.FirstRetained != c.to+1 || env.Seq != c.to {
					t.Fatalf("%s: event %d = %s seq %d %+v, want replay_truncated seq %d first_retained %d", c.name, i, env.Type, env.Seq, env.Payload, c.to, c.to+1)
				}
				continue
			}
			if env.Seq != w {
				t.Fatalf("%s: event %d has seq %d, want %d", c.name, i, env.Seq, w)
			}
		}
	}
}

// panickyJournal panics on the next n appends.
type panickyJournal struct {
	*journal.Memory
	n atomic.Int32
}

func (j *panickyJournal) Append(ctx context.Context, s messages.SessionID, evs []*messages.Encoded) error {
	if j.n.Add(-1) >= 0 {
		panic("disk driver bug")
	}
	return j.Memory.Append(ctx, s, evs)
}

// TestEngine_FailedHubIsReplaced: a hub that keeps panicking is stopped
// by its supervisor; the live runs of its session are not stranded: a new
// hub takes the session over and they end with run_error{internal}.
func TestEngine_FailedHubIsReplaced(t *testing.T) {
	t.Parallel()
	j := &panickyJournal{Memory: journal.NewMemory()}
	e := testkit.NewEngine(t, actors.Config{Journal: j, Logger: testkit.TestLogger(t, slog.LevelError+1)})
	ctx := context.Background()
	ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "p", Scenario: &messages.Scenario{Nodes: 2, Tokens: 200, TokenDelayMS: 5}})
	if err != nil {
		t.Fatal(err)
	}
	j.n.Store(11) // more than the hub's restart limit (10 in 10 s)
	sum, err := func() (messages.RunSummary, error) {
		var sum messages.RunSummary
		testkit.Eventually(t, func() bool {
			sum, err = e.Run("", ref.RunID)
			return err != nil || sum.Status.Terminal()
		})
		return sum, err
	}()
	if err != nil || sum.Status != messages.StatusFailed || sum.ErrorCode != messages.ErrCodeInternal || !strings.Contains(sum.Error, "hub failed") {
		t.Fatalf("run after its hub failed: %+v, %v", sum, err)
	}
	if _, err := testkit.Follow(ctx, e, ref, sum.LastSeq-1); err != nil {
		t.Fatalf("the session after its hub was replaced: %v", err)
	}
}
