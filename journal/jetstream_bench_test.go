package journal_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/internal/benchkit"
	"github.com/conclave-ai/conclave/internal/natstest"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// BenchmarkAppendLatency compares one Append's latency (a hub's flush: a
// batch of 300-byte events to one session) on the embedded pebble journal
// (fsync per group commit) and on JetStream (one server, and three
// clustered servers with three replicas), in the same sitting. One op is
// one event; p50-µs and p99-µs are per Append. Run (BENCHMARKS.md,
// Cluster):
//
//	go test ./journal/ -run '^$' -bench AppendLatency -benchtime 3s
func BenchmarkAppendLatency(b *testing.B) {
	for _, kind := range []string{"pebble", "jetstream-R1", "jetstream-R3"} {
		for _, batch := range []int{1, 16} {
			for _, sessions := range []int{1, 16} {
				b.Run(fmt.Sprintf("journal=%s/batch=%d/sessions=%d", kind, batch, sessions), func(b *testing.B) {
					j := openBenchJournal(b, kind)
					var mu sync.Mutex
					var all benchkit.Histogram
					benchAppendTimed(b, j, batch, sessions, func(h *benchkit.Histogram) {
						mu.Lock()
						all.Merge(h)
						mu.Unlock()
					})
					b.ReportMetric(float64(all.Quantile(0.5).Microseconds()), "p50-µs")
					b.ReportMetric(float64(all.Quantile(0.99).Microseconds()), "p99-µs")
				})
			}
		}
	}
}

func openBenchJournal(b *testing.B, kind string) journal.Journal {
	b.Helper()
	switch kind {
	case "pebble":
		d, err := journal.Open(b.TempDir(), journal.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = d.Close() })
		return d
	case "jetstream-R1":
		nc := natstest.Connect(b, natstest.Start(b))
		j, err := journal.OpenJetStream(context.Background(), nc, journal.JetStreamOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return j
	default: // jetstream-R3
		servers := natstest.StartCluster(b, 3)
		nc := natstest.Connect(b, servers[0])
		var j *journal.JetStream
		var err error
		for range 50 { // the first stream of a new cluster waits for its peers
			if j, err = journal.OpenJetStream(context.Background(), nc, journal.JetStreamOptions{Replicas: 3}); err == nil {
				return j
			}
			time.Sleep(200 * time.Millisecond) // a benchmark's setup, polling the cluster
		}
		b.Fatal(err)
		return nil
	}
}

// benchAppendTimed is benchAppend recording each Append's latency; done
// gets each session's histogram.
func benchAppendTimed(b *testing.B, j journal.Journal, batch, sessions int, done func(*benchkit.Histogram)) {
	ctx := context.Background()
	var claimed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var h benchkit.Histogram
			defer done(&h)
			s := messages.SessionID(fmt.Sprintf("session-%04d", i))
			var head uint64
			evs := make([]*messages.Encoded, batch)
			for claimed.Add(int64(batch)) <= int64(b.N)+int64(batch)-1 {
				for k := range evs {
					evs[k] = messages.NewEncoded(head+uint64(k)+1, messages.TextDelta, "run-0001", benchJSON)
				}
				start := time.Now()
				if err := j.Append(ctx, s, evs); err != nil {
					b.Error(err)
					return
				}
				h.Record(time.Since(start))
				head += uint64(batch)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
