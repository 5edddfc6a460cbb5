package sim_test

import (
	"testing"
	"time"

	"github.com/conclave-ai/conclave/testkit/sim"
)

// TestSim_BigCouncil simulates one big council (sim.BigCouncil) with every
// invariant checked at the end. `conclave sim --council-nodes 10000`
// measures it (BENCHMARKS.md); this test only shows that it works.
func TestSim_BigCouncil(t *testing.T) {
	nodes := 10_000
	if testing.Short() || raceEnabled {
		nodes = 1_000
	}
	start := time.Now()
	res := sim.Run(t, sim.BigCouncil(1, nodes), sim.Options{})
	if res.Failed() {
		t.Fatalf("failed: %v", res.Failures)
	}
	t.Logf("%d nodes: %d events, %d steps, %d delivered, %v (wall)", nodes, res.Events, res.Steps, res.Delivered, time.Since(start))
}
