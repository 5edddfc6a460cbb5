package journal_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// Benchmarks. One op is one event: ns/op is per event, and events/s is
// the throughput over all goroutines. Run (see BENCHMARKS.md):
//
//	go test ./journal/ -run '^$' -bench 'Append|Replay' -benchtime 3s -count 3

// benchJSON is a 300-byte envelope-like payload.
var benchJSON = []byte(`{"id":"0f5e2c1a-8d4b-4f3e-9a7c-2b1d6e8f0a93","seq":1,"type":"text_delta","timestamp":"2026-03-01T12:00:00.123456789Z","session_id":"session-0001","run_id":"run-0001","agent_id":"critic","lane":{"stream_id":"st-1","depth":1},"payload":{"delta":"` + strings.Repeat("x", 300-247) + `"}}`)

// walSyncCounter counts fsyncs of the write-ahead log.
func walSyncCounter(n *atomic.Int64) vfs.FS {
	return newWALFS(func(sync bool) error {
		if sync {
			n.Add(1)
		}
		return nil
	})
}

func BenchmarkDurable_Append(b *testing.B) {
	if len(benchJSON) != 300 {
		b.Fatalf("benchJSON is %d bytes", len(benchJSON))
	}
	for _, batch := range []int{1, 64, 512} {
		for _, sessions := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("batch=%d/sessions=%d", batch, sessions), func(b *testing.B) {
				var syncs atomic.Int64
				d, err := journal.Open(b.TempDir(), journal.WithFS(journal.Options{}, walSyncCounter(&syncs)))
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				syncs.Store(0)
				benchAppend(b, d, batch, sessions)
				st := d.Stats()
				sec := b.Elapsed().Seconds()
				b.ReportMetric(float64(st.Commits)/sec, "commits/s")
				b.ReportMetric(float64(syncs.Load())/sec, "walsyncs/s")
				b.ReportMetric(float64(st.Events)/float64(st.Commits), "events/commit")
			})
		}
	}
}

func BenchmarkMemory_Append(b *testing.B) {
	for _, batch := range []int{1, 64, 512} {
		for _, sessions := range []int{1, 16} {
			b.Run(fmt.Sprintf("batch=%d/sessions=%d", batch, sessions), func(b *testing.B) {
				benchAppend(b, journal.NewMemory(), batch, sessions)
			})
		}
	}
}

// benchAppend appends b.N events, in batches of batch, from sessions
// goroutines at once (one per session, like the hubs).
func benchAppend(b *testing.B, j journal.Journal, batch, sessions int) {
	ctx := context.Background()
	var claimed atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := messages.SessionID(fmt.Sprintf("session-%04d", i))
			var head uint64
			evs := make([]*messages.Encoded, batch)
			for claimed.Add(int64(batch)) <= int64(b.N)+int64(batch)-1 {
				for k := range evs {
					evs[k] = messages.NewEncoded(head+uint64(k)+1, messages.TextDelta, "run-0001", benchJSON)
				}
				if err := j.Append(ctx, s, evs); err != nil {
					b.Error(err)
					return
				}
				head += uint64(batch)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

const replayEvents = 1_000_000

func BenchmarkDurable_Replay(b *testing.B) {
	dir := b.TempDir()
	d, err := journal.Open(dir, journal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	fillBench(b, d)
	// Just written: the newest events are still in memtables.
	b.Run("written/page=512", func(b *testing.B) { benchReplay(b, d, 512) })
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	// After a restart: every event is in tables (recovery, old cursors).
	d, err = journal.Open(dir, journal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	b.Run("reopened/page=512", func(b *testing.B) { benchReplay(b, d, 512) })
	b.Run("reopened/page=64", func(b *testing.B) { benchReplay(b, d, 64) })
}

func BenchmarkMemory_Replay(b *testing.B) {
	m := journal.NewMemory()
	fillBench(b, m)
	b.Run("page=512", func(b *testing.B) { benchReplay(b, m, 512) })
}

func fillBench(b *testing.B, j journal.Journal) {
	ctx := context.Background()
	for q := uint64(1); q <= replayEvents; q += 512 {
		evs := make([]*messages.Encoded, 0, 512)
		for s := q; s < q+512 && s <= replayEvents; s++ {
			evs = append(evs, messages.NewEncoded(s, messages.TextDelta, "run-0001", benchJSON))
		}
		if err := j.Append(ctx, "replay", evs); err != nil {
			b.Fatal(err)
		}
	}
}

// benchReplay reads b.N events in pages, from the start of the session,
// wrapping around at its end.
func benchReplay(b *testing.B, j journal.Journal, page int) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	var after uint64
	var bytes int
	for n := 0; n < b.N; {
		evs, err := j.ReadAfter(ctx, "replay", after, min(page, b.N-n))
		if err != nil {
			b.Fatal(err)
		}
		if len(evs) == 0 {
			after = 0
			continue
		}
		for _, e := range evs {
			bytes += len(e.JSON)
		}
		n += len(evs)
		after = evs[len(evs)-1].Seq
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if bytes != b.N*len(benchJSON) {
		b.Fatalf("read %d bytes, want %d", bytes, b.N*len(benchJSON))
	}
}
