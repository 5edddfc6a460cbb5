package actors_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/journal"
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

func benchCouncil(b *testing.B, cmd messages.StartRun) { benchCouncilWith(b, cmd, nil) }

// benchCouncilWith is benchCouncil with, when tracer is set, a tracer per
// run (its stop, timed with the run, waits until every event is projected
// and every span exported).
func benchCouncilWith(b *testing.B, cmd messages.StartRun, tracer func() (actors.Tracer, func(context.Context) error)) {
	var events, mallocs uint64
	var wall time.Duration
	var ms runtime.MemStats
	for b.Loop() {
		cfg := actors.Config{}
		stopTracer := func(context.Context) error { return nil }
		if tracer != nil {
			cfg.Tracer, stopTracer = tracer()
		}
		e, err := actors.New(cfg)
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
		if err := stopTracer(ctx); err != nil {
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

// BenchmarkFailedRunEnding runs a plan of 20,000 or 100,000 nodes in two
// waves, one of whose first nodes fails (or, with delegation_limit, whose
// workers delegate past the hard limit), and reports how long the run took
// to end after the failure: from node_failed to run_error, by the events'
// timestamps (when the hub stamped them), with every node that never ran
// closed as node_skipped in between. Issue 27: 24 s for 20,000 nodes and
// about 45 minutes for 100,000 before the ending was made linear.
//
//	go test ./actors -run '^$' -bench BenchmarkFailedRunEnding -benchtime 3x
func BenchmarkFailedRunEnding(b *testing.B) {
	failing := func(nodes int) messages.StartRun {
		first := fmt.Sprintf("n%0*d", len(fmt.Sprint(nodes)), 1)
		return messages.StartRun{Question: "bench", Scenario: &messages.Scenario{Nodes: nodes, Waves: 2, Tokens: 2,
			FailNodes: messages.NodeSelector{IDs: []string{first}}}}
	}
	for _, nodes := range []int{20_000, 100_000} {
		b.Run(fmt.Sprintf("node_failed/nodes=%d", nodes), func(b *testing.B) {
			benchEnding(b, failing(nodes), messages.ErrCodeNodeFailed, false)
		})
	}
	b.Run("node_failed/nodes=100000/durable", func(b *testing.B) {
		benchEnding(b, failing(100_000), messages.ErrCodeNodeFailed, true)
	})
	b.Run("delegation_limit/nodes=100000", func(b *testing.B) {
		benchEnding(b, messages.StartRun{Question: "bench", MaxDelegationRounds: 1, Scenario: &messages.Scenario{Nodes: 100_000, Waves: 2,
			Tokens: 2, SubagentsPerNode: 1, Delegations: &messages.DelegationScenario{Depth: 2}}}, messages.ErrCodeDelegationLimit, false)
	})
}

// benchEnding runs cmd to its end, on the in-memory journal or (durable)
// on a durable journal in a temporary directory, fsynced as conclave
// serve's.
func benchEnding(b *testing.B, cmd messages.StartRun, code messages.ErrorCode, durable bool) {
	var ending, wall time.Duration
	var skipped int
	for b.Loop() {
		cfg := actors.Config{Limits: unlimited}
		if durable {
			j, err := journal.Open(b.TempDir(), journal.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close() // after the engine's Shutdown, below
			cfg.Journal = j
		}
		e, err := actors.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
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
		end := testkit.Terminal(evs, ref.RunID)
		if p, ok := end.Payload.(*messages.RunErrorPayload); !ok || p.Code != code {
			b.Fatalf("run ended with %s %+v", end.Type, end.Payload)
		}
		for _, env := range evs {
			if env.Type == messages.NodeFailed {
				ending += end.Timestamp.Sub(env.Timestamp)
				break
			}
		}
		skipped += testkit.Count(evs, messages.NodeSkipped)
		if err := e.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(ending.Seconds()/float64(b.N), "s-ending/run")
	b.ReportMetric(wall.Seconds()/float64(b.N), "s/run")
	b.ReportMetric(float64(skipped)/float64(b.N), "skipped/run")
}
