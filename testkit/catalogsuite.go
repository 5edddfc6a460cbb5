package testkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// runCatalogSuite checks the journal.Catalog contract and Trim's rule for
// live runs. It skips journals without a catalogue.
func runCatalogSuite(t *testing.T, open func(t *testing.T) journal.Journal) {
	ctx := context.Background()
	catalog := func(t *testing.T) (journal.Journal, journal.Catalog) {
		t.Helper()
		j := open(t)
		c, ok := j.(journal.Catalog)
		if !ok {
			t.Skipf("%T has no run catalogue", j)
		}
		return j, c
	}

	t.Run("CatalogTracksRuns", func(t *testing.T) {
		j, c := catalog(t)
		rb := newRunBatches()
		mustAppend(t, j, "acme/s1", rb.next("acme/s1", runStart("r1"), runDelta("r1"), runDelta("r1")))
		mustAppend(t, j, "acme/s1", rb.next("acme/s1", runStart("r2"), runDelta("r1"), runFinish("r1"), runDelta("r2")))
		mustAppend(t, j, "plain", rb.next("plain", runStart("r3"), runFailed("r3"))) // started and ended in one batch
		checkRun(t, c, journal.RunInfo{Run: "r1", Session: "acme/s1", FirstSeq: 1, LastSeq: 6})
		checkRun(t, c, journal.RunInfo{Run: "r2", Session: "acme/s1", FirstSeq: 4})
		checkRun(t, c, journal.RunInfo{Run: "r3", Session: "plain", FirstSeq: 1, LastSeq: 2})
		if _, ok, err := c.Run(ctx, "nobody"); ok || err != nil {
			t.Fatalf("Run(unknown) = %v, %v", ok, err)
		}
		checkLive(t, c, "r2")
		mustAppend(t, j, "acme/s1", rb.next("acme/s1", runFinish("r2")))
		checkLive(t, c)
	})

	t.Run("CatalogIgnores", func(t *testing.T) {
		j, c := catalog(t)
		rb := newRunBatches()
		mustAppend(t, j, "s", rb.next("s",
			runStart(""),       // no run id
			runFinish("ghost"), // a run it never saw start
			runStart("r1"),     //
			runStart("r1"),     // started twice: the first counts
			runDelta("r1"),     //
			runFinish("r1"),    //
			runFailed("r1"),    // ended twice: the first counts
		))
		mustAppend(t, j, "other", rb.next("other", runFinish("r1"))) // another session's terminal
		checkRun(t, c, journal.RunInfo{Run: "r1", Session: "s", FirstSeq: 3, LastSeq: 6})
		if _, ok, _ := c.Run(ctx, "ghost"); ok {
			t.Fatal("a terminal event created a run")
		}
		if _, ok, _ := c.Run(ctx, ""); ok {
			t.Fatal("a run_started without run id created a run")
		}
		mustAppend(t, j, "other", rb.next("other", runStart("r1"))) // a known run id in another session
		checkRun(t, c, journal.RunInfo{Run: "r1", Session: "s", FirstSeq: 3, LastSeq: 6})
		checkLive(t, c)
	})

	t.Run("CatalogIsAtomicWithTheBatch", func(t *testing.T) {
		j, c := catalog(t)
		bad := []*messages.Encoded{
			messages.NewEncoded(2, messages.RunStarted, "r1", []byte(`{}`)), // seq 2 on an empty session
		}
		var se *journal.SeqError
		if err := j.Append(ctx, "s", bad); !errors.As(err, &se) {
			t.Fatalf("Append = %v, want *SeqError", err)
		}
		if _, ok, _ := c.Run(ctx, "r1"); ok {
			t.Fatal("a refused batch created a run")
		}
		checkLive(t, c)
	})

	t.Run("ListRunsByScope", func(t *testing.T) {
		j, c := catalog(t)
		rb := newRunBatches()
		// Interleaved across sessions and scopes; the order of run_started is the order listed.
		for i, s := range []messages.SessionID{"acme/a", "beta/x", "acme/b", "plain", "acme/a", "acme-2/c", "acme/b"} {
			mustAppend(t, j, s, rb.next(s, runStart(messages.RunID(fmt.Sprintf("r%d", i)))))
		}
		for _, c2 := range []struct {
			scope string
			want  string
		}{
			{"", "[r0 r1 r2 r3 r4 r5 r6]"},
			{"acme", "[r0 r2 r4 r6]"},
			{"beta", "[r1]"},
			{"acme-2", "[r5]"},
			{"acm", "[]"},
			{"plain", "[]"}, // a key without '/' has scope ""
			{"nobody", "[]"},
		} {
			if got := listAll(t, c, c2.scope, 1); fmt.Sprint(got) != c2.want {
				t.Fatalf("ListRuns(%q) page by page = %v, want %s", c2.scope, got, c2.want)
			}
			if got := listAll(t, c, c2.scope, 3); fmt.Sprint(got) != c2.want {
				t.Fatalf("ListRuns(%q) by 3 = %v, want %s", c2.scope, got, c2.want)
			}
		}
		runs, next, err := c.ListRuns(ctx, "acme", "r2", 10)
		if err != nil || next != "" || fmt.Sprint(ids(runs)) != "[r4 r6]" {
			t.Fatalf("ListRuns(acme after r2) = %v %q %v", ids(runs), next, err)
		}
		if runs[0].Session != "acme/a" || runs[0].FirstSeq != 2 {
			t.Fatalf("listed %+v", runs[0])
		}
		runs, next, err = c.ListRuns(ctx, "acme", "", 4) // exactly the rest: no next page
		if err != nil || next != "" || len(runs) != 4 {
			t.Fatalf("ListRuns(acme, 4) = %v %q %v", ids(runs), next, err)
		}
		if _, _, err := c.ListRuns(ctx, "acme", "nope", 10); !errors.Is(err, journal.ErrUnknownRun) {
			t.Fatalf("ListRuns after an unknown run = %v, want ErrUnknownRun", err)
		}
		if _, _, err := c.ListRuns(ctx, "acme/a", "", 10); err == nil {
			t.Fatal("ListRuns with a scope containing '/' succeeded")
		}
		if runs, next, err := c.ListRuns(ctx, "", "", 0); err != nil || len(runs) != 0 || next != "" {
			t.Fatalf("ListRuns(limit 0) = %v %q %v", ids(runs), next, err)
		}
	})

	t.Run("RunSummary", func(t *testing.T) {
		j, c := catalog(t)
		rb := newRunBatches()
		mustAppend(t, j, "t/s", rb.next("t/s", runStart("r1"), runDelta("r1")))
		if err := c.PutRunSummary(ctx, "nobody", []byte(`{}`)); !errors.Is(err, journal.ErrUnknownRun) {
			t.Fatalf("PutRunSummary(unknown run) = %v, want ErrUnknownRun", err)
		}
		if err := c.PutRunSummary(ctx, "r1", make([]byte, journal.MaxRunSummary+1)); err == nil {
			t.Fatal("an oversized summary was stored")
		}
		for _, sum := range []string{`{"status":"running"}`, `{"status":"finished"}`} {
			if err := c.PutRunSummary(ctx, "r1", []byte(sum)); err != nil {
				t.Fatal(err)
			}
		}
		want := journal.RunInfo{Run: "r1", Session: "t/s", FirstSeq: 1, Summary: []byte(`{"status":"finished"}`)}
		checkRun(t, c, want)
		if live, _ := c.LiveRuns(ctx); len(live) != 1 || string(live[0].Summary) != string(want.Summary) {
			t.Fatalf("LiveRuns = %+v", live)
		}
		if runs, _, _ := c.ListRuns(ctx, "t", "", 10); len(runs) != 1 || string(runs[0].Summary) != string(want.Summary) {
			t.Fatalf("ListRuns = %+v", runs)
		}
		// The entry and its summary outlive the run's events.
		mustAppend(t, j, "t/s", rb.next("t/s", runFinish("r1")))
		if err := j.Trim(ctx, "t/s", 100); err != nil {
			t.Fatal(err)
		}
		checkState(t, j, "t/s", 4, 3)
		want.LastSeq = 3
		checkRun(t, c, want)
	})

	t.Run("TrimKeepsLiveRuns", func(t *testing.T) {
		j, c := catalog(t)
		rb := newRunBatches()
		mustAppend(t, j, "s", rb.next("s", runStart("old"), runDelta("old"), runFinish("old"))) // 1..3
		mustAppend(t, j, "s", rb.next("s", runDelta(""), runStart("a"), runDelta("a")))         // 4..6
		mustAppend(t, j, "s", rb.next("s", runStart("b"), runDelta("b"), runDelta("a")))        // 7..9
		mustAppend(t, j, "other", rb.next("other", runStart("c")))                              // another session's live run
		if err := j.Trim(ctx, "s", 100); err != nil {
			t.Fatal(err)
		}
		checkState(t, j, "s", 5, 9) // capped at a's run_started
		if evs, _ := j.ReadAfter(ctx, "s", 0, 100); len(evs) != 5 || evs[0].Type != messages.RunStarted {
			t.Fatalf("ReadAfter after Trim: %d events", len(evs))
		}
		mustAppend(t, j, "s", rb.next("s", runFinish("a"))) // 10
		if err := j.Trim(ctx, "s", 100); err != nil {
			t.Fatal(err)
		}
		checkState(t, j, "s", 7, 10)                        // now capped at b's
		mustAppend(t, j, "s", rb.next("s", runFailed("b"))) // 11
		n, err := journal.ApplyRetention(ctx, j, "s", journal.Retention{MaxEvents: 1}, rb.now)
		if err != nil || n != 4 {
			t.Fatalf("ApplyRetention = %d, %v; want 4 trimmed", n, err)
		}
		checkState(t, j, "s", 11, 11)
		checkRun(t, c, journal.RunInfo{Run: "a", Session: "s", FirstSeq: 5, LastSeq: 10})
		if err := j.Trim(ctx, "other", 100); err != nil {
			t.Fatal(err)
		}
		checkState(t, j, "other", 1, 1)
	})

	t.Run("CatalogConcurrent", func(t *testing.T) {
		j, c := catalog(t)
		const sessions, runs = 8, 10
		var wg sync.WaitGroup
		for i := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := messages.SessionID(fmt.Sprintf("t%d/s", i%2))
				s += messages.SessionID(fmt.Sprint(i))
				var seq uint64
				for r := range runs {
					run := messages.RunID(fmt.Sprintf("s%d-r%d", i, r))
					batch := []*messages.Encoded{
						messages.NewEncoded(seq+1, messages.RunStarted, run, []byte(`{}`)),
						messages.NewEncoded(seq+2, messages.RunFinished, run, []byte(`{}`)),
					}
					if r == runs-1 {
						batch = batch[:1]
					}
					if err := j.Append(ctx, s, batch); err != nil {
						t.Error(err)
						return
					}
					seq += uint64(len(batch))
				}
			}()
		}
		wg.Wait()
		if got := listAll(t, c, "", 7); len(got) != sessions*runs {
			t.Fatalf("listed %d runs, want %d", len(got), sessions*runs)
		}
		if got := listAll(t, c, "t1", 7); len(got) != sessions*runs/2 {
			t.Fatalf("listed %d runs of t1, want %d", len(got), sessions*runs/2)
		}
		live, err := c.LiveRuns(ctx)
		if err != nil || len(live) != sessions {
			t.Fatalf("LiveRuns = %d, %v; want %d", len(live), err, sessions)
		}
		// Within a session, append order is run order.
		pos := map[messages.RunID]int{}
		for i, r := range listAll(t, c, "", 100) {
			pos[r] = i
		}
		for i := range sessions {
			for r := 1; r < runs; r++ {
				a, b := messages.RunID(fmt.Sprintf("s%d-r%d", i, r-1)), messages.RunID(fmt.Sprintf("s%d-r%d", i, r))
				if pos[a] > pos[b] {
					t.Fatalf("%s listed after %s", a, b)
				}
			}
		}
	})
}

