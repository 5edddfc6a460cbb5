package sim_test

import (
	"sync/atomic"
	"testing"

	"github.com/conclave-ai/conclave/internal/regress"
	"github.com/conclave-ai/conclave/testkit/sim"
)

// TestSim_FindsFixedBugs puts each bug of issue 11 that a simulator should
// find back (internal/regress) and shows that the seeds CI runs find it:
// the first failing seed must come within the stated number.
func TestSim_FindsFixedBugs(t *testing.T) {
	cases := []struct {
		name   string
		bug    *atomic.Bool
		within int
	}{
		{"damaged WAL reuses seqs", &regress.TrustDamagedJournal, 300},
		{"retention strands a parked run", &regress.TrimLiveRuns, 300},
		{"abort racing the end", &regress.AbortWithoutOutcome, 300},
		{"no backpressure", &regress.UnboundedStreams, 300},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.bug.Store(true)
			defer c.bug.Store(false)
			for seed := uint64(1); seed <= uint64(c.within); seed++ {
				res := sim.Run(t, sim.Generate(seed, sim.SmallSize), sim.Options{})
				if res.Failed() {
					t.Logf("found at seed %d: %s", seed, res.Failures[0])
					return
				}
			}
			t.Errorf("not found within %d seeds", c.within)
		})
	}
}
