package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/conclave-ai/conclave/actors"
)

// costCollector exposes the estimated cost of the engine's model turns on
// /metrics: conclave_model_cost_usd_total{model,role}.
type costCollector struct {
	e    *actors.Engine
	cost *prometheus.Desc
}

func newCostCollector(e *actors.Engine) *costCollector {
	return &costCollector{e: e,
		cost: prometheus.NewDesc("conclave_model_cost_usd_total",
			"Estimated cost in US dollars of the model turns runs published (token_usage at the model price table, --prices), by model and role; a model without a price has no series (its cost is unknown, not 0).",
			[]string{"model", "role"}, nil),
	}
}

func (c *costCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.cost }

func (c *costCollector) Collect(ch chan<- prometheus.Metric) {
	for _, mc := range c.e.ModelCosts() {
		ch <- prometheus.MustNewConstMetric(c.cost, prometheus.CounterValue, mc.USD, mc.Model, mc.Role)
	}
}
