package sim_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/testkit/sim"
	"github.com/conclave-ai/conclave/tool"
)

// TestSim_YourOwnTool is how code built on Conclave puts its own tool in a
// simulation: the tool joins through Options.Tools (the simulator wraps it
// with sim.WrapTool, so each call waits at a gate and may fail, slow down
// or hang as ToolFaults say), the scripted workers call it (Scenario.Calls),
// and the same invariants are checked, across crashes and restarts.
func TestSim_YourOwnTool(t *testing.T) {
	type args struct {
		City string `json:"city"`
	}
	var calls atomic.Int64
	weather, err := tool.Func("weather", "The weather in a city.", func(_ context.Context, a args) (string, error) {
		calls.Add(1)
		return "sunny in " + a.City, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := sim.Options{Tools: []tool.Tool{scripted.SearchTool(), weather}}
	for seed := uint64(1); seed <= 5; seed++ {
		sc := sim.Scenario{Seed: seed, Clients: 2, Crashes: []int{40, 90},
			Tool: sim.ToolFaults{ErrorRate: 0.2, SlowRate: 0.3, Slow: 1e9},
			Runs: []sim.RunPlan{{At: 1, Start: messages.StartRun{Question: "what to wear", Concurrency: 2,
				Scenario: &messages.Scenario{Nodes: 4, Waves: 2, Tokens: 6, Calls: []string{"weather"}, Seed: int64(seed)}}}}}
		res := sim.Run(t, sc, opts)
		if res.Failed() {
			t.Fatalf("seed %d: %v", seed, res.Failures)
		}
	}
	if calls.Load() == 0 {
		t.Fatal("the tool was never called")
	}
}
