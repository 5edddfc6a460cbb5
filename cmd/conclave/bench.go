package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/conclave-ai/conclave/internal/benchkit"
	"github.com/conclave-ai/conclave/internal/fanout"
)

// fanoutServerCmd is the hidden subcommand that runs one server under test
// in its own process; `conclave bench fanout` starts it.
const fanoutServerCmd = "fanout-server"

func newBenchCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark Conclave on this machine",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usageError(errors.New("a benchmark is required (see conclave bench --help)"))
		},
	}
	cmd.AddCommand(newBenchFanoutCmd(a), newBenchFanoutServerCmd(a), newBenchSoakCmd(a))
	return cmd
}

// benchFanoutCmd holds the flags of `conclave bench fanout`.
type benchFanoutCmd struct {
	app        *app
	transport  string
	clients    int
	rate       float64
	duration   time.Duration
	payload    int
	flushDelay time.Duration
	queue      int
	baseline   bool
	jsonOut    bool
	drain      time.Duration
	settle     time.Duration
	inProcess  bool
	cpuProfile string
}

func newBenchFanoutCmd(a *app) *cobra.Command {
	c := &benchFanoutCmd{app: a}
	cmd := &cobra.Command{
		Use:   "fanout [flags]",
		Short: "Measure event fan-out to many SSE or WebSocket clients",
		Long: `Start a Conclave server in a child process, connect --clients streams to one
session over loopback, publish --rate events per second with a --payload-byte
text for --duration, and report deliveries per second, lost events, latency
percentiles (publish to client read), the server's CPU time and its memory per
idle subscriber. With --baseline (the default) a naive broadcaster (a
goroutine and a channel per client, one write and flush per event) is
measured the same way and shown beside it.

Clients run in this process and the server in its own, so the server's CPU and
memory are its own; both share the machine's cores. It is a benchmark, not a
test: the exit status is 0 whenever the measurement completed.`,
		Example: `  conclave bench fanout
  conclave bench fanout --transport ws --rate 1200
  conclave bench fanout --clients 1000 --rate 1 --duration 1s   # idle memory
  conclave bench fanout --flush-delay 10ms --baseline=false --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd) },
	}
	fs := cmd.Flags()
	fs.StringVar(&c.transport, "transport", string(fanout.TransportSSE), "stream protocol: sse|ws")
	fs.IntVar(&c.clients, "clients", 1000, "concurrent streams, all following one session")
	fs.Float64Var(&c.rate, "rate", 1500, "events per second published into the session (deliveries/s = rate × clients)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to publish")
	fs.IntVar(&c.payload, "payload", fanout.DefaultPayload, fmt.Sprintf("text bytes per event, at least %d", fanout.StampLen))
	fs.DurationVar(&c.flushDelay, "flush-delay", fanout.DefaultFlushDelay,
		"how long a woken Conclave stream waits for more events before it writes (transport.Config.FlushDelay)")
	fs.IntVar(&c.queue, "queue", fanout.DefaultQueue, "per-subscriber queue bound (both servers)")
	fs.BoolVar(&c.baseline, "baseline", true, "also measure the naive baseline broadcaster")
	fs.BoolVar(&c.jsonOut, "json", false, "print the results as JSON instead of a table")
	fs.DurationVar(&c.drain, "drain", 2*time.Second, "how long to wait for events in flight after publishing stops")
	fs.DurationVar(&c.settle, "settle", 1500*time.Millisecond, "wait between connecting and measuring idle memory")
	fs.BoolVar(&c.inProcess, "in-process", false, "run the servers in this process (their figures then include the clients')")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of this (the clients') process to `file`")
	_ = fs.MarkHidden("cpuprofile")
	return cmd
}

func (c *benchFanoutCmd) run(cmd *cobra.Command) error {
	tr, err := fanout.ParseTransport(c.transport)
	if err != nil {
		return usageError(fmt.Errorf("--transport: %w", err))
	}
	if c.clients < 1 || !(c.rate > 0) || c.duration <= 0 || c.queue < 0 || c.flushDelay < 0 {
		return usageError(errors.New("--clients, --rate and --duration must be positive; --queue and --flush-delay not negative"))
	}
	if err := fanout.ValidPayloadSize(c.payload); err != nil {
		return usageError(fmt.Errorf("--payload: %w", err))
	}
	if _, err := benchkit.RaiseFileLimit(uint64(c.clients) + 1024); err != nil {
		return failure(fmt.Errorf("raise the open-file limit: %w", err))
	}
	opts := fanout.Options{
		Transport: tr, Clients: c.clients, Rate: c.rate, Duration: c.duration, Payload: c.payload,
		FlushDelay: c.flushDelay, Queue: c.queue, Drain: c.drain, Settle: c.settle,
		Modes:  []fanout.Mode{fanout.ModeConclave},
		Logger: slog.New(slog.NewTextHandler(c.app.stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Now:    c.app.now,
	}
	if c.baseline {
		opts.Modes = append(opts.Modes, fanout.ModeNaive)
	}
	if c.inProcess {
		opts.Launch = fanout.InProcess
	} else {
		exe, err := os.Executable()
		if err != nil {
			return failure(fmt.Errorf("find this program to run the server: %w", err))
		}
		opts.Launch = fanout.Exec(exe, []string{"bench", fanoutServerCmd}, c.app.stderr)
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return failure(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return failure(err)
		}
		defer pprof.StopCPUProfile()
	}
	res, err := fanout.Run(cmd.Context(), opts)
	if err != nil {
		return failure(err)
	}
	if c.jsonOut {
		enc := json.NewEncoder(c.app.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return fanout.WriteTable(c.app.stdout, res)
}

func newBenchFanoutServerCmd(a *app) *cobra.Command {
	var cfg fanout.ServerConfig
	cmd := &cobra.Command{
		Use:    fanoutServerCmd,
		Short:  "Serve one fan-out benchmark server (started by bench fanout)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := benchkit.RaiseFileLimit(math.MaxUint64); err != nil {
				return failure(fmt.Errorf("raise the open-file limit: %w", err))
			}
			cfg.Logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			cfg.Now = a.now
			if err := fanout.RunServer(cmd.Context(), cfg, cmd.InOrStdin(), a.stdout); err != nil {
				return failure(err)
			}
			return nil
		},
	}
	cfg.BindFlags(cmd.Flags())
	return cmd
}
