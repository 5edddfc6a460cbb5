package soak

import (
	"testing"
	"time"
)

// rss builds a sample with RSS r MiB and g goroutines.
func smp(phase Phase, r uint64, g int) Sample {
	return Sample{Phase: phase, RSS: r << 20, Goroutines: g}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	warm := smp(PhaseDrive, 100, 200)
	warm.WarmupEnd = true
	failed := smp(PhaseDrive, 130, 999)
	failed.Err = "GET /metrics: refused"
	s := Summarize([]Sample{
		smp(PhaseStart, 20, 10),
		smp(PhaseDrive, 60, 150), // in the warm-up: not in the window
		smp(PhaseDrive, 300, 900),
		warm,
		smp(PhaseDrive, 95, 210),
		failed, // RSS counts, goroutines do not
		smp(PhaseDrive, 104, 190),
		smp(PhaseIdle, 104, 60),
		smp(PhaseIdle, 99, 12),
	})
	rss, g := s.RSS, s.Goroutines
	if rss.Start != 20<<20 || rss.WarmupEnd != 100<<20 || rss.Min != 95<<20 || rss.Max != 130<<20 || rss.Last != 104<<20 {
		t.Errorf("RSS %+v", rss)
	}
	if rss.MaxRatio != 1.3 || rss.Samples != 4 || !rss.HasIdle || rss.Idle != 99<<20 || rss.IdleRatio != 0.99 {
		t.Errorf("RSS ratios %+v", rss)
	}
	if rss.Held(Bound) || !rss.IdleHeld(Bound) {
		t.Errorf("RSS held %v, idle held %v; want false, true", rss.Held(Bound), rss.IdleHeld(Bound))
	}
	if g.Start != 10 || g.WarmupEnd != 200 || g.Min != 190 || g.Max != 210 || g.Last != 190 || g.Samples != 3 || g.Idle != 12 {
		t.Errorf("goroutines %+v", g)
	}
	if g.MaxRatio != 1.05 || !g.Held(Bound) || !g.IdleHeld(Bound) {
		t.Errorf("goroutines ratio %v held %v", g.MaxRatio, g.Held(Bound))
	}
}

// A warm-up sample without metrics: the reference is the next one with them.
func TestSummarize_WarmupSampleWithoutMetrics(t *testing.T) {
	t.Parallel()
	warm := smp(PhaseDrive, 100, 0)
	warm.WarmupEnd, warm.Err = true, "timeout"
	g := Summarize([]Sample{warm, smp(PhaseDrive, 100, 50), smp(PhaseDrive, 100, 56)}).Goroutines
	if g.WarmupEnd != 50 || g.Max != 56 || g.Samples != 2 || g.MaxRatio != 1.12 || g.Held(Bound) {
		t.Errorf("goroutines %+v", g)
	}
}

func TestSummarize_NoWarmupEnd(t *testing.T) {
	t.Parallel()
	s := Summarize([]Sample{smp(PhaseStart, 10, 10), smp(PhaseDrive, 50, 50)})
	if s.RSS.Samples != 0 || s.RSS.MaxRatio != 0 || s.RSS.Held(Bound) || s.RSS.IdleHeld(Bound) {
		t.Errorf("no window, yet %+v (held %v)", s.RSS, s.RSS.Held(Bound))
	}
}

// A figure that is 0 at the warm-up's end (no hub) has no ratio.
func TestSummarize_ZeroReference(t *testing.T) {
	t.Parallel()
	warm := smp(PhaseDrive, 1, 1)
	warm.WarmupEnd = true
	later := smp(PhaseDrive, 1, 1)
	later.Hubs = 5
	h := Summarize([]Sample{warm, later, smp(PhaseIdle, 1, 1)}).Hubs
	if h.WarmupEnd != 0 || h.Max != 5 || h.MaxRatio != 0 || h.IdleRatio != 0 || !h.HasIdle {
		t.Errorf("hubs %+v", h)
	}
}

