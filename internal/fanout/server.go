package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/conclave-ai/conclave/transport"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/internal/benchkit"
	"github.com/conclave-ai/conclave/internal/routine"
	"github.com/conclave-ai/conclave/messages"
)

// Mode names the server under test.
type Mode string

// Server modes.
const (
	// ModeConclave is Conclave's own fan-out: actors.Engine + transport.Server.
	ModeConclave Mode = "conclave"
	// ModeNaive is the baseline: a goroutine and a channel per client, one
	// write and flush (or one WebSocket frame) per event.
	ModeNaive Mode = "naive"
)

// ParseMode validates s.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeConclave, ModeNaive:
		return m, nil
	}
	return "", fmt.Errorf("fanout: mode %q is not one of conclave, naive", s)
}

// Transport names the stream protocol the clients use.
type Transport string

// Transports.
const (
	TransportSSE Transport = "sse"
	TransportWS  Transport = "ws"
)

// ParseTransport validates s.
func ParseTransport(s string) (Transport, error) {
	switch t := Transport(s); t {
	case TransportSSE, TransportWS:
		return t, nil
	}
	return "", fmt.Errorf("fanout: transport %q is not one of sse, ws", s)
}

// Defaults of ServerConfig and Options.
const (
	DefaultPayload    = 100
	DefaultQueue      = 256
	DefaultFlushDelay = transport.DefaultFlushDelay // measure what conclave serve runs
)

// ServerConfig configures the server under test. The zero value is valid
// except for Mode and Rate (Rate: synthetic workload only).
type ServerConfig struct {
	Mode Mode
	// Workload is what produces the session's events once started
	// (default synthetic). A council needs ModeConclave.
	Workload Workload
	// Council shapes the council run (council workload only).
	Council CouncilConfig
	// Rate is how many events per second the server publishes into its
	// session once started (synthetic workload).
	Rate float64
	// Payload is the size of each event's text in bytes (default 100).
	Payload int
	// FlushDelay is transport.Config.FlushDelay (conclave mode only).
	FlushDelay time.Duration
	// Queue bounds each subscriber's queue: actors.Config.SubscriberQueue in
	// conclave mode, the client channel's capacity in naive mode (default 256).
	Queue int
	// Tracer is actors.Config.Tracer (conclave mode): tracing on.
	Tracer actors.Tracer
	// CPUProfile, if set, is the file the server writes a CPU profile of
	// itself to, from Start (publishing or the council's start) to
	// Shutdown: the measured span and the drain.
	CPUProfile string
	// Cluster, when set, makes the server a cluster node on the JetStream
	// server at this URL (conclave mode, synthetic workload).
	Cluster string
	// Follower marks a cluster node that only serves streams: node 0
	// owns the session and publishes.
	Follower bool
	// Logger receives the server's warnings. Default: discard.
	Logger *slog.Logger
	// Now is the clock of the payload timestamps. Default: time.Now.
	Now func() time.Time
}

