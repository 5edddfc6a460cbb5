package sim_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/conclave-ai/conclave/internal/regress"
	"github.com/conclave-ai/conclave/testkit/sim"
)

// TestSim_FindsFixedBugs puts each bug of issue 11 that a simulator should
// find back (internal/regress) and shows that the seeds CI runs find it:
// the first failing seed must come within the stated number.
func TestSim_FindsFixedBugs(t *testing.T) {
	clusterSize := sim.SmallSize
	clusterSize.Cluster = true
	cases := []struct {
		name   string
		bug    *atomic.Bool
		within int
		size   *sim.Size // default sim.SmallSize
	}{
		{"damaged WAL reuses seqs", &regress.TrustDamagedJournal, 50, nil},
		{"damaged HWM reuses seqs", &regress.TrustDamagedMarks, 50, nil},
		{"retention strands a parked run", &regress.TrimLiveRuns, 50, nil},
		{"abort racing the end", &regress.AbortWithoutOutcome, 50, nil},
		{"no backpressure", &regress.UnboundedStreams, 50, nil},
		{"an abort orphans a parked interrupt", &regress.OrphanParkedInterrupts, 50, nil},
		{"a replay marker one seq late", &regress.MarkerAtFirstRetained, 50, nil},
		{"a group acknowledged before its fsync", &regress.AckBeforeSync, 50, nil},
		{"an SSE resume repeats the last event", &regress.LastEventIDInclusive, 50, nil},
		{"a stale owner is not fenced off", &regress.NoFencing, 50, &clusterSize},
		{"a takeover does not replay the journal", &regress.AdoptSkipsReplay, 50, &clusterSize},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.bug.Store(true)
			defer c.bug.Store(false)
			size := sim.SmallSize
			if c.size != nil {
				size = *c.size
			}
			for seed := uint64(1); seed <= uint64(c.within); seed++ {
				res := sim.Run(t, sim.Generate(seed, size), sim.Options{})
				if res.Failed() {
					t.Logf("found at seed %d: %s", seed, res.Failures[0])
					return
				}
			}
			t.Errorf("not found within %d seeds", c.within)
		})
	}
}

// TestShrink: a scenario failing with a re-introduced bug shrinks to a
// smaller one that still fails the same way.
func TestShrink(t *testing.T) {
	regress.UnboundedStreams.Store(true)
	defer regress.UnboundedStreams.Store(false)
	sc := sim.Generate(3, sim.SmallSize)
	small, res := sim.Shrink(t, sc, sim.Options{}, 80)
	if !res.Failed() || !strings.Contains(res.Failures[0], "backpressure") {
		t.Fatalf("shrunk scenario does not fail with backpressure: %v", res.Failures)
	}
	r0, n0, a0 := sc.Size()
	r1, n1, a1 := small.Size()
	if r1+n1+a1 >= r0+n0+a0 {
		t.Fatalf("not smaller: %d runs, %d nodes, %d actions, from %d, %d, %d", r1, n1, a1, r0, n0, a0)
	}
	t.Logf("shrunk from %d runs, %d nodes, %d actions to %d, %d, %d", r0, n0, a0, r1, n1, a1)
}
