package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/conclave-ai/conclave/internal/benchkit"
	"github.com/conclave-ai/conclave/internal/soak"
)

// benchSoakCmd holds the flags of `conclave bench soak`.
type benchSoakCmd struct {
	app          *app
	runs         int
	inFlight     int
	clients      int
	clientPause  time.Duration
	scenario     string
	sessions     int
	warmup       float64
	rest         bool
	sample       time.Duration
	hubIdleAfter time.Duration
	heartbeat    time.Duration
	seed         uint64
	jsonOut      bool
}

func newBenchSoakCmd(a *app) *cobra.Command {
	c := &benchSoakCmd{app: a}
	cmd := &cobra.Command{
		Use:   "soak [flags]",
		Short: "Soak one serve --data process with many small runs and SSE clients coming and going",
		Long: `Start this program's "serve" on a fresh data directory in a child process
(quotas opened up for the driver: no rate limit, --concurrent-runs set to
--in-flight, and a short --hub-idle-after), drive --runs small runs through
it over HTTP with --in-flight in flight at once, while --clients SSE clients
come and go (each follows the session of a recent run from seq 1 or from a
Last-Event-ID, reads some events or up to the run's end, and leaves; every
stream is checked to be gapless).

Every --sample it reads the server's RSS (VmRSS), goroutines, session hubs
and live runs. After the warm-up (the first --warmup of the runs) it reports,
for RSS and goroutines, the value at the warm-up's end, the min, the max, the
last value and max / warm-up end against the bound of issue 11 (1.10), the
trend (median of the window's second half over its first), and the same
once the driver stopped and the hubs went idle. With --rest (the default),
the driver and the clients pause after the warm-up until the hubs went
idle, and the report compares the server at rest after the drive with the
server at rest after the warm-up: the same state (no run, stream or hub),
so what the server keeps, not how many clients were connected. The rest is
left out of the rates. Also runs/s, events/s and the server's CPU time.

It is a benchmark, not a test: the exit status is 0 whenever the
measurement completed, whether or not the bound held (the report says).`,
		Example: `  conclave bench soak
  conclave bench soak --runs 500 --clients 50           # a quick look
  conclave bench soak --sessions 100 --in-flight 64
  conclave bench soak --json > soak.json                # every sample`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd) },
	}
	fs := cmd.Flags()
	fs.IntVar(&c.runs, "runs", soak.DefaultRuns, "runs to drive to their end")
	fs.IntVar(&c.inFlight, "in-flight", soak.DefaultInFlight, "runs in flight at once (the server's --concurrent-runs)")
	fs.IntVar(&c.clients, "clients", soak.DefaultClients, "SSE clients coming and going (0: none)")
	fs.DurationVar(&c.clientPause, "client-pause", soak.DefaultClientPause, "longest pause of a client between two connections (each is uniform in [0, this])")
	fs.StringVar(&c.scenario, "scenario", soak.DefaultScenario, "the scenario of every run, JSON (README, Scenarios)")
	fs.IntVar(&c.sessions, "sessions", 0, "how runs are spread: 0, a new session per run; N, N sessions reused in turn")
	fs.Float64Var(&c.warmup, "warmup", soak.DefaultWarmup, "fraction of the runs that must end before the bound is measured, in (0, 1)")
	fs.BoolVar(&c.rest, "rest", true, "after the warm-up, pause the driver and the clients until the hubs go idle, to compare the server at rest then and after the drive")
	fs.DurationVar(&c.sample, "sample", soak.DefaultSample, "sampling interval")
	fs.DurationVar(&c.hubIdleAfter, "hub-idle-after", soak.DefaultHubIdleAfter, "the server's --hub-idle-after (idle sessions give their hubs back)")
	fs.DurationVar(&c.heartbeat, "heartbeat", soak.DefaultHeartbeat, "the server's --heartbeat (an idle stream whose client left is noticed at its second heartbeat)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the clients' and the driver's random choices")
	fs.BoolVar(&c.jsonOut, "json", false, "print the result as JSON (with every sample) instead of a report")
	return cmd
}

func (c *benchSoakCmd) run(cmd *cobra.Command) error {
	switch {
	case c.runs < 1 || c.inFlight < 1 || c.clients < 0 || c.sessions < 0:
		return usageError(errors.New("--runs and --in-flight must be at least 1, --clients and --sessions not negative"))
	case !(c.warmup > 0 && c.warmup < 1):
		return usageError(fmt.Errorf("--warmup must be a fraction in (0, 1), got %v", c.warmup))
	case c.sample < 10*time.Millisecond:
		return usageError(fmt.Errorf("--sample must be at least 10ms, got %v", c.sample))
	case c.hubIdleAfter < 100*time.Millisecond:
		return usageError(fmt.Errorf("--hub-idle-after must be at least 100ms, got %v", c.hubIdleAfter))
	case c.heartbeat < 100*time.Millisecond:
		return usageError(fmt.Errorf("--heartbeat must be at least 100ms, got %v", c.heartbeat))
	case c.clientPause < 0:
		return usageError(errors.New("--client-pause must not be negative"))
	}
	clients := c.clients
	if clients == 0 {
		clients = -1 // soak.Options: none
	}
	if _, err := benchkit.RaiseFileLimit(uint64(c.clients) + uint64(c.inFlight) + 1024); err != nil {
		return failure(fmt.Errorf("raise the open-file limit: %w", err))
	}
	exe, err := os.Executable()
	if err != nil {
		return failure(fmt.Errorf("find this program to run the server: %w", err))
	}
	o := soak.Options{
		Runs: c.runs, InFlight: c.inFlight, Clients: clients, ClientPause: c.clientPause,
		Scenario: json.RawMessage(c.scenario), Sessions: c.sessions, Warmup: c.warmup, NoRest: !c.rest, Sample: c.sample,
		HubIdleAfter: c.hubIdleAfter, Heartbeat: c.heartbeat, Seed: c.seed,
		Launch: soak.Exec(exe, nil, nil, c.app.stderr),
		Logger: slog.New(slog.NewTextHandler(c.app.stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Now:    c.app.now,
	}
	res, err := soak.Run(cmd.Context(), o)
	if err != nil {
		var ve *soak.OptionsError
		if errors.As(err, &ve) {
			return usageError(err)
		}
		return failure(err)
	}
	if c.jsonOut {
		enc := json.NewEncoder(c.app.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return soak.WriteReport(c.app.stdout, res)
}
