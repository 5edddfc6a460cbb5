package soak

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/internal/benchkit"
)

// Phase is the part of the soak a sample was taken in.
type Phase string

// Phases, in order.
const (
	// PhaseStart: the server is up, no run was started yet.
	PhaseStart Phase = "start"
	// PhaseDrive: the driver and the clients are at work.
	PhaseDrive Phase = "drive"
	// PhaseRest: the warm-up is over, and the driver and the clients pause
	// until every session hub went idle: the server at rest after the
	// warm-up, the reference of the rest-to-rest reading (Growth.RestRatio).
	PhaseRest Phase = "rest"
	// PhaseIdle: the driver and the clients have stopped; the session hubs
	// are going idle.
	PhaseIdle Phase = "idle"
)

// Sample is one reading of the server under test.
type Sample struct {
	// Elapsed is the time since the soak started the server.
	Elapsed time.Duration `json:"elapsed_ns"`
	Phase   Phase         `json:"phase"`
	// WarmupEnd marks the sample taken when the warm-up ended: the
	// reference of the bound.
	WarmupEnd bool `json:"warmup_end,omitempty"`
	// RunsEnded is how many runs the driver had seen end.
	RunsEnded int `json:"runs_ended"`
	// RSS is the server's VmRSS, from /proc/<pid>/status.
	RSS uint64 `json:"rss_bytes"`
	// CPUSeconds is the server's user + system time so far.
	CPUSeconds float64 `json:"cpu_seconds"`
	// The rest comes from the server's /metrics.
	Goroutines int    `json:"goroutines"`
	HeapInuse  uint64 `json:"heap_inuse_bytes"`
	// LiveHeap is the live heap at the last GC, estimated from the GC's
	// heap goal: unlike HeapInuse it leaves out garbage not yet collected.
	LiveHeap        uint64 `json:"live_heap_bytes"`
	Hubs            int    `json:"hubs"`
	RunsLive        int    `json:"runs_live"`
	RunsKnown       int    `json:"runs_known"`
	Streams         int    `json:"streams"`
	Connections     int    `json:"connections"`
	EventsPublished uint64 `json:"events_published"`
	// Err says why the metrics are missing from this sample.
	Err string `json:"error,omitempty"`
}

// sampler reads the server's figures.
type sampler struct {
	pid       int
	base      string // http://host:port
	hc        *http.Client
	start     time.Time
	now       func() time.Time
	runsEnded func() int
	log       *slog.Logger

	mu      sync.Mutex // guards samples
	samples []Sample
}

// take reads one sample and keeps it.
func (s *sampler) take(ctx context.Context, phase Phase, warmupEnd bool) Sample {
	sm := Sample{Phase: phase, WarmupEnd: warmupEnd, RunsEnded: s.runsEnded()}
	sm.RSS = benchkit.ProcessRSS(s.pid)
	sm.CPUSeconds = benchkit.ProcessCPUSeconds(s.pid)
	m, err := scrapeMetrics(ctx, s.hc, s.base)
	sm.Elapsed = s.now().Sub(s.start)
	if err != nil {
		sm.Err = err.Error()
	} else {
		sm.Goroutines = int(m[metricGoroutines])
		sm.HeapInuse = uint64(m[metricHeapInuse])
		sm.LiveHeap = liveHeap(m[metricNextGC], m[metricGOGC])
		sm.Hubs = int(m[metricHubs])
		sm.RunsLive = int(m[metricRunsLive])
		sm.RunsKnown = int(m[metricRunsKnown])
		sm.Streams = int(m[metricStreams])
		sm.Connections = int(m[metricConnsOpen])
		sm.EventsPublished = uint64(m[metricPublished])
	}
	s.mu.Lock()
	s.samples = append(s.samples, sm)
	s.mu.Unlock()
	return sm
}

// progressEvery is how often the drive logs its progress.
const progressEvery = 10 * time.Second

// drive samples every interval, and at once on each receive from warmup,
// until stop is closed or ctx ends. It logs its progress now and then.
func (s *sampler) drive(ctx context.Context, interval time.Duration, warmup <-chan struct{}, stop <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	logged := s.now()
	for {
		var sm Sample
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-tick.C:
			sm = s.take(ctx, PhaseDrive, false)
		case <-warmup:
			sm = s.take(ctx, PhaseDrive, true)
			s.log.Info("warm-up ended", "runs_ended", sm.RunsEnded, "rss_mb", mb(sm.RSS), "goroutines", sm.Goroutines)
		}
		if now := s.now(); now.Sub(logged) >= progressEvery {
			logged = now
			s.log.Info("progress", "runs_ended", sm.RunsEnded, "rss_mb", mb(sm.RSS), "goroutines", sm.Goroutines,
				"hubs", sm.Hubs, "runs_live", sm.RunsLive, "streams", sm.Streams)
		}
	}
}

// mb is n bytes in MiB, rounded to 0.1.
func mb(n uint64) float64 { return math.Round(float64(n)/(1<<20)*10) / 10 }

// all returns the samples so far.
func (s *sampler) all() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples...)
}

