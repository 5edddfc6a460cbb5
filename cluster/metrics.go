package cluster

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// counters are the cluster's own counts, read by Collector at scrape time.
type counters struct {
	takeovers atomic.Int64 // sessions taken over from a dead node (or this node's former life)
	released  atomic.Int64 // idle sessions this node gave up
	forwarded atomic.Int64 // runs and interrupts calls sent to another node
	proxied   atomic.Int64 // AG-UI and A2A requests proxied to the owner
}

var (
	descOwned = prometheus.NewDesc("conclave_cluster_sessions_owned",
		"Sessions this node owns (it runs their hubs and runs).", nil, nil)
	descTakeovers = prometheus.NewDesc("conclave_cluster_takeovers_total",
		"Sessions this node took over from a node that died.", nil, nil)
	descReleased = prometheus.NewDesc("conclave_cluster_sessions_released_total",
		"Idle sessions this node gave up (their next run may start on any node).", nil, nil)
	descForwarded = prometheus.NewDesc("conclave_cluster_forwarded_total",
		"Calls this node sent to the node that could answer them: kind=call (runs and interrupts API, over NATS) or proxy (AG-UI and A2A, over HTTP).", []string{"kind"}, nil)
	descLost = prometheus.NewDesc("conclave_cluster_membership_lost",
		"1 once this node lost its membership (it stops).", nil, nil)
)

// Collector reports the node's and its forwarder's figures (register it
// with the registry /metrics serves). f may be nil.
func (n *Node) Collector(f *Forwarder) prometheus.Collector { return collector{n: n, f: f} }

type collector struct {
	n *Node
	f *Forwarder
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descOwned, descTakeovers, descReleased, descForwarded, descLost} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.n.mu.Lock()
	owned := len(c.n.owned)
	c.n.mu.Unlock()
	lost := 0.0
	if c.n.isLost() {
		lost = 1
	}
	ch <- prometheus.MustNewConstMetric(descOwned, prometheus.GaugeValue, float64(owned))
	ch <- prometheus.MustNewConstMetric(descTakeovers, prometheus.CounterValue, float64(c.n.counts.takeovers.Load()))
	ch <- prometheus.MustNewConstMetric(descReleased, prometheus.CounterValue, float64(c.n.counts.released.Load()))
	ch <- prometheus.MustNewConstMetric(descLost, prometheus.GaugeValue, lost)
	var calls, proxies int64
	if c.f != nil {
		calls, proxies = c.f.counts.forwarded.Load(), c.f.counts.proxied.Load()
	}
	ch <- prometheus.MustNewConstMetric(descForwarded, prometheus.CounterValue, float64(calls), "call")
	ch <- prometheus.MustNewConstMetric(descForwarded, prometheus.CounterValue, float64(proxies), "proxy")
}