func (c ServerConfig) withDefaults() ServerConfig {
	if c.Workload == "" {
		c.Workload = WorkloadSynthetic
	}
	c.Council = c.Council.withDefaults()
	if c.Payload == 0 {
		c.Payload = DefaultPayload
	}
	if c.Queue == 0 {
		c.Queue = DefaultQueue
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c ServerConfig) validate() error {
	if _, err := ParseMode(string(c.Mode)); err != nil {
		return err
	}
	if _, err := ParseWorkload(string(c.Workload)); err != nil {
		return err
	}
	if c.Workload == WorkloadCouncil {
		if c.Mode != ModeConclave {
			return fmt.Errorf("fanout: the council workload runs on Conclave only, not on mode %s", c.Mode)
		}
		if err := c.Council.validate(); err != nil {
			return err
		}
	} else if !(c.Rate > 0) {
		return fmt.Errorf("fanout: rate must be > 0 events/s, got %v", c.Rate)
	}
	if c.Cluster != "" && (c.Mode != ModeConclave || c.Workload != WorkloadSynthetic) {
		return errors.New("fanout: cluster mode measures Conclave on the synthetic workload")
	}
	if c.FlushDelay < 0 || c.Queue < 0 {
		return errors.New("fanout: flush delay and queue must not be negative")
	}
	return ValidPayloadSize(c.Payload)
}

// BindFlags defines c's fields as flags on fs (the hidden server
// subcommand's flags). Args produces the matching command line.
func (c *ServerConfig) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar((*string)(&c.Mode), "mode", string(ModeConclave), "server under test: conclave or naive")
	fs.StringVar((*string)(&c.Workload), "workload", string(WorkloadSynthetic), "what produces the events: synthetic or council")
	c.Council.bindFlags(fs)
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile from start to shutdown to this file")
	fs.Float64Var(&c.Rate, "rate", 1000, "events per second to publish")
	fs.IntVar(&c.Payload, "payload", DefaultPayload, "payload bytes per event")
	fs.DurationVar(&c.FlushDelay, "flush-delay", DefaultFlushDelay, "transport flush delay (conclave mode)")
	fs.IntVar(&c.Queue, "queue", DefaultQueue, "per-subscriber queue bound")
	fs.StringVar(&c.Cluster, "cluster", "", "be a cluster node on this JetStream server")
	fs.BoolVar(&c.Follower, "follower", false, "cluster node that only serves streams")
}

// Args is the command line that BindFlags parses back into c.
func (c ServerConfig) Args() []string {
	return append([]string{
		"--mode", string(c.Mode),
		"--workload", string(c.Workload),
		"--rate", strconv.FormatFloat(c.Rate, 'g', -1, 64),
		"--payload", strconv.Itoa(c.Payload),
		"--flush-delay", c.FlushDelay.String(),
		"--queue", strconv.Itoa(c.Queue),
		"--cpuprofile", c.CPUProfile,
		"--cluster", c.Cluster,
		"--follower=" + strconv.FormatBool(c.Follower),
	}, c.Council.args()...)
}

// Ready describes a started server; a server process prints it as one
// JSON line on stdout.
type Ready struct {
	PID  int  `json:"pid"`
	Mode Mode `json:"mode"`
	// Stream is the host:port of the streams, Control that of /bench/*.
	Stream  string `json:"stream"`
	Control string `json:"control"`
	// SSEPath and WSPath are the request URIs of the two stream kinds.
	SSEPath string `json:"sse_path"`
	WSPath  string `json:"ws_path"`
	// After is the seq the published events follow: the first has After+1.
	After uint64 `json:"after"`
}

// target is the fan-out being measured. publish is called by the one
// publisher goroutine; the other methods from any goroutine.
type target interface {
	ready() Ready
	publish(ctx context.Context, payload string) error
	// counts reads the target's counters (targetCounts), all at once.
	counts() targetCounts
	// shutdown stops serving and returns once every goroutine of the target ended.
	shutdown(ctx context.Context) error
}

// Server is the server under test: a target, the publisher (or the
// council run) and the control endpoint.
type Server struct {
	cfg     ServerConfig
	target  target
	council *councilRun // nil unless the workload is a council
	profile cpuProfile
	control *http.Server
	ctlLis  net.Listener
	group   routine.Group // control server and publisher

	mu        sync.Mutex    // guards stopPub, pubDone, pubStart and pubTime
	stopPub   chan struct{} // closed to stop the running publisher; nil when none runs
	pubDone   chan struct{} // closed when the running publisher returned
	pubStart  time.Time     // when the running publisher started
	pubTime   time.Duration // how long earlier publishers ran
	published atomic.Int64
	closed    atomic.Bool
}