// Growth is how one figure moved after the warm-up.
type Growth struct {
	// Start is its value before the first run.
	Start float64 `json:"start"`
	// WarmupEnd is its value when the warm-up ended: the reference.
	WarmupEnd float64 `json:"warmup_end"`
	// Min, Max and Last are over the drive samples from the warm-up's end
	// to the driver's.
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	Last float64 `json:"last"`
	// MaxRatio is Max / WarmupEnd (0 when WarmupEnd is 0).
	MaxRatio float64 `json:"max_ratio"`
	// Idle is its value in the last sample, once the driver stopped and the
	// hubs went idle; IdleRatio is Idle / WarmupEnd.
	Idle      float64 `json:"idle"`
	IdleRatio float64 `json:"idle_ratio"`
	// Rest is its value in the last sample of the rest after the warm-up
	// (PhaseRest); RestRatio is Idle / Rest: the server at rest after the
	// whole drive against the server at rest after the warm-up. Unlike the
	// drive's samples, the two readings are taken in the same state (no
	// run, no stream, no hub), so they compare what the server keeps, not
	// how many clients happened to be connected.
	Rest      float64 `json:"rest"`
	RestRatio float64 `json:"rest_ratio"`
	HasRest   bool    `json:"has_rest"`
	// Trend is the median of the window's second half over the median of
	// its first half: growth over time, which single peaks (a burst of
	// stream writers, a GC cycle) do not move. 0 with fewer than 4 samples.
	Trend float64 `json:"trend"`
	// Samples is how many drive samples the figures come from.
	Samples int `json:"samples"`
	// HasIdle reports whether there is an idle sample.
	HasIdle bool `json:"has_idle"`
}

// Held reports whether the figure stayed within bound of its value at the
// end of the warm-up while the driver ran.
func (g Growth) Held(bound float64) bool { return g.Samples > 0 && g.MaxRatio <= bound }

// TrendHeld reports whether the figure did not grow by more than bound
// over the window (see Trend).
func (g Growth) TrendHeld(bound float64) bool { return g.Trend > 0 && g.Trend <= bound }

// IdleHeld reports whether the figure was within bound once idle.
func (g Growth) IdleHeld(bound float64) bool { return g.HasIdle && g.IdleRatio <= bound }

// RestHeld reports whether the figure at rest after the drive was within
// bound of its value at rest after the warm-up.
func (g Growth) RestHeld(bound float64) bool { return g.HasRest && g.HasIdle && g.RestRatio <= bound }

// Summary is the growth of each figure the soak follows. RSS and
// Goroutines are judged against Bound; the others explain them.
type Summary struct {
	RSS        Growth `json:"rss_bytes"`
	Goroutines Growth `json:"goroutines"`
	HeapInuse  Growth `json:"heap_inuse_bytes"`
	LiveHeap   Growth `json:"live_heap_bytes"`
	Hubs       Growth `json:"hubs"`
	RunsLive   Growth `json:"runs_live"`
	RunsKnown  Growth `json:"runs_known"`
	Streams    Growth `json:"streams"`
}

// Summarize computes each figure's Growth from samples in the order they
// were taken. The window starts at the sample marked WarmupEnd (none: no
// figures) and ends at the last drive sample; samples whose metrics are
// missing are skipped for the figures that come from /metrics (the
// reference is then the first value after the warm-up's end).
func Summarize(samples []Sample) Summary {
	fromMetrics := func(f func(Sample) float64) func(Sample) (float64, bool) {
		return func(s Sample) (float64, bool) { return f(s), s.Err == "" }
	}
	return Summary{
		RSS:        growth(samples, func(s Sample) (float64, bool) { return float64(s.RSS), s.RSS > 0 }),
		Goroutines: growth(samples, fromMetrics(func(s Sample) float64 { return float64(s.Goroutines) })),
		HeapInuse:  growth(samples, fromMetrics(func(s Sample) float64 { return float64(s.HeapInuse) })),
		LiveHeap:   growth(samples, fromMetrics(func(s Sample) float64 { return float64(s.LiveHeap) })),
		Hubs:       growth(samples, fromMetrics(func(s Sample) float64 { return float64(s.Hubs) })),
		RunsLive:   growth(samples, fromMetrics(func(s Sample) float64 { return float64(s.RunsLive) })),
		RunsKnown:  growth(samples, fromMetrics(func(s Sample) float64 { return float64(s.RunsKnown) })),
		Streams:    growth(samples, fromMetrics(func(s Sample) float64 { return float64(s.Streams) })),
	}
}

// growth follows one figure; value reports false for a sample without it.
func growth(samples []Sample, value func(Sample) (float64, bool)) Growth {
	var g Growth
	var window []float64
	inWindow, haveRef := false, false
	for _, s := range samples {
		if s.Phase == PhaseDrive && s.WarmupEnd {
			inWindow = true // the reference is the first value from here
		}
		v, ok := value(s)
		if !ok {
			continue
		}
		switch s.Phase {
		case PhaseStart:
			g.Start = v
		case PhaseDrive:
			if !inWindow {
				continue
			}
			if !haveRef {
				haveRef = true
				g.WarmupEnd, g.Min, g.Max = v, v, v
			}
			g.Min, g.Max, g.Last = min(g.Min, v), max(g.Max, v), v
			g.Samples++
			window = append(window, v)
		case PhaseRest:
			g.Rest, g.HasRest = v, true
		case PhaseIdle:
			g.Idle, g.HasIdle = v, true
		}
	}
	if half := len(window) / 2; half >= 2 {
		if first := median(window[:half]); first > 0 {
			g.Trend = median(window[len(window)-half:]) / first
		}
	}
	if g.HasRest && g.HasIdle && g.Rest > 0 {
		g.RestRatio = g.Idle / g.Rest
	}
	if g.WarmupEnd > 0 {
		g.MaxRatio = g.Max / g.WarmupEnd
		if g.HasIdle {
			g.IdleRatio = g.Idle / g.WarmupEnd
		}
	}
	return g
}

// median of vs (which it does not change).
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}
