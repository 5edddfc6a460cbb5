package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/conclave-ai/conclave/internal/benchkit"
	"github.com/conclave-ai/conclave/internal/routine"
)

// Result is a whole soak: its settings, what the driver and the clients
// saw, the server's figures, and every sample.
type Result struct {
	Runs         int             `json:"runs"`
	InFlight     int             `json:"in_flight"`
	Clients      int             `json:"clients"`
	ClientPause  time.Duration   `json:"client_pause_ns"`
	Scenario     json.RawMessage `json:"scenario"`
	Sessions     int             `json:"sessions"`
	Warmup       float64         `json:"warmup"`
	WarmupRuns   int             `json:"warmup_runs"`
	Sample       time.Duration   `json:"sample_ns"`
	HubIdleAfter time.Duration   `json:"hub_idle_after_ns"`
	Heartbeat    time.Duration   `json:"heartbeat_ns"`
	Seed         uint64          `json:"seed"`
	CPUs         int             `json:"cpus"`
	GoVersion    string          `json:"go_version"`
	StartedAt    time.Time       `json:"started_at"`

	RunTally RunTally    `json:"run_tally"`
	Streams  StreamTally `json:"streams"`

	// Drive is how long the driver took; the rates are over it. Warmup
	// is how long its warm-up took.
	Drive           time.Duration `json:"drive_ns"`
	WarmupTook      time.Duration `json:"warmup_took_ns"`
	RunsPerSec      float64       `json:"runs_per_sec"`
	EventsPublished uint64        `json:"events_published"`
	EventsPerSec    float64       `json:"events_per_sec"`
	// ServerCPUDrive is the server's CPU time while the driver ran;
	// ServerCPUTotal over its whole life, shutdown included.
	ServerCPUDrive float64 `json:"server_cpu_seconds_drive"`
	ServerCPUTotal float64 `json:"server_cpu_seconds_total"`
	// ClientCPU is this process's CPU time while the driver ran (the driver
	// and the clients); OtherCPU every other process's on the machine.
	ClientCPU float64 `json:"client_cpu_seconds"`
	OtherCPU  float64 `json:"other_cpu_seconds"`
	// IdleWait is how long the hubs took to go idle after the driver and
	// the clients stopped; HubsIdle is false if some never did.
	IdleWait time.Duration `json:"idle_wait_ns"`
	HubsIdle bool          `json:"hubs_idle"`
	// RestWait and RestedIdle are the same for the rest after the warm-up
	// (Options.NoRest); the drive's figures leave the rest out.
	RestWait   time.Duration `json:"rest_wait_ns,omitempty"`
	RestedIdle bool          `json:"rested_idle,omitempty"`
	// DataBytes is the size of the data directory at the end.
	DataBytes int64 `json:"data_bytes"`

	Bound   float64  `json:"bound"`
	Summary Summary  `json:"summary"`
	Samples []Sample `json:"samples"`

	// ServerLogProblems counts the server's log lines at WARN and above
	// (the first are in ServerLogFirst); ServerExit is how it stopped.
	ServerLogProblems int      `json:"server_log_problems"`
	ServerLogFirst    []string `json:"server_log_first,omitempty"`
	ServerExit        string   `json:"server_exit,omitempty"`
}

// Held reports whether RSS and goroutines stayed within Bound of their
// value at the end of the warm-up while the driver ran.
func (r *Result) Held() bool {
	return r.Summary.RSS.Held(r.Bound) && r.Summary.Goroutines.Held(r.Bound)
}

// TrendHeld reports whether neither grew by more than Bound over the
// window (Growth.Trend).
func (r *Result) TrendHeld() bool {
	return r.Summary.RSS.TrendHeld(r.Bound) && r.Summary.Goroutines.TrendHeld(r.Bound)
}

// IdleHeld reports whether they were within Bound once the hubs went idle.
func (r *Result) IdleHeld() bool {
	return r.Summary.RSS.IdleHeld(r.Bound) && r.Summary.Goroutines.IdleHeld(r.Bound)
}

// RestHeld reports whether, at rest after the drive, they were within
// Bound of their value at rest after the warm-up (Growth.RestRatio).
func (r *Result) RestHeld() bool {
	return r.Summary.RSS.RestHeld(r.Bound) && r.Summary.Goroutines.RestHeld(r.Bound)
}

