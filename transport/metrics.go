package transport

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/conclave-ai/conclave/actors/runindex"
	"github.com/conclave-ai/conclave/messages"
)

// metrics are the server's Prometheus metrics.
type metrics struct {
	gatherer    prometheus.Gatherer    // serves /metrics; nil: the embedder serves them
	connections *prometheus.GaugeVec   // open streams by transport
	delivered   *prometheus.CounterVec // events written to streams by transport
	writes      *prometheus.CounterVec // write syscalls (batches) by transport
	catchup     prometheus.Counter     // events streams read from the journal after overflowing their live queue
	streamEnds  *prometheus.CounterVec // streams ended, by transport and reason

	connsOpen      prometheus.Gauge       // accepted connections open
	connEvicted    *prometheus.CounterVec // connections closed at the cap, by what they were doing
	connRefused    *prometheus.CounterVec // connections refused at the cap
	streamsRefused *prometheus.CounterVec // stream requests refused (429), by cap
}

func newMetrics(reg prometheus.Registerer, gatherer prometheus.Gatherer, s *Server) (*metrics, error) {
	m := &metrics{
		gatherer: gatherer,
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "conclave_stream_connections", Help: "Open event streams.",
		}, []string{"transport"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_events_delivered_total", Help: "Events written to streams.",
		}, []string{"transport"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_stream_writes_total", Help: "Writes to streams; each carries every event pending for that stream.",
		}, []string{"transport"}),
		catchup: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "conclave_stream_catchup_events_total", Help: "Events streams read from the journal because they fell behind their live queue.",
		}),
		streamEnds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_stream_ends_total", Help: "Event streams ended, by reason: client_gone, shutdown, lagging (over --max-lag-*), session_gone, protocol (a WebSocket client broke the protocol).",
		}, []string{"transport", "reason"}),
		connsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "conclave_connections_open", Help: "Open client connections (requests, keep-alive and streams).",
		}),
		connEvicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_connections_evicted_total", Help: "Connections closed at the connection cap to make room, by what they were doing: reading_headers or idle (keep-alive).",
		}, []string{"reason"}),
		connRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_connections_refused_total", Help: "Connections refused with 503 because every slot under the connection cap was busy.",
		}, []string{"reason"}),
		streamsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_streams_refused_total", Help: "Stream requests refused with 429 too_many_streams, by cap: max_streams or max_streams_per_tenant.",
		}, []string{"reason"}),
	}
	published := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "conclave_events_published_total", Help: "Events stamped and journaled by the session hubs.",
	}, func() float64 { return float64(s.engine.Stats().EventsPublished) })
	lag := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "conclave_stream_lag_events_max",
		Help: "Largest number of events a stream's client has not received: not yet written, or written and still in the server's socket send buffer.",
	}, func() float64 { e, _ := s.streams.maxLag(); return float64(e) })
	lagBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "conclave_stream_lag_bytes_max",
		Help: "Largest number of bytes written to a stream and not yet acknowledged by its client (in the write under way or the socket send buffer).",
	}, func() float64 { _, b := s.streams.maxLag(); return float64(b) })
	hubs := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "conclave_hubs", Help: "Session hubs in memory (a session's hub stops after --hub-idle-after without runs, subscribers or events).",
	}, func() float64 { return float64(s.engine.Stats().Hubs) })
	liveRuns := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "conclave_runs_live", Help: "Runs whose supervisor is running (not ended).",
	}, func() float64 { return float64(s.engine.Stats().LiveRuns) })
	asleep := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "conclave_runs_asleep", Help: "Runs asleep: parked on humans for --sleep-after, their actors out of memory until an answer, timeout, abort or steering note wakes them.",
	}, func() float64 { return float64(s.engine.Stats().AsleepRuns) })
	runs := &runsCollector{s: s, desc: prometheus.NewDesc("conclave_runs", "Runs by status.", []string{"status"}, nil)}
	pending := &pendingCollector{s: s, desc: prometheus.NewDesc("conclave_interrupts_pending",
		"Interrupts waiting for a human (approvals, questions), by kind; those of sleeping runs included.", []string{"kind"}, nil)}
	for _, c := range []prometheus.Collector{m.connections, m.delivered, m.writes, m.catchup, m.streamEnds, published, lag, lagBytes, runs, pending, hubs, liveRuns, asleep,
		m.connsOpen, m.connEvicted, m.connRefused, m.streamsRefused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// handler serves the gathered metrics, or 404 when the Registerer given
// was not a Gatherer and no Gatherer was configured.
func (m *metrics) handler() http.Handler {
	if m.gatherer == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, errorf(http.StatusNotFound, codeNotFound, "this server's metrics are served by its embedder"))
		})
	}
	// OpenMetrics when the scraper asks for it (Accept): the only format
	// that carries exemplars (the trace ids of runs' observations).
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

type runsCollector struct {
	s    *Server
	desc *prometheus.Desc
}

func (c *runsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *runsCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.s.engine.RunsByStatus()
	for _, st := range runindex.Statuses() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}

type pendingCollector struct {
	s    *Server
	desc *prometheus.Desc
}

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.s.engine.PendingInterruptsByKind()
	for _, k := range messages.InterruptKinds() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[k]), string(k))
	}
}
