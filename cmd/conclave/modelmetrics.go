package main

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/openai"
)

// modelCollector exposes an openai backend's counters on /metrics: what
// an operator watches when the model misbehaves.
type modelCollector struct {
	m        *openai.Model
	failures *prometheus.Desc
	open     *prometheus.Desc
}

func newModelCollector(m *openai.Model) *modelCollector {
	labels := prometheus.Labels{"endpoint": m.Endpoint()}
	return &modelCollector{m: m,
		failures: prometheus.NewDesc("conclave_model_failures_total", "Model turns that failed before their first chunk, by class (unreachable, auth, rate_limited, bad_request, context_too_long, content_filtered, server_error, timeout, malformed_stream, model_unavailable).", []string{"class"}, labels),
		open:     prometheus.NewDesc("conclave_model_breaker_open", "1 while the model endpoint's circuit breaker is open: turns fail at once with model_unavailable.", nil, labels),
	}
}

func (c *modelCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.failures
	ch <- c.open
}

// modelFailureClasses are the classes conclave_model_failures_total
// always lists (0 until one happens), so that a dashboard's queries find
// the series before the first failure.
var modelFailureClasses = []model.Code{model.CodeUnreachable, model.CodeAuth, model.CodeRateLimited, model.CodeBadRequest,
	model.CodeContextTooLong, model.CodeContentFiltered, model.CodeServerError, model.CodeTimeout, model.CodeMalformedStream, model.CodeUnavailable}

func (c *modelCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.m.Stats()
	for _, class := range modelFailureClasses {
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(st.Failures[class]), string(class))
	}
	for class, n := range st.Failures {
		if !slices.Contains(modelFailureClasses, class) {
			ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(n), string(class))
		}
	}
	open := 0.0
	if st.Unavailable {
		open = 1
	}
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, open)
}
