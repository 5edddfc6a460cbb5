package transport

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/conclave-ai/conclave/actors/runindex"
)

// metrics are the server's Prometheus metrics, on its own registry.
type metrics struct {
	reg         *prometheus.Registry
	connections *prometheus.GaugeVec   // open streams by transport
	delivered   *prometheus.CounterVec // events written to streams by transport
	writes      *prometheus.CounterVec // write syscalls (batches) by transport
}

func newMetrics(reg *prometheus.Registry, s *Server) (*metrics, error) {
	m := &metrics{
		reg: reg,
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "conclave_stream_connections", Help: "Open event streams.",
		}, []string{"transport"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_events_delivered_total", Help: "Events written to streams.",
		}, []string{"transport"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_stream_writes_total", Help: "Writes to streams; each carries every event pending for that stream.",
		}, []string{"transport"}),
	}
	published := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "conclave_events_published_total", Help: "Events stamped and journaled by the session hubs.",
	}, func() float64 { return float64(s.engine.Stats().EventsPublished) })
	lag := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "conclave_stream_lag_events_max", Help: "Largest number of events a stream is behind its session's head.",
	}, func() float64 { return float64(s.streams.maxLag()) })
	catchup := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "conclave_stream_catchup_events_total", Help: "Events open streams read from the journal because they fell behind their live queue.",
	}, func() float64 { return float64(s.streams.catchup()) })
	runs := &runsCollector{s: s, desc: prometheus.NewDesc("conclave_runs", "Runs by status.", []string{"status"}, nil)}
	for _, c := range []prometheus.Collector{m.connections, m.delivered, m.writes, published, lag, catchup, runs,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
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
