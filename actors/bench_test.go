package actors_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// BenchmarkCouncil runs a 1,000-node × 100-token council with zero token
// delay, end to end: planning, 10 waves, synthesis, every event stamped,
// encoded, journaled and delivered to one subscriber. It reports ns and
// allocations per event and the wall time of one run.
//
//	go test ./actors -run '^$' -bench BenchmarkCouncil -benchtime 5x
func BenchmarkCouncil(b *testing.B) {
	sc := messages.Scenario{Nodes: 1000, Waves: 10, Tokens: 100, Seed: 1}
	var events, mallocs uint64
	var wall time.Duration
	var ms runtime.MemStats
	for b.Loop() {
		e, err := actors.New(actors.Config{})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		start := time.Now()
		ref, err := e.StartRun(ctx, messages.StartRun{Question: "bench", Scenario: &sc})
		if err != nil {
			b.Fatal(err)
		}
		evs, err := testkit.Follow(ctx, e, ref, 0)
		if err != nil {
			b.Fatal(err)
		}
		wall += time.Since(start)
		runtime.ReadMemStats(&ms)
		mallocs += ms.Mallocs - before
		events += uint64(len(evs))
		if err := e.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(wall.Nanoseconds())/float64(events), "ns/event")
	b.ReportMetric(float64(mallocs)/float64(events), "allocs/event")
	b.ReportMetric(float64(events)/float64(b.N), "events/run")
	b.ReportMetric(wall.Seconds()/float64(b.N), "s/run")
}