// runBatches numbers the events of each session.
type runBatches struct {
	heads map[messages.SessionID]uint64
	now   time.Time
}

func newRunBatches() *runBatches {
	return &runBatches{heads: map[messages.SessionID]uint64{}, now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

type evSpec struct {
	typ messages.EventType
	run messages.RunID
}

func runStart(run messages.RunID) evSpec  { return evSpec{messages.RunStarted, run} }
func runDelta(run messages.RunID) evSpec  { return evSpec{messages.TextDelta, run} }
func runFinish(run messages.RunID) evSpec { return evSpec{messages.RunFinished, run} }
func runFailed(run messages.RunID) evSpec { return evSpec{messages.RunError, run} }

func (rb *runBatches) next(s messages.SessionID, specs ...evSpec) []*messages.Encoded {
	var out []*messages.Encoded
	for _, sp := range specs {
		rb.heads[s]++
		out = append(out, messages.NewEncoded(rb.heads[s], sp.typ, sp.run, fmt.Appendf(nil, `{"seq":%d,"type":%q}`, rb.heads[s], sp.typ)))
	}
	return out
}

func mustAppend(t *testing.T, j journal.Journal, s messages.SessionID, evs []*messages.Encoded) {
	t.Helper()
	if err := j.Append(context.Background(), s, evs); err != nil {
		t.Fatalf("Append(%s): %v", s, err)
	}
}

func checkRun(t *testing.T, c journal.Catalog, want journal.RunInfo) {
	t.Helper()
	got, ok, err := c.Run(context.Background(), want.Run)
	if err != nil || !ok || got.Run != want.Run || got.Session != want.Session || got.FirstSeq != want.FirstSeq ||
		got.LastSeq != want.LastSeq || string(got.Summary) != string(want.Summary) || (got.Summary == nil) != (want.Summary == nil) {
		t.Fatalf("Run(%s) = %+v (summary %q), %v, %v; want %+v (summary %q)", want.Run, got, got.Summary, ok, err, want, want.Summary)
	}
}

func checkLive(t *testing.T, c journal.Catalog, want ...messages.RunID) {
	t.Helper()
	live, err := c.LiveRuns(context.Background())
	if err != nil || fmt.Sprint(ids(live)) != fmt.Sprint(want) && !(len(live) == 0 && len(want) == 0) {
		t.Fatalf("LiveRuns = %v, %v; want %v", ids(live), err, want)
	}
	for _, r := range live {
		if r.LastSeq != 0 {
			t.Fatalf("live run %+v has a LastSeq", r)
		}
	}
}

func ids(runs []journal.RunInfo) []messages.RunID {
	out := make([]messages.RunID, len(runs))
	for i, r := range runs {
		out[i] = r.Run
	}
	return out
}

// listAll pages through ListRuns(scope) with the given page size.
func listAll(t *testing.T, c journal.Catalog, scope string, page int) []messages.RunID {
	t.Helper()
	out := []messages.RunID{}
	var after messages.RunID
	for range 10000 {
		runs, next, err := c.ListRuns(context.Background(), scope, after, page)
		if err != nil {
			t.Fatalf("ListRuns(%q, %q, %d): %v", scope, after, page, err)
		}
		if len(runs) > page {
			t.Fatalf("ListRuns returned %d runs for a limit of %d", len(runs), page)
		}
		out = append(out, ids(runs)...)
		if next == "" {
			return out
		}
		if next != runs[len(runs)-1].Run {
			t.Fatalf("next cursor %q is not the last run listed (%q)", next, runs[len(runs)-1].Run)
		}
		after = next
	}
	t.Fatal("ListRuns never ended")
	return nil
}
