package actors_test

import (
	"context"
	"fmt"
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
	benchCouncil(b, messages.StartRun{Question: "bench", Scenario: &messages.Scenario{Nodes: 1000, Waves: 10, Tokens: 100, Seed: 1}})
}

// BenchmarkCouncilFeatures is BenchmarkCouncil's 1,000 nodes with the
// council features of issue 7 on: 100 team nodes of 4, 50 debates (3
// agents, 3 rounds, a judge), a search call per node (citations), a
// sub-team spawned by 5 % of the workers, a steering note per wave and the
// advisor gate with one redirect per worker. Compare its ns/event with
// BenchmarkCouncil's in the same run.
//
//	go test ./actors -run '^$' -bench 'BenchmarkCouncil' -benchtime 5x
func BenchmarkCouncilFeatures(b *testing.B) {
	sc := &messages.Scenario{Nodes: 1000, Waves: 10, Tokens: 100, Seed: 1, Teams: 100, TeamSize: 4, ToolsPerNode: 1,
		Debate: &messages.DebateScenario{Nodes: 50, Agents: 3, Rounds: 3, Judge: true},
		Spawn:  messages.NodeSelector{Fraction: 0.05}, Advisor: &messages.AdvisorScenario{Redirects: 1}}
	for w := range 9 {
		sc.Steering = append(sc.Steering, messages.SteeringScript{AtWave: w, Note: fmt.Sprintf("extra angle %d", w)})
	}
	benchCouncil(b, messages.StartRun{Question: "bench", Scenario: sc, Advisor: &messages.AdvisorOptions{}})
}

func benchCouncil(b *testing.B, cmd messages.StartRun) {
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
		ref, err := e.StartRun(ctx, cmd)
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
		if testkit.Terminal(evs, ref.RunID).Type != messages.RunFinished {
			b.Fatalf("run ended with %s", testkit.Terminal(evs, ref.RunID).Type)
		}
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
