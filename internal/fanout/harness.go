package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"time"

	"github.com/conclave-ai/conclave/internal/benchkit"
)

// Options configures Run. Launch and Clients are required, and Rate and
// Duration for the synthetic workload.
type Options struct {
	Transport Transport // default sse
	// Workload is what produces the events (default synthetic). A council
	// is measured on Conclave alone (Modes may hold only ModeConclave).
	Workload Workload
	// Council shapes the council run (council workload).
	Council CouncilConfig
	// RunTimeout bounds the council run, from its start to its terminal
	// event. Default 5 min.
	RunTimeout time.Duration
	// Clients is the number of streams; all follow the one session.
	Clients int
	// Rate is the events per second published into the session; each
	// client receives all of them, so deliveries/s = Rate × Clients
	// (synthetic workload).
	Rate     float64
	Duration time.Duration
	// Payload, FlushDelay and Queue are passed to ServerConfig.
	Payload    int
	FlushDelay time.Duration
	Queue      int
	// Modes are measured in order. Default: conclave, then naive.
	Modes []Mode
	// Drain bounds the wait for events still in flight after the publisher
	// stopped, or after the council run ended. Default 2 s (synthetic),
	// 30 s (council).
	Drain time.Duration
	// Settle is the wait between connecting the clients and measuring idle
	// memory. It must outlast the transport's writer linger (1 s), after
	// which an idle Conclave stream holds no goroutine. Default 1.5 s.
	Settle time.Duration
	Launch Launcher
	// ServerCPUProfile, if set, is the file the Conclave server writes a
	// CPU profile of itself to, from the start of publishing (or of the
	// council run) to its shutdown; the naive server's goes to the same
	// name with ".naive" appended.
	ServerCPUProfile string
	// ClusterNodes, when positive, measures Conclave's cluster mode: that
	// many nodes on one JetStream server (run in this process), node 0
	// owning the session and publishing, the clients spread over the nodes
	// (synthetic workload, conclave mode only). The servers' figures are
	// the nodes' sums.
	ClusterNodes int
	// Logger receives progress. Default: discard.
	Logger *slog.Logger
	// Now is the clients' clock, and must be the server's: latency is the
	// difference of the two. Default: time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Transport == "" {
		o.Transport = TransportSSE
	}
	if o.Workload == "" {
		o.Workload = WorkloadSynthetic
	}
	o.Council = o.Council.withDefaults()
	if o.RunTimeout == 0 {
		o.RunTimeout = 5 * time.Minute
	}
	if o.Payload == 0 {
		o.Payload = DefaultPayload
	}
	if len(o.Modes) == 0 {
		o.Modes = []Mode{ModeConclave, ModeNaive}
		if o.Workload == WorkloadCouncil {
			o.Modes = []Mode{ModeConclave}
		}
	}
	if o.Drain == 0 {
		o.Drain = 2 * time.Second
		if o.Workload == WorkloadCouncil {
			o.Drain = 30 * time.Second
		}
	}
	if o.Settle == 0 {
		o.Settle = 1500 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

func (o Options) validate() error {
	if _, err := ParseTransport(string(o.Transport)); err != nil {
		return err
	}
	if _, err := ParseWorkload(string(o.Workload)); err != nil {
		return err
	}
	for _, m := range o.Modes {
		if _, err := ParseMode(string(m)); err != nil {
			return err
		}
		if o.Workload == WorkloadCouncil && m != ModeConclave {
			return fmt.Errorf("fanout: the council workload runs on Conclave only, not on mode %s", m)
		}
	}
	if o.ClusterNodes != 0 {
		if o.ClusterNodes < 0 || o.ClusterNodes > 5 {
			return fmt.Errorf("fanout: cluster nodes must be 1 to 5, got %d", o.ClusterNodes)
		}
		if o.Workload != WorkloadSynthetic || slices.ContainsFunc(o.Modes, func(m Mode) bool { return m != ModeConclave }) {
			return errors.New("fanout: cluster mode measures Conclave (no baseline) on the synthetic workload")
		}
	}
	switch {
	case o.Launch == nil:
		return errors.New("fanout: Options.Launch is required")
	case o.Clients < 1:
		return fmt.Errorf("fanout: clients must be >= 1, got %d", o.Clients)
	case o.Drain < 0 || o.Settle < 0 || o.RunTimeout < 0:
		return errors.New("fanout: drain, settle and run timeout must not be negative")
	case o.Workload == WorkloadCouncil:
		return o.Council.validate()
	case !(o.Rate > 0):
		return fmt.Errorf("fanout: rate must be > 0, got %v", o.Rate)
	case o.Duration <= 0:
		return fmt.Errorf("fanout: duration must be > 0, got %v", o.Duration)
	}
	return ValidPayloadSize(o.Payload)
}

// Result is a whole benchmark: its settings and one result per mode.
type Result struct {
	Transport Transport `json:"transport"`
	Workload  Workload  `json:"workload"`
	// Council is the council run's shape (council workload).
	Council *CouncilConfig `json:"council,omitempty"`
	Clients int            `json:"clients"`
	// Rate is the events per second offered: the publisher's set rate, or
	// the council's events over its run's duration (as measured).
	Rate    float64 `json:"rate"`
	Offered float64 `json:"offered_deliveries_per_sec"`
	// Duration is how long the publisher ran, or the council's run.
	Duration   time.Duration `json:"duration_ns"`
	Payload    int           `json:"payload_bytes"`
	FlushDelay time.Duration `json:"flush_delay_ns"`
	Queue      int           `json:"queue"`
	CPUs       int           `json:"cpus"`
	GoVersion  string        `json:"go_version"`
	Modes      []ModeResult  `json:"modes"`
	SharedProc bool          `json:"server_in_client_process,omitempty"`
	StartedAt  time.Time     `json:"started_at"`
}

// ModeResult is what one server mode achieved.
type ModeResult struct {
	Mode Mode `json:"mode"`
	// Nodes is the number of cluster nodes (0: one server, not clustered).
	Nodes int `json:"nodes,omitempty"`
	// Published events; each client should receive all of them.
	Published int64 `json:"published"`
	// PublishRate is Published over the server's publishing time (the
	// pacer's achieved rate).
	PublishRate float64 `json:"publish_rate"`
	Expected    int64   `json:"expected"`
	Delivered   int64   `json:"delivered"`
	// Lost counts expected events that never arrived: gaps in a client's
	// seqs plus the events after its last one.
	Lost       int64 `json:"lost"`
	Duplicates int64 `json:"duplicates"`
	// ServerDropped counts events the naive server could not queue.
	ServerDropped int64 `json:"server_dropped"`
	// Disconnected counts streams that ended before the harness closed them.
	Disconnected    int    `json:"disconnected"`
	DisconnectError string `json:"disconnect_error,omitempty"`
	// DeliveredPerSec is the clients' delivery rate while publishing,
	// after a warm-up (a fifth of the duration, at most 1 s); for a
	// council, over the whole run: from its start to the last delivery.
	DeliveredPerSec float64 `json:"delivered_per_sec"`
	// Elapsed runs from the start of publishing to the last delivery;
	// OverallPerSec is Delivered over it.
	Elapsed       time.Duration  `json:"elapsed_ns"`
	OverallPerSec float64        `json:"overall_delivered_per_sec"`
	Latency       LatencySummary `json:"latency"`
	// ServerCPUSeconds is the server's CPU time from the start of
	// publishing to the end of the drain.
	ServerCPUSeconds float64 `json:"server_cpu_seconds"`
	// EventsPerWrite is deliveries per stream write during the run.
	EventsPerWrite      float64 `json:"events_per_write"`
	CPUSecondsPerMDeliv float64 `json:"server_cpu_seconds_per_million_deliveries"`
	// ClientCPUSeconds is the measuring process's CPU time over the same
	// span: the clients' share of the machine (it includes the server's when
	// the server runs in-process).
	ClientCPUSeconds float64 `json:"client_cpu_seconds"`
	// OtherCPUSeconds is the CPU time every other process of the machine
	// used over the same span; much of it means the figures are skewed.
	OtherCPUSeconds float64 `json:"other_cpu_seconds"`
	// CatchupEvents counts events the streams read from the journal
	// because their live queue overflowed (Conclave only).
	CatchupEvents int64 `json:"catchup_events"`
	// ServerRSSPeak is the largest server RSS sampled during the run.
	ServerRSSPeak uint64 `json:"server_rss_peak_bytes"`
	// Run is the council run as the server saw it end (council workload).
	Run *RunStats `json:"run,omitempty"`
	// Idle memory per subscriber: the growth from no client to Clients idle
	// clients, divided by Clients.
	IdleRSSPerClient   float64 `json:"idle_rss_bytes_per_client"`
	IdleHeapPerClient  float64 `json:"idle_heap_bytes_per_client"`
	IdleStackPerClient float64 `json:"idle_stack_bytes_per_client"`
	GoroutinesIdle     int     `json:"goroutines_idle"`
	GoroutinesLoad     int     `json:"goroutines_load"`
	// Server snapshots: before any client, with idle clients, at the end.
	Before Stats `json:"server_before"`
	Idle   Stats `json:"server_idle"`
	End    Stats `json:"server_end"`
}

// LatencySummary is the delivery latency: publish (right before the
// server's publish call) to the client's read.
type LatencySummary struct {
	Count uint64        `json:"count"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	Max   time.Duration `json:"max_ns"`
	Mean  time.Duration `json:"mean_ns"`
}

func summarize(h *benchkit.Histogram) LatencySummary {
	return LatencySummary{Count: h.Count(), P50: h.Quantile(0.5), P90: h.Quantile(0.9), P99: h.Quantile(0.99),
		P999: h.Quantile(0.999), Max: h.Max(), Mean: h.Mean()}
}

// Run measures each mode in turn.
func Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	res := &Result{Transport: o.Transport, Workload: o.Workload, Clients: o.Clients, Rate: o.Rate, Offered: o.Rate * float64(o.Clients),
		Duration: o.Duration, Payload: o.Payload, FlushDelay: o.FlushDelay,
		Queue: o.Queue, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), StartedAt: o.Now().UTC()}
	if o.Workload == WorkloadCouncil {
		c := o.Council
		res.Council, res.Rate, res.Offered, res.Duration, res.Payload = &c, 0, 0, 0, 0
	}
	for _, m := range o.Modes {
		mr, shared, err := runMode(ctx, o, m)
		if err != nil {
			return res, fmt.Errorf("%s: %w", m, err)
		}
		res.SharedProc = res.SharedProc || shared
		res.Modes = append(res.Modes, *mr)
		if r := mr.Run; r != nil && r.Seconds > 0 { // the council's offered rate is what it produced
			res.Rate = float64(r.Events) / r.Seconds
			res.Offered = res.Rate * float64(o.Clients)
			res.Duration = time.Duration(r.Seconds * float64(time.Second))
		}
	}
	return res, nil
}

// span is the measured part of a mode's run: from the start of publishing
// (or of the council run) to the end of the drain.
type span struct {
	start                 Stats // the server's, at the start
	startAt               time.Time
	clientCPU, machineCPU float64 // at the start
	// final is the seq of the last event: each client must end there.
	final uint64
}

// runMode launches one server, connects the clients, measures idle memory,
// publishes for the duration, drains and collects.
func runMode(ctx context.Context, o Options, mode Mode) (_ *ModeResult, shared bool, err error) {
	log := o.Logger.With("mode", mode)
	cfg := ServerConfig{Mode: mode, Workload: o.Workload, Council: o.Council, Rate: o.Rate, Payload: o.Payload,
		FlushDelay: o.FlushDelay, Queue: o.Queue, Now: o.Now}
	if cfg.CPUProfile = o.ServerCPUProfile; cfg.CPUProfile != "" && mode != ModeConclave {
		cfg.CPUProfile += "." + string(mode)
	}
	var js *jetStream
	if o.ClusterNodes > 0 {
		if js, err = startJetStream(); err != nil {
			return nil, false, err
		}
		defer js.close() // after the nodes (deferred below, run first)
		cfg.Cluster = js.url()
	}
	srv, err := o.Launch(ctx, cfg)
	if err != nil {
		return nil, false, err
	}
	shared = srv.SharedProcess
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if cerr := srv.Close(cctx); err == nil {
			err = cerr
		}
	}()
	readys := []Ready{srv.Ready}
	ctl := newControl(srv.Ready)
	defer ctl.close()
	for range max(o.ClusterNodes-1, 0) {
		fcfg := cfg
		fcfg.Follower, fcfg.CPUProfile = true, ""
		f, lerr := o.Launch(ctx, fcfg)
		if lerr != nil {
			return nil, false, lerr
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
			defer cancel()
			if cerr := f.Close(cctx); err == nil {
				err = cerr
			}
		}()
		readys = append(readys, f.Ready)
		fc := newControl(f.Ready)
		defer fc.close()
		ctl.others = append(ctl.others, fc)
	}
	mr := &ModeResult{Mode: mode, Nodes: o.ClusterNodes}

	if mr.Before, err = ctl.stats(ctx, true); err != nil {
		return nil, false, err
	}
	log.Info("connecting clients", "clients", o.Clients, "transport", o.Transport, "server", srv.Ready.Stream, "control", srv.Ready.Control, "pid", srv.Ready.PID, "nodes", len(readys))
	pool, err := connectClients(ctx, o.Clients, o.Transport, readys, o.Now, o.Workload.stampOf())
	if err != nil {
		return nil, false, err
	}
	defer pool.close()
	// Every stream must be registered with the server before publishing,
	// or the naive server would not send it the first events.
	if err := ctl.waitClients(ctx, o.Clients, 10*time.Second); err != nil {
		return nil, false, err
	}
	if err := sleep(ctx, o.Settle); err != nil {
		return nil, false, err
	}
	if mr.Idle, err = ctl.stats(ctx, true); err != nil {
		return nil, false, err
	}
	n := float64(o.Clients)
	mr.IdleRSSPerClient = (float64(mr.Idle.RSSBytes) - float64(mr.Before.RSSBytes)) / n
	mr.IdleHeapPerClient = (float64(mr.Idle.HeapInuse) - float64(mr.Before.HeapInuse)) / n
	mr.IdleStackPerClient = (float64(mr.Idle.StackInuse) - float64(mr.Before.StackInuse)) / n
	mr.GoroutinesIdle = mr.Idle.Goroutines

	var sp *span
	if o.Workload == WorkloadCouncil {
		sp, err = followCouncil(ctx, o, ctl, mr, log)
	} else {
		sp, err = publishSynthetic(ctx, o, ctl, pool, mr, log)
	}
	if err != nil {
		return nil, false, err
	}
	if sp.final > srv.Ready.After {
		mr.Expected = int64(sp.final-srv.Ready.After) * int64(o.Clients)
	}
	startAt, start := sp.startAt, sp.start

	// Drain: wait until every client has every event, or the drain ends.
	drainEnd := o.Now().Add(o.Drain)
	for pool.received() < mr.Expected && o.Now().Before(drainEnd) {
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return nil, false, err
		}
	}
	if mr.End, err = ctl.stats(ctx, false); err != nil {
		return nil, false, err
	}
	mr.ClientCPUSeconds = benchkit.SelfCPUSeconds() - sp.clientCPU
	machine := benchkit.MachineBusySeconds() - sp.machineCPU
	pool.close()
	t := pool.totals(sp.final)

	mr.Delivered = t.received
	mr.Lost = t.gaps + t.tail
	mr.Duplicates = t.dups
	mr.ServerDropped = mr.End.Dropped
	mr.Disconnected = t.disconnected
	if t.firstErr != nil {
		mr.DisconnectError = t.firstErr.Error()
	}
	if t.lastAt.After(startAt) {
		mr.Elapsed = t.lastAt.Sub(startAt)
		mr.OverallPerSec = float64(mr.Delivered) / mr.Elapsed.Seconds()
	}
	if o.Workload == WorkloadCouncil {
		mr.DeliveredPerSec = mr.OverallPerSec
	}
	mr.Latency = summarize(&t.hist)
	mr.CatchupEvents = mr.End.CatchupEvents - start.CatchupEvents
	mr.ServerRSSPeak = max(mr.ServerRSSPeak, mr.End.RSSBytes)
	mr.ServerCPUSeconds = mr.End.CPUSeconds - start.CPUSeconds
	if machine > 0 {
		mr.OtherCPUSeconds = max(0, machine-mr.ServerCPUSeconds)
		if !shared {
			mr.OtherCPUSeconds = max(0, mr.OtherCPUSeconds-mr.ClientCPUSeconds)
		}
	}
	if w := mr.End.Writes - start.Writes; w > 0 {
		mr.EventsPerWrite = float64(mr.Delivered) / float64(w)
	}
	if mr.Delivered > 0 {
		mr.CPUSecondsPerMDeliv = mr.ServerCPUSeconds / (float64(mr.Delivered) / 1e6)
	}
	log.Info("done", "delivered", mr.Delivered, "lost", mr.Lost, "p99", mr.Latency.P99)
	return mr, shared, nil
}

// publishSynthetic runs the publisher for o.Duration and measures the
// steady-state delivery rate after a warm-up.
func publishSynthetic(ctx context.Context, o Options, ctl *control, pool *clientPool, mr *ModeResult, log *slog.Logger) (*span, error) {
	log.Info("publishing", "rate", o.Rate, "duration", o.Duration)
	start, err := ctl.post(ctx, "/bench/start")
	if err != nil {
		return nil, err
	}
	sp := &span{start: start, startAt: o.Now(), clientCPU: benchkit.SelfCPUSeconds(), machineCPU: benchkit.MachineBusySeconds()}
	// The delivery rate is measured over the run after a warm-up, from
	// the clients' counts: in a steady state it equals the offered rate
	// when the server keeps up, and the server's capacity when it does not.
	warmup := min(time.Second, o.Duration/5)
	if err := sleep(ctx, warmup); err != nil {
		return nil, err
	}
	r0, t0 := pool.received(), o.Now()
	if err := sleep(ctx, o.Duration-warmup); err != nil {
		return nil, err
	}
	r1, t1 := pool.received(), o.Now()
	mr.DeliveredPerSec = float64(r1-r0) / t1.Sub(t0).Seconds()
	load, err := ctl.stats(ctx, false)
	if err != nil {
		return nil, err
	}
	mr.GoroutinesLoad = load.Goroutines
	mr.ServerRSSPeak = load.RSSBytes
	stopped, err := ctl.post(ctx, "/bench/stop")
	if err != nil {
		return nil, err
	}
	mr.Published = stopped.Published
	if stopped.PublishSeconds > 0 {
		mr.PublishRate = float64(stopped.Published) / stopped.PublishSeconds
	}
	sp.final = ctl.after + uint64(stopped.Published)
	return sp, nil
}

// councilPoll is how often the harness reads the server's progress while
// the council runs: often enough to see the run end promptly. Each poll
// costs the server a run-index lookup and two /proc reads (Progress).
const councilPoll = 100 * time.Millisecond

// followCouncil starts the council run and waits, up to o.RunTimeout, for
// its terminal event.
func followCouncil(ctx context.Context, o Options, ctl *control, mr *ModeResult, log *slog.Logger) (*span, error) {
	log.Info("starting the council run", "council", fmt.Sprintf("%+v", o.Council))
	start, err := ctl.post(ctx, "/bench/start")
	if err != nil {
		return nil, err
	}
	sp := &span{start: start, startAt: o.Now(), clientCPU: benchkit.SelfCPUSeconds(), machineCPU: benchkit.MachineBusySeconds()}
	deadline := sp.startAt.Add(o.RunTimeout)
	for {
		st, err := ctl.do(ctx, http.MethodGet, "/bench/progress") // cheap: no metrics gathered
		if err != nil {
			return nil, err
		}
		mr.ServerRSSPeak = max(mr.ServerRSSPeak, st.RSSBytes)
		mr.GoroutinesLoad = max(mr.GoroutinesLoad, st.Goroutines)
		if r := st.Run; r != nil && r.Ended {
			mr.Run, mr.Published = r, int64(r.Events)
			if r.Seconds > 0 {
				mr.PublishRate = float64(r.Events) / r.Seconds
			}
			sp.final = r.LastSeq
			log.Info("the council run ended", "status", r.Status, "events", r.Events, "seconds", r.Seconds)
			return sp, nil
		}
		if o.Now().After(deadline) {
			return nil, fmt.Errorf("fanout: the council run did not end within %v (%d events so far)", o.RunTimeout, st.Published)
		}
		if err := sleep(ctx, councilPoll); err != nil {
			return nil, err
		}
	}
}

// sleep waits d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// control is a client of a server's /bench endpoints. In cluster mode it
// is node 0's, and others are the other nodes': stats are then the sums
// over the nodes, and start and stop go to node 0 (its answer carries the
// sums too).
type control struct {
	base   string
	after  uint64 // the server's Ready.After
	hc     *http.Client
	others []*control
}

func newControl(r Ready) *control {
	return &control{base: "http://" + r.Control, after: r.After, hc: &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}}
}

func (c *control) close() { c.hc.CloseIdleConnections() }

func (c *control) stats(ctx context.Context, gc bool) (Stats, error) {
	path := "/bench/stats"
	if gc {
		path += "?gc=1"
	}
	st, err := c.do(ctx, http.MethodGet, path)
	if err != nil {
		return st, err
	}
	return c.addOthers(ctx, st, path)
}

func (c *control) post(ctx context.Context, path string) (Stats, error) {
	st, err := c.do(ctx, http.MethodPost, path)
	if err != nil {
		return st, err
	}
	return c.addOthers(ctx, st, "/bench/stats")
}

// addOthers adds the other nodes' process and stream figures to st.
func (c *control) addOthers(ctx context.Context, st Stats, path string) (Stats, error) {
	for _, o := range c.others {
		ost, err := o.do(ctx, http.MethodGet, path)
		if err != nil {
			return st, err
		}
		st.CPUSeconds += ost.CPUSeconds
		st.RSSBytes += ost.RSSBytes
		st.HeapInuse += ost.HeapInuse
		st.StackInuse += ost.StackInuse
		st.Goroutines += ost.Goroutines
		st.Writes += ost.Writes
		st.CatchupEvents += ost.CatchupEvents
		st.Clients += ost.Clients
	}
	return st, nil
}

func (c *control) do(ctx context.Context, method, path string) (Stats, error) {
	var st Stats
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return st, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return st, fmt.Errorf("fanout: control %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return st, fmt.Errorf("fanout: control %s: %s: %s", path, resp.Status, msg)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("fanout: control %s: %w", path, err)
	}
	return st, nil
}

// waitClients polls until the server counts n clients.
func (c *control) waitClients(ctx context.Context, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		st, err := c.stats(ctx, false)
		if err != nil {
			return err
		}
		if st.Clients >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fanout: the server counts %d of %d clients after %v", st.Clients, n, limit)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}