// StartServer starts the server under test on loopback ports.
func StartServer(ctx context.Context, cfg ServerConfig) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var (
		t   target
		err error
	)
	var council *councilRun
	switch cfg.Mode {
	case ModeConclave:
		var ct *conclaveTarget
		if ct, err = startConclave(ctx, cfg); err == nil {
			t = ct
			if cfg.Workload == WorkloadCouncil {
				council = &councilRun{engine: ct.engine, cfg: cfg.Council, after: ct.after}
			}
		}
	case ModeNaive:
		t, err = startNaive(cfg)
	}
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, target: t, council: council}
	s.ctlLis, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = t.shutdown(ctx)
		return nil, fmt.Errorf("fanout: control listener: %w", err)
	}
	s.control = &http.Server{Handler: s.controlHandler(), ReadHeaderTimeout: 10 * time.Second}
	s.group.Go(func() { _ = s.control.Serve(s.ctlLis) })
	return s, nil
}

// Ready describes the server.
func (s *Server) Ready() Ready {
	r := s.target.ready()
	r.PID = os.Getpid()
	r.Mode = s.cfg.Mode
	r.Control = s.ctlLis.Addr().String()
	return r
}

// Stats reads the server's figures; with gc, memory figures count live
// data only (see readProcStats).
func (s *Server) Stats(gc bool) (Stats, error) {
	c := s.target.counts()
	st := Stats{Published: s.published.Load(), Dropped: c.dropped, Clients: c.clients, Writes: c.writes, CatchupEvents: c.catchup}
	if s.council != nil {
		run, err := s.council.stats()
		if err != nil {
			return st, err
		}
		if run != nil {
			st.Run = run
			st.Published, st.PublishSeconds, st.Publishing = int64(run.Events), run.Seconds, !run.Ended
		}
		readProcStats(&st, gc)
		return st, nil
	}
	s.mu.Lock()
	st.Publishing = s.stopPub != nil
	pubTime := s.pubTime
	if st.Publishing {
		pubTime += s.cfg.Now().Sub(s.pubStart)
	}
	s.mu.Unlock()
	st.PublishSeconds = pubTime.Seconds()
	readProcStats(&st, gc)
	return st, nil
}

// Progress is the council run's progress and the figures that are cheap to
// read (CPU time, RSS, goroutines): what the harness polls while the
// council runs. Unlike Stats it gathers no metrics (the transport's lag
// gauges visit every stream) and reads no MemStats, so polling it costs
// the server next to nothing.
func (s *Server) Progress() (Stats, error) {
	st := Stats{Published: s.published.Load()}
	if s.council != nil {
		run, err := s.council.stats()
		if err != nil {
			return st, err
		}
		if run != nil {
			st.Run = run
			st.Published, st.PublishSeconds, st.Publishing = int64(run.Events), run.Seconds, !run.Ended
		}
	}
	st.Goroutines = runtime.NumGoroutine()
	st.CPUSeconds = benchkit.SelfCPUSeconds()
	st.RSSBytes = benchkit.SelfRSS()
	return st, nil
}

// ErrPublishing is returned by Start when the publisher already runs.
var ErrPublishing = errors.New("fanout: already publishing")

// councilStartTimeout bounds starting the council run (Engine.StartRun
// answers once run_started is journaled).
const councilStartTimeout = 30 * time.Second

// Start starts publishing at the configured rate, or starts the council
// run (once).
func (s *Server) Start() error {
	if err := s.profile.start(s.cfg.CPUProfile); err != nil {
		return err
	}
	if s.council != nil {
		if s.closed.Load() {
			return errors.New("fanout: server is shut down")
		}
		ctx, cancel := context.WithTimeout(context.Background(), councilStartTimeout)
		defer cancel()
		return s.council.start(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopPub != nil {
		return ErrPublishing
	}
	stop, done := make(chan struct{}), make(chan struct{})
	start := s.cfg.Now()
	if !s.group.Go(func() { defer close(done); s.publishLoop(stop, start) }) {
		return errors.New("fanout: server is shut down")
	}
	s.stopPub, s.pubDone, s.pubStart = stop, done, start
	return nil
}

// Stop stops the publisher and waits until it returned. It is a no-op when
// none runs, and for a council (whose run ends by itself, or with the
// engine at Shutdown).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopPub == nil {
		return
	}
	close(s.stopPub)
	<-s.pubDone // the publisher takes no lock
	s.pubTime += s.cfg.Now().Sub(s.pubStart)
	s.stopPub, s.pubDone = nil, nil
}