func TestSampler_Take(t *testing.T) {
	t.Parallel()
	// No server: the sample keeps the process figures and says why the
	// metrics are missing.
	now := time.Unix(100, 0)
	s := &sampler{pid: -1, base: "http://127.0.0.1:1", hc: newTestHTTPClient(), start: now.Add(-time.Second),
		now: func() time.Time { return now }, runsEnded: func() int { return 7 }}
	got := s.take(t.Context(), PhaseDrive, true)
	if got.Err == "" || got.RunsEnded != 7 || got.Elapsed != time.Second || !got.WarmupEnd || got.Phase != PhaseDrive {
		t.Errorf("sample %+v", got)
	}
	if all := s.all(); len(all) != 1 || all[0] != got {
		t.Errorf("kept %+v", all)
	}
}

// The trend compares medians of the window's halves: a single peak does
// not move it, a steady climb does.
func TestSummarize_Trend(t *testing.T) {
	t.Parallel()
	window := func(rss ...uint64) Growth {
		var ss []Sample
		for i, r := range rss {
			s := smp(PhaseDrive, r, 100)
			s.WarmupEnd = i == 0
			ss = append(ss, s)
		}
		return Summarize(ss).RSS
	}
	if g := window(100, 101, 400, 99, 100, 102, 100, 101); g.Trend < 0.99 || g.Trend > 1.02 || !g.TrendHeld(Bound) || g.Held(Bound) {
		t.Errorf("a peak: trend %v (held %v), max ratio %v (held %v)", g.Trend, g.TrendHeld(Bound), g.MaxRatio, g.Held(Bound))
	}
	if g := window(100, 110, 120, 130, 140, 150, 160, 170); g.Trend < 1.3 || g.TrendHeld(Bound) {
		t.Errorf("a climb: trend %v held %v", g.Trend, g.TrendHeld(Bound))
	}
	if g := window(100, 200, 300); g.Trend != 0 || g.TrendHeld(Bound) {
		t.Errorf("too few samples: trend %v", g.Trend)
	}
}

// The rest after the warm-up: its last sample is the reference of the
// rest-to-rest reading, and none of its samples is in the drive's window.
func TestSummarize_Rest(t *testing.T) {
	t.Parallel()
	warm := smp(PhaseDrive, 100, 900)
	warm.WarmupEnd = true
	s := Summarize([]Sample{
		smp(PhaseStart, 20, 10),
		warm,
		smp(PhaseRest, 98, 400), // hubs still going idle
		smp(PhaseRest, 96, 20),
		smp(PhaseDrive, 104, 1500),
		smp(PhaseDrive, 106, 700),
		smp(PhaseIdle, 110, 300),
		smp(PhaseIdle, 105, 21),
	})
	rss, g := s.RSS, s.Goroutines
	if !rss.HasRest || rss.Rest != 96<<20 || rss.RestRatio != 105.0/96 || rss.Samples != 3 || rss.Min != 100<<20 {
		t.Errorf("RSS %+v", rss)
	}
	if !rss.RestHeld(Bound) {
		t.Errorf("RSS rest to rest %v not held", rss.RestRatio)
	}
	if g.Rest != 20 || g.RestRatio != 1.05 || !g.RestHeld(Bound) || g.Held(Bound) {
		t.Errorf("goroutines %+v", g)
	}
	// Without a rest there is no rest-to-rest reading, held or not.
	if s := Summarize([]Sample{warm, smp(PhaseIdle, 100, 20)}); s.RSS.HasRest || s.RSS.RestHeld(Bound) {
		t.Errorf("no rest: %+v", s.RSS)
	}
	// A rest but no idle sample: no reading either.
	if s := Summarize([]Sample{warm, smp(PhaseRest, 100, 20)}); s.RSS.RestRatio != 0 || s.RSS.RestHeld(Bound) {
		t.Errorf("no idle: %+v", s.RSS)
	}
}