// Run starts the server, soaks it and returns the result. An error means
// the measurement did not complete (the server did not start or died, or
// ctx ended); whether the bound held is in the Result.
func Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	log := o.Logger
	res := &Result{Runs: o.Runs, InFlight: o.InFlight, Clients: o.Clients, ClientPause: o.ClientPause,
		Scenario: o.Scenario, Sessions: o.Sessions, Warmup: o.Warmup, WarmupRuns: o.warmupRuns(),
		Sample: o.Sample, HubIdleAfter: o.HubIdleAfter, Heartbeat: o.Heartbeat, Seed: o.Seed, Bound: Bound,
		CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), StartedAt: o.Now().UTC()}

	dir, err := os.MkdirTemp("", "conclave-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	start := o.Now()
	srv, err := o.Launch(ctx, ServerConfig{DataDir: dir, ConcurrentRuns: o.InFlight,
		HubIdleAfter: o.HubIdleAfter, Heartbeat: o.Heartbeat})
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			sctx, cancel := context.WithTimeout(context.Background(), serverStopGrace)
			defer cancel()
			srv.Stop(sctx)
		}
	}()
	log.Info("server listening", "addr", srv.Addr, "pid", srv.PID, "data", dir)
	// The server's death ends the soak: nothing measured after it counts.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var watcher routine.Group
	unwatch := make(chan struct{})
	watcher.Go(func() {
		select {
		case <-srv.Done():
			cancel(fmt.Errorf("%w; its log ends:\n%s", errServerDied, srv.log.tail()))
		case <-unwatch:
		}
	})
	defer func() { closeOnce(unwatch); _ = watcher.Wait(context.Background()) }()

	// The driver and the sampler have their own connections: the driver's
	// keep-alive connections (each a goroutine in the server) are closed
	// when it is done, so that the idle figures are the server's own.
	base := "http://" + srv.Addr
	driverHC := &http.Client{Timeout: requestTimeout, Transport: &http.Transport{
		MaxIdleConnsPerHost: o.InFlight + 4, IdleConnTimeout: 30 * time.Second}}
	defer driverHC.CloseIdleConnections()
	samplerHC := &http.Client{Timeout: requestTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer samplerHC.CloseIdleConnections()
	recent := newRecentRuns(max(64, 4*o.InFlight), o.Sessions > 0)
	drv := newDriver(o, base, driverHC, recent)
	sm := &sampler{pid: srv.PID, base: base, hc: samplerHC, start: start, now: o.Now, runsEnded: drv.runsEnded, log: log}

	first := sm.take(ctx, PhaseStart, false)
	if first.Err != "" {
		return nil, fmt.Errorf("soak: the server's metrics: %s", first.Err)
	}

	// Drive: the sampler and the clients run until the driver is done,
	// in two legs with a rest between them unless o.NoRest.
	cs := newClients(o, srv.Addr, recent)
	driveStart := o.Now()
	log.Info("driving", "runs", o.Runs, "in_flight", o.InFlight, "clients", o.Clients, "warmup_runs", o.warmupRuns())
	var last Sample
	var round uint64
	leg := func(upto int) error {
		var (
			sampling    routine.Group
			clientsDone routine.Group
			stopSampler = make(chan struct{})
		)
		cctx, stopClients := context.WithCancel(ctx)
		defer stopClients()
		sampling.Go(func() { sm.drive(ctx, o.Sample, drv.warm, stopSampler) })
		r := round
		round++
		clientsDone.Go(func() { cs.run(cctx, r) })
		legStart := o.Now()
		cpu0, self0, machine0 := benchkit.ProcessCPUSeconds(srv.PID), benchkit.SelfCPUSeconds(), benchkit.MachineBusySeconds()
		drv.run(ctx, upto)
		res.Drive += o.Now().Sub(legStart)
		cpu1, self1, machine1 := benchkit.ProcessCPUSeconds(srv.PID), benchkit.SelfCPUSeconds(), benchkit.MachineBusySeconds()
		close(stopSampler)
		_ = sampling.Wait(context.Background()) // a sample is bounded by the request timeout
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		// A warm-up that ended after the sampler's last tick is sampled
		// now, then the end of the leg, clients still connected.
		select {
		case <-drv.warm:
			sm.take(ctx, PhaseDrive, true)
		default:
		}
		last = sm.take(ctx, PhaseDrive, false)
		stopClients()
		_ = clientsDone.Wait(context.Background()) // stopping closes every stream
		driverHC.CloseIdleConnections()
		res.ServerCPUDrive += cpu1 - cpu0
		res.ClientCPU += self1 - self0
		if machine1 > machine0 {
			res.OtherCPU += max(0, machine1-machine0-(cpu1-cpu0)-(self1-self0))
		}
		return nil
	}
	if o.rests() {
		if err := leg(o.warmupRuns()); err != nil {
			return nil, err
		}
		log.Info("warm-up done; resting until the hubs go idle")
		if res.RestedIdle, res.RestWait, err = waitIdle(ctx, o, sm, PhaseRest); err != nil {
			return nil, err
		}
	}
	if err := leg(o.Runs); err != nil {
		return nil, err
	}

	res.RunTally, res.Streams = drv.result(), cs.result()
	ended := res.RunTally.Created - res.RunTally.TimedOut
	if secs := res.Drive.Seconds(); secs > 0 {
		res.RunsPerSec = float64(ended) / secs
		if last.Err == "" {
			res.EventsPublished = last.EventsPublished - first.EventsPublished
			res.EventsPerSec = float64(res.EventsPublished) / secs
		}
	}

	log.Info("driver done; waiting for the hubs to go idle", "runs_per_sec", math.Round(res.RunsPerSec), "hub_idle_after", o.HubIdleAfter)
	if res.HubsIdle, res.IdleWait, err = waitIdle(ctx, o, sm, PhaseIdle); err != nil {
		return nil, err
	}
	res.Samples = sm.all()
	res.Summary = Summarize(res.Samples)
	driveAt := driveStart.Sub(start)
	for _, s := range res.Samples {
		if s.WarmupEnd {
			res.WarmupTook = max(0, s.Elapsed-driveAt)
		}
	}
	res.DataBytes = dirSize(dir)

	closeOnce(unwatch) // the server's exit is expected now
	sctx, scancel := context.WithTimeout(context.Background(), serverStopGrace)
	defer scancel()
	exit := srv.Stop(sctx)
	stopped = true
	res.ServerCPUTotal = exit.CPUSeconds
	if exit.Err != nil {
		res.ServerExit = exit.Err.Error()
	}
	res.ServerLogProblems, res.ServerLogFirst = srv.LogProblems()
	return res, nil
}

