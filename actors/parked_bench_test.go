package actors_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// BenchmarkParkedRuns parks 100,000 runs at once on their plan gate, in one
// process, measures the heap per parked run and the goroutines, then
// resumes every one and waits until all have finished.
//
//	go test ./actors -run '^$' -bench BenchmarkParkedRuns -benchtime 1x -timeout 30m
//
// The event log is kept out of the measurement: this benchmark's journal
// holds only the last events of each session (what a durable journal
// keeps on disk, not in the heap), so the heap delta is the runtime's own
// cost of a parked run: its supervisor actor, its parked future, its
// interrupt record and its run summary.
//
// Two cases. awake: runs never sleep (SleepAfter -1), so each parked run
// keeps its supervisor, its parked future and its state in memory. asleep:
// the runs fall asleep once parked for a second (asleep.go), on a durable
// journal (they are rebuilt from it when resumed) with a small memtable
// and block cache, so that the journal's own memory stays out of the
// per-run figure; the heap is measured once every run is asleep, and
// resuming includes waking each run from the journal.
func BenchmarkParkedRuns(b *testing.B) {
	b.Run("awake", func(b *testing.B) {
		benchmarkParkedRuns(b, actors.Config{Journal: newTailJournal(256), SleepAfter: -1})
	})
	b.Run("asleep", func(b *testing.B) {
		j, err := journal.Open(b.TempDir(), journal.Options{CacheSize: 4 << 20, MemTableSize: 4 << 20})
		if err != nil {
			b.Fatal(err)
		}
		defer j.Close()
		benchmarkParkedRuns(b, actors.Config{Journal: j, SleepAfter: time.Second})
	})
}

