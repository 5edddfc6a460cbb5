package soak

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// Defaults of Options (and of the flags of `conclave bench soak`).
const (
	DefaultRuns         = 20000
	DefaultInFlight     = 32
	DefaultClients      = 1000
	DefaultWarmup       = 0.2
	DefaultSample       = time.Second
	DefaultHubIdleAfter = 10 * time.Second
	DefaultClientPause  = time.Second
	// DefaultHeartbeat is serve's default --heartbeat.
	DefaultHeartbeat = 10 * time.Second
	// DefaultScenario is a small run: 3 workers of 8 tokens and an 8-token
	// synthesis, about 50 events.
	DefaultScenario = `{"nodes":3,"tokens":8,"synthesis_tokens":8}`
	// Bound is the acceptance criterion of issue 11: after the warm-up, RSS
	// and goroutines stay within 10 % of their value at its end.
	Bound = 1.10
)

// Options configures Run. Launch is required; every other zero field takes
// its default.
type Options struct {
	// Runs is how many runs to drive to their end.
	Runs int
	// InFlight is how many runs are in flight at once. The server's
	// concurrent-runs quota is set to it.
	InFlight int
	// Clients is how many SSE clients come and go; 0 takes the default,
	// -1 means none.
	Clients int
	// ClientPause bounds a client's pause between two connections (each
	// pause is uniform in [0, ClientPause]).
	ClientPause time.Duration
	// Scenario is the JSON scenario of every run (README, Scenarios).
	Scenario json.RawMessage
	// Sessions spreads the runs: 0 starts a new session per run; N > 0
	// sends run i to session soak-(i mod N).
	Sessions int
	// Warmup is the fraction of Runs that must have ended before the
	// figures the bound is judged on start, in [0, 1).
	Warmup float64
	// NoRest skips the rest after the warm-up: by default the driver and
	// the clients pause once the warm-up ended, until every session hub
	// went idle, so that the server at rest after the warm-up can be
	// compared with the server at rest after the drive (Growth.RestRatio).
	NoRest bool
	// Sample is the sampling interval.
	Sample time.Duration
	// HubIdleAfter is the server's --hub-idle-after: how long a session
	// without runs, subscribers or events keeps its hub.
	HubIdleAfter time.Duration
	// Heartbeat is the server's --heartbeat. An idle SSE stream whose
	// client left is noticed only when a heartbeat write fails (the second
	// after the client's FIN), so it also bounds how long such a stream
	// keeps its slot and its session's hub.
	Heartbeat time.Duration
	// RunTimeout bounds how long the driver follows one run. Default 2 min.
	RunTimeout time.Duration
	// Seed seeds the clients' and the driver's random choices.
	Seed uint64
	// Launch starts the server under test.
	Launch Launcher
	// Logger receives progress. Default: discard.
	Logger *slog.Logger
	// Now is the clock of the report's timestamps and rates. Default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Runs == 0 {
		o.Runs = DefaultRuns
	}
	if o.InFlight == 0 {
		o.InFlight = DefaultInFlight
	}
	switch o.Clients {
	case 0:
		o.Clients = DefaultClients
	case -1:
		o.Clients = 0
	}
	if o.ClientPause == 0 {
		o.ClientPause = DefaultClientPause
	}
	if len(o.Scenario) == 0 {
		o.Scenario = json.RawMessage(DefaultScenario)
	}
	if o.Warmup == 0 {
		o.Warmup = DefaultWarmup
	}
	if o.Sample == 0 {
		o.Sample = DefaultSample
	}
	if o.HubIdleAfter == 0 {
		o.HubIdleAfter = DefaultHubIdleAfter
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.RunTimeout == 0 {
		o.RunTimeout = 2 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// OptionsError is an Options that Run refuses.
type OptionsError struct{ Err error }

func (e *OptionsError) Error() string { return e.Err.Error() }

func (e *OptionsError) Unwrap() error { return e.Err }

// validate checks o after withDefaults; errors are *OptionsError.
func (o Options) validate() error {
	if err := o.check(); err != nil {
		return &OptionsError{Err: err}
	}
	return nil
}

func (o Options) check() error {
	switch {
	case o.Launch == nil:
		return errors.New("soak: Options.Launch is required")
	case o.Runs < 1 || o.InFlight < 1:
		return fmt.Errorf("soak: runs and in-flight must be >= 1, got %d and %d", o.Runs, o.InFlight)
	case o.Clients < 0:
		return fmt.Errorf("soak: clients must be >= 0, got %d", o.Clients)
	case o.Sessions < 0:
		return fmt.Errorf("soak: sessions must be >= 0, got %d", o.Sessions)
	case !(o.Warmup >= 0 && o.Warmup < 1):
		return fmt.Errorf("soak: warmup must be a fraction in [0, 1), got %v", o.Warmup)
	case o.Sample < 10*time.Millisecond:
		return fmt.Errorf("soak: sample interval must be at least 10ms, got %v", o.Sample)
	case o.HubIdleAfter < 100*time.Millisecond:
		return fmt.Errorf("soak: hub-idle-after must be at least 100ms, got %v", o.HubIdleAfter)
	case o.Heartbeat < 100*time.Millisecond:
		return fmt.Errorf("soak: heartbeat must be at least 100ms, got %v", o.Heartbeat)
	case o.ClientPause < 0 || o.RunTimeout < 0:
		return errors.New("soak: client pause and run timeout must not be negative")
	}
	var sc messages.Scenario
	if err := messages.DecodeStrict(o.Scenario, &sc); err != nil {
		return fmt.Errorf("soak: scenario: %w", err)
	}
	return nil
}

// warmupRuns is how many runs end the warm-up.
func (o Options) warmupRuns() int { return int(o.Warmup * float64(o.Runs)) }

// rests reports whether the soak rests after the warm-up: there is one,
// and runs after it.
func (o Options) rests() bool { return !o.NoRest && o.warmupRuns() > 0 && o.warmupRuns() < o.Runs }