// waitIdle samples until the server has no hub left, then once more for
// the goroutines that outlive the hubs briefly. It gives up after long
// enough for every hub to have stopped: a hub stops once its session has
// had no run, subscriber or event for HubIdleAfter (a sweep every
// HubIdleAfter/2 finds it), but an idle SSE stream whose client left is
// only noticed when the server writes to it, at its heartbeats (the write
// after the client's FIN still succeeds, the next one fails), and its
// session keeps a subscriber until then.
func waitIdle(ctx context.Context, o Options, sm *sampler, phase Phase) (idle bool, took time.Duration, err error) {
	start := o.Now()
	deadline := start.Add(3*o.Heartbeat + 2*o.HubIdleAfter + 2*o.Sample)
	for !idle && o.Now().Before(deadline) {
		if sleep(ctx, o.Sample) != nil {
			return false, 0, context.Cause(ctx)
		}
		s := sm.take(ctx, phase, false)
		idle = s.Err == "" && s.Hubs == 0
	}
	took = o.Now().Sub(start)
	if sleep(ctx, o.Sample) != nil {
		return false, 0, context.Cause(ctx)
	}
	sm.take(ctx, phase, false)
	return idle, took, context.Cause(ctx)
}

// Bounds of the soak's own requests and of the server's stop.
const (
	requestTimeout  = 30 * time.Second
	serverStopGrace = 60 * time.Second
)

// errServerDied ends a soak whose server exited before it was stopped.
var errServerDied = errors.New("soak: the server exited during the soak")

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// dirSize is the total size of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
