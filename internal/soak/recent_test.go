package soak

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestRecentRuns(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	r := newRecentRuns(4, false)
	if _, ok := r.pick(rng); ok {
		t.Fatal("picked from an empty ring")
	}
	for i := range 6 {
		r.add("s"+strconv.Itoa(i), "r"+strconv.Itoa(i))
	}
	seen := map[string]bool{}
	for range 200 {
		e, ok := r.pick(rng)
		if !ok || e.ended || e.cursorMax != 0 {
			t.Fatalf("picked %+v, %v", e, ok)
		}
		seen[e.run] = true
	}
	if len(seen) != 4 || seen["r0"] || seen["r1"] {
		t.Errorf("picked %v; want the last 4 runs", seen)
	}
	r.ended("s5", "r5", 51)
	r.ended("s0", "r0", 9) // no longer in the ring: ignored
	for range 200 {
		if e, _ := r.pick(rng); e.run == "r5" && (!e.ended || e.cursorMax != 51) {
			t.Fatalf("r5 after it ended: %+v", e)
		}
	}
}

// With reused sessions, a new run may start from its session's last known
// seq: the runs before it in the session ended there.
func TestRecentRuns_ReusedSessions(t *testing.T) {
	t.Parallel()
	r := newRecentRuns(8, true)
	r.add("a", "r1")
	r.ended("a", "r1", 50)
	r.add("a", "r2")
	r.add("b", "r3")
	got := map[string]recentRun{}
	for i := range r.n {
		got[r.ring[i].run] = r.ring[i]
	}
	if got["r2"].cursorMax != 50 || got["r2"].ended || got["r3"].cursorMax != 0 || got["r1"].cursorMax != 50 {
		t.Errorf("ring %+v", got)
	}
}