func benchmarkParkedRuns(b *testing.B, cfg actors.Config) {
	const runs, perSession = 100_000, 1_000
	cfg.InterruptTimeout, cfg.SubscriberQueue = time.Hour, 1<<15
	// 100,000 runs at once, as fast as they can be created: no quotas.
	cfg.Limits = func(messages.TenantID) actors.Limits { return actors.Limits{ConcurrentRuns: -1, RunsPerSecond: -1} }
	for b.Loop() {
		e, err := actors.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		sc := messages.Scenario{Nodes: 1, Tokens: 1, SynthesisTokens: 1}

		// One subscriber per session watches what happens in it, keeping
		// only what it needs (interrupt ids), so it adds nothing per event.
		sessions := runs / perSession
		probes := make([]*watcher, sessions)
		for i := range sessions {
			id := messages.SessionID(fmt.Sprintf("s%03d", i))
			if _, err := e.StartRun(ctx, messages.StartRun{Question: "warm-up", SessionID: id, Scenario: &sc}); err != nil {
				b.Fatal(err)
			}
			sub, err := e.Subscribe(ctx, messages.Subscribe{SessionID: id})
			if err != nil {
				b.Fatal(err)
			}
			probes[i] = &watcher{sub: sub}
			if err := probes[i].until(ctx, func(env *messages.Envelope) bool { return env.Type.Terminal() }); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		goroutinesBefore := runtime.NumGoroutine()

		start := time.Now()
		var wg sync.WaitGroup
		interrupts := make([][]string, sessions)
		for i, p := range probes { // watch first, so no watcher falls behind the journal's tail
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.until(ctx, func(env *messages.Envelope) bool {
					if r, ok := env.Payload.(*messages.InterruptRaisedPayload); ok {
						interrupts[i] = append(interrupts[i], r.InterruptID)
					}
					return len(interrupts[i]) == perSession
				}); err != nil {
					b.Error(err)
				}
			}()
		}
		for i := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := messages.SessionID(fmt.Sprintf("s%03d", i))
				for range perSession {
					if _, err := e.StartRun(ctx, messages.StartRun{Question: "q", SessionID: id, HITL: messages.HITLPlan, Scenario: &sc}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		parkTime := time.Since(start)
		if cfg.SleepAfter > 0 {
			for e.Stats().AsleepRuns < runs { // each falls asleep a second or two after it parked
				time.Sleep(100 * time.Millisecond)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		goroutinesParked := runtime.NumGoroutine()
		if path := os.Getenv("PARKED_HEAP_PROFILE"); path != "" { // the live heap of 100k parked runs
			runtime.GC() // a heap profile shows the heap as of the GC before the last one
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}

		start = time.Now()
		for i, p := range probes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, id := range interrupts[i] {
					if _, err := e.Resume(messages.Resume{InterruptID: id, Decision: messages.DecisionApprove}); err != nil {
						b.Error(err)
						return
					}
				}
				finished := 0
				if err := p.until(ctx, func(env *messages.Envelope) bool {
					if env.Type == messages.RunFinished {
						finished++
					}
					return finished == perSession
				}); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		resumeTime := time.Since(start)
		if n := e.RunsByStatus()[messages.StatusFinished]; n != runs+sessions {
			b.Fatalf("%d runs finished, want %d", n, runs+sessions)
		}
		for _, p := range probes {
			p.sub.Close()
		}
		if err := e.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/runs, "heap-B/parked-run")
		b.ReportMetric(float64(goroutinesParked-goroutinesBefore), "goroutines-added")
		b.ReportMetric(float64(goroutinesParked), "goroutines-total")
		b.ReportMetric(parkTime.Seconds(), "s-to-park")
		b.ReportMetric(resumeTime.Seconds(), "s-to-resume-and-finish")
	}
}

// watcher reads a subscription and keeps nothing of what it reads.
type watcher struct {
	sub *actors.Subscription
	buf []*messages.Encoded
}

func (w *watcher) until(ctx context.Context, stop func(*messages.Envelope) bool) error {
	for {
		var err error
		w.buf, err = w.sub.Next(ctx, w.buf, 512)
		if err != nil {
			return err
		}
		for _, enc := range w.buf {
			env, err := enc.Envelope()
			if err != nil {
				return err
			}
			if stop(env) {
				return nil // the rest of the batch was not waited for; fine for counting
			}
		}
		clear(w.buf)
	}
}

// tailJournal keeps only the last size events of each session: enough for
// subscribers that keep up, while the heap holds no event log.
type tailJournal struct {
	size int
	mu   sync.Mutex
	s    map[messages.SessionID]*tail
	runs map[messages.RunID]*journal.RunInfo // the run catalogue, minimal: the engine needs one
}

type tail struct {
	head uint64
	ring []*messages.Encoded
}

func newTailJournal(size int) *tailJournal {
	return &tailJournal{size: size, s: map[messages.SessionID]*tail{}, runs: map[messages.RunID]*journal.RunInfo{}}
}

func (j *tailJournal) Append(_ context.Context, session messages.SessionID, events []*messages.Encoded) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	t := j.s[session]
	if t == nil {
		t = &tail{ring: make([]*messages.Encoded, j.size)}
		j.s[session] = t
	}
	for i, e := range events {
		if e.Seq != t.head+1 {
			return &journal.SeqError{Session: session, Head: t.head, Got: e.Seq, Position: i}
		}
		t.head++
		t.ring[t.head%uint64(j.size)] = e
		switch r := j.runs[e.RunID]; {
		case e.Type == messages.RunStarted && r == nil:
			j.runs[e.RunID] = &journal.RunInfo{Run: e.RunID, Session: session, FirstSeq: e.Seq}
		case e.Type.Terminal() && r != nil:
			delete(j.runs, e.RunID) // ended: the benchmark never reads it again
		}
	}
	return nil
}

func (j *tailJournal) LiveRuns(context.Context) ([]journal.RunInfo, error) { return nil, nil }

func (j *tailJournal) Run(_ context.Context, run messages.RunID) (journal.RunInfo, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r := j.runs[run]; r != nil {
		return *r, true, nil
	}
	return journal.RunInfo{}, false, nil
}

func (j *tailJournal) ListRuns(context.Context, string, messages.RunID, int) ([]journal.RunInfo, messages.RunID, error) {
	return nil, "", nil
}

func (j *tailJournal) PutRunSummary(context.Context, messages.RunID, []byte) error { return nil }

func (j *tailJournal) ReadAfter(_ context.Context, session messages.SessionID, after uint64, limit int) ([]*messages.Encoded, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	t := j.s[session]
	if t == nil {
		return nil, nil
	}
	first := uint64(1)
	if t.head > uint64(j.size) {
		first = t.head - uint64(j.size) + 1
	}
	var out []*messages.Encoded
	for q := max(after+1, first); q <= t.head && len(out) < limit; q++ {
		out = append(out, t.ring[q%uint64(j.size)])
	}
	return out, nil
}

func (j *tailJournal) Head(_ context.Context, session messages.SessionID) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if t := j.s[session]; t != nil {
		return t.head, nil
	}
	return 0, nil
}

func (j *tailJournal) First(_ context.Context, session messages.SessionID) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	t := j.s[session]
	if t == nil || t.head == 0 {
		return 0, nil
	}
	return max(1, t.head-min(t.head, uint64(j.size))+1), nil
}

func (j *tailJournal) Trim(context.Context, messages.SessionID, uint64) error { return nil }

func (j *tailJournal) Sessions(context.Context) ([]messages.SessionID, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []messages.SessionID
	for s := range j.s {
		out = append(out, s)
	}
	return out, nil
}

func (j *tailJournal) Close() error { return nil }
