package sim_test

import (
	"flag"
	"testing"

	"github.com/conclave-ai/conclave/testkit/sim"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "simulate only this seed (TestSim)")
	seedsFlag = flag.Int("seeds", 40, "how many seeds TestSim simulates")
)

func TestSim(t *testing.T) {
	seeds := make([]uint64, 0, *seedsFlag)
	if *seedFlag != 0 {
		seeds = append(seeds, *seedFlag)
	} else {
		for i := range *seedsFlag {
			seeds = append(seeds, uint64(i+1))
		}
	}
	for _, seed := range seeds {
		sc := sim.Generate(seed, sim.SmallSize)
		res := sim.Run(t, sc, sim.Options{})
		t.Logf("seed %d: %.12s %d steps, %d runs, %d events, %d delivered, %d crashes, %d resumes, %d aborts, %v virtual", seed, res.Digest, res.Steps, res.Runs, res.Events, res.Delivered, res.Crashes, res.Resumes, res.Aborts, res.Virtual)
		if res.Failed() {
			for _, f := range res.Failures {
				t.Errorf("seed %d: %s", seed, f)
			}
			t.Errorf("reproduce: go test ./testkit/sim -run 'TestSim$' -seed %d", seed)
		}
	}
}

// TestSim_SameSeedSameJournal: a seed simulated twice gives the same
// journal, byte for byte (seqs, ids, timestamps, payloads), whatever the
// Go scheduler did in between.
func TestSim_SameSeedSameJournal(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		sc := sim.Generate(seed, sim.SmallSize)
		a, b := sim.Run(t, sc, sim.Options{KeepJournal: true}), sim.Run(t, sc, sim.Options{KeepJournal: true})
		if a.Digest == "" || a.Digest != b.Digest || a.Events != b.Events || a.Steps != b.Steps {
			t.Errorf("seed %d: two simulations differ: %d events in %d steps (%s) vs %d in %d (%s)", seed, a.Events, a.Steps, a.Digest, b.Events, b.Steps, b.Digest)
			for i := range min(len(a.Journal), len(b.Journal)) {
				if a.Journal[i] != b.Journal[i] {
					t.Errorf("first difference:\n%s\n%s", a.Journal[i], b.Journal[i])
					break
				}
			}
			for i := range min(len(a.Trace), len(b.Trace)) {
				if a.Trace[i] != b.Trace[i] {
					t.Errorf("first different step:\n%s\n%s", a.Trace[i], b.Trace[i])
					break
				}
			}
		}
	}
}
