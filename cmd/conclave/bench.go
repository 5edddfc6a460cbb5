package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
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
	workload   string
	council    fanout.CouncilConfig
	runTimeout time.Duration
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
	cluster    int
	cpuProfile string
	serverProf string
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

With --workload council the events come from one real council run instead
(the scripted model with token delays, waves and sub-agents: --nodes,
--tokens, --concurrency, --token-delay, --waves, --subagents), started once
the clients follow the session; the offered rate is what the council
produces, latency runs from each envelope's timestamp, and the run ends
when the council's run ends and every client has its last event (or after
--drain). --rate, --duration and --payload do not apply, nor does the
naive baseline.

Clients run in this process and the server in its own, so the server's CPU and
memory are its own; both share the machine's cores. It is a benchmark, not a
test: the exit status is 0 whenever the measurement completed.`,
		Example: `  conclave bench fanout
  conclave bench fanout --transport ws --rate 1200
  conclave bench fanout --clients 1000 --rate 1 --duration 1s   # idle memory
  conclave bench fanout --flush-delay 10ms --baseline=false --json
  conclave bench fanout --workload council --nodes 200 --tokens 100 --concurrency 16 --token-delay 10ms
  conclave bench fanout --cluster-nodes 3 --baseline=false   # 3 cluster nodes on JetStream, clients spread over them`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd) },
	}
	fs := cmd.Flags()
	fs.StringVar(&c.transport, "transport", string(fanout.TransportSSE), "stream protocol: sse|ws")
	fs.StringVar(&c.workload, "workload", string(fanout.WorkloadSynthetic), "what produces the events: synthetic (a fixed-rate publisher) or council (a real council run)")
	d := fanout.DefaultCouncil()
	fs.IntVar(&c.council.Nodes, "nodes", d.Nodes, "council: worker nodes")
	fs.IntVar(&c.council.Tokens, "tokens", d.Tokens, "council: tokens each worker streams")
	fs.IntVar(&c.council.Concurrency, "concurrency", d.Concurrency, "council: nodes of a wave running at once")
	fs.DurationVar(&c.council.TokenDelay, "token-delay", d.TokenDelay, "council: the scripted model's delay before each token (whole ms)")
	fs.IntVar(&c.council.Waves, "waves", d.Waves, "council: waves the nodes are spread over")
	fs.IntVar(&c.council.Subagents, "subagents", d.Subagents, "council: sub-agents each worker delegates to")
	fs.DurationVar(&c.runTimeout, "run-timeout", 5*time.Minute, "council: how long the run may take before the benchmark fails")
	fs.IntVar(&c.clients, "clients", 1000, "concurrent streams, all following one session")
	fs.Float64Var(&c.rate, "rate", 1500, "events per second published into the session (deliveries/s = rate × clients)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to publish")
	fs.IntVar(&c.payload, "payload", fanout.DefaultPayload, fmt.Sprintf("text bytes per event, at least %d", fanout.StampLen))
	fs.DurationVar(&c.flushDelay, "flush-delay", fanout.DefaultFlushDelay,
		"how long a woken Conclave stream waits for more events before it writes (transport.Config.FlushDelay)")
	fs.IntVar(&c.queue, "queue", fanout.DefaultQueue, "per-subscriber queue bound (both servers)")
	fs.BoolVar(&c.baseline, "baseline", true, "also measure the naive baseline broadcaster")
	fs.BoolVar(&c.jsonOut, "json", false, "print the results as JSON instead of a table")
	fs.DurationVar(&c.drain, "drain", 0, "how long to wait for events in flight after publishing stops or the council's run ends (default 2s; council 30s)")
	fs.DurationVar(&c.settle, "settle", 1500*time.Millisecond, "wait between connecting and measuring idle memory")
	fs.BoolVar(&c.inProcess, "in-process", false, "run the servers in this process (their figures then include the clients')")
	fs.IntVar(&c.cluster, "cluster-nodes", 0, "measure cluster mode: this many `conclave serve --cluster` nodes on one JetStream server (run in this process), node 0 publishing, the clients spread over the nodes (synthetic workload, no baseline)")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of this (the clients') process to `file`")
	_ = fs.MarkHidden("cpuprofile")
	fs.StringVar(&c.serverProf, "server-cpuprofile", "", "write a CPU profile of the Conclave server from the start of publishing (or of the council run) to its shutdown to `file`")
	return cmd
}

func (c *benchFanoutCmd) run(cmd *cobra.Command) error {
	tr, err := fanout.ParseTransport(c.transport)
	if err != nil {
		return usageError(fmt.Errorf("--transport: %w", err))
	}
	wl, err := fanout.ParseWorkload(c.workload)
	if err != nil {
		return usageError(fmt.Errorf("--workload: %w", err))
	}
	if c.clients < 1 || !(c.rate > 0) || c.duration <= 0 || c.queue < 0 || c.flushDelay < 0 || c.drain < 0 || c.runTimeout <= 0 {
		return usageError(errors.New("--clients, --rate, --duration and --run-timeout must be positive; --queue, --flush-delay and --drain not negative"))
	}
	flags := cmd.Flags()
	if wl == fanout.WorkloadCouncil {
		if flags.Changed("baseline") && c.baseline {
			return usageError(errors.New("--baseline: the naive baseline cannot run a council; use --workload synthetic"))
		}
		for _, name := range []string{"rate", "duration", "payload"} {
			if flags.Changed(name) {
				return usageError(fmt.Errorf("--%s applies to the synthetic workload only", name))
			}
		}
		c.baseline = false
	} else {
		for _, name := range []string{"nodes", "tokens", "concurrency", "token-delay", "waves", "subagents", "run-timeout"} {
			if flags.Changed(name) {
				return usageError(fmt.Errorf("--%s applies to the council workload only", name))
			}
		}
	}
	if err := fanout.ValidPayloadSize(c.payload); err != nil {
		return usageError(fmt.Errorf("--payload: %w", err))
	}
	if _, err := benchkit.RaiseFileLimit(uint64(c.clients) + 1024); err != nil {
		return failure(fmt.Errorf("raise the open-file limit: %w", err))
	}
	opts := fanout.Options{
		Transport: tr, Workload: wl, Council: c.council, RunTimeout: c.runTimeout,
		Clients: c.clients, Rate: c.rate, Duration: c.duration, Payload: c.payload,
		FlushDelay: c.flushDelay, Queue: c.queue, Drain: c.drain, Settle: c.settle,
		ServerCPUProfile: c.serverProf,
		Modes:            []fanout.Mode{fanout.ModeConclave},
		Logger:           slog.New(slog.NewTextHandler(c.app.stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Now:              c.app.now,
	}
	if c.cluster != 0 {
		if wl != fanout.WorkloadSynthetic || (flags.Changed("baseline") && c.baseline) {
			return usageError(errors.New("--cluster-nodes measures Conclave alone (--baseline=false) on the synthetic workload"))
		}
		if c.cluster < 1 || c.cluster > 5 {
			return usageError(fmt.Errorf("--cluster-nodes must be 1 to 5, got %d", c.cluster))
		}
		c.baseline, opts.ClusterNodes = false, c.cluster
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
	if opts.ServerCPUProfile != "" { // the server runs in another directory's process
		if opts.ServerCPUProfile, err = filepath.Abs(opts.ServerCPUProfile); err != nil {
			return failure(err)
		}
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