// publishLoop publishes at cfg.Rate until stop is closed. It ticks every
// millisecond and publishes what the pacer says is due, each event stamped
// with the time right before it is handed to the target.
func (s *Server) publishLoop(stop <-chan struct{}, start time.Time) {
	// The engine bounds each Publish itself; nothing else can block it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	pacer := NewPacer(s.cfg.Rate, start)
	buf := make([]byte, 0, s.cfg.Payload)
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		for n := pacer.Due(s.cfg.Now()); n > 0; n-- {
			if n%64 == 0 { // a publisher far behind must still stop promptly
				select {
				case <-stop:
					return
				default:
				}
			}
			buf = AppendStamp(buf[:0], s.cfg.Now().UnixNano(), s.cfg.Payload)
			if err := s.target.publish(ctx, string(buf)); err != nil {
				s.cfg.Logger.Error("fanout: publish failed; publisher stops", "err", err)
				return
			}
			s.published.Add(1)
		}
	}
}

// Shutdown stops the publisher, the target and the control endpoint, and
// waits for all their goroutines. Idempotent; returns ctx.Err() on deadline.
func (s *Server) Shutdown(ctx context.Context) error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.Stop()
	err := s.profile.stop()
	if terr := s.target.shutdown(ctx); err == nil {
		err = terr
	}
	if cerr := s.control.Shutdown(ctx); err == nil && !errors.Is(cerr, http.ErrServerClosed) {
		err = cerr
	}
	s.group.Close()
	if werr := s.group.Wait(ctx); err == nil {
		err = werr
	}
	return err
}

func (s *Server) controlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /bench/start", func(w http.ResponseWriter, r *http.Request) {
		if err := s.Start(); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		st, err := s.Stats(false)
		writeStats(w, st, err)
	})
	mux.HandleFunc("POST /bench/stop", func(w http.ResponseWriter, r *http.Request) {
		s.Stop()
		st, err := s.Stats(false)
		writeStats(w, st, err)
	})
	mux.HandleFunc("GET /bench/progress", func(w http.ResponseWriter, r *http.Request) {
		st, err := s.Progress()
		writeStats(w, st, err)
	})
	mux.HandleFunc("GET /bench/stats", func(w http.ResponseWriter, r *http.Request) {
		st, err := s.Stats(r.URL.Query().Get("gc") == "1")
		writeStats(w, st, err)
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

func writeStats(w http.ResponseWriter, st Stats, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

// RunServer is the body of the server process: it starts the server,
// prints its Ready line on out, and serves until in reaches EOF (the
// parent closed the pipe, or died) or ctx ends; then it shuts down.
//
// in is read by a goroutine that cannot be interrupted: if ctx ends first,
// RunServer returns without waiting for it, and the process is expected
// to exit right after.
func RunServer(ctx context.Context, cfg ServerConfig, in io.Reader, out io.Writer) error {
	s, err := StartServer(ctx, cfg)
	if err != nil {
		return err
	}
	eof := make(chan struct{})
	var watch routine.Group
	watch.Go(func() { _, _ = io.Copy(io.Discard, in); close(eof) })
	line, _ := json.Marshal(s.Ready())
	if _, err := fmt.Fprintf(out, "%s\n", line); err != nil {
		_ = s.Shutdown(context.Background())
		return err
	}
	select {
	case <-eof:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	return s.Shutdown(sctx)
}

// shutdownGrace bounds a server's shutdown.
const shutdownGrace = 10 * time.Second

// sessionID is the session every mode publishes into.
const sessionID messages.SessionID = "bench"

// benchEmit is the event the publisher publishes, around a stamped payload.
func benchEmit(payload string) *messages.Emit {
	return &messages.Emit{RunID: "bench", AgentID: "bench", Lane: messages.Lane{StreamID: "bench"},
		Payload: &messages.TextDeltaPayload{Delta: payload}}
}
