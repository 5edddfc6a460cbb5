package actors

import (
	"slices"
	"strings"
	"sync"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/pricing"
)

// costCounter adds up the estimated cost of every model turn the engine's
// runs published, by model and role, for the metric
// conclave_model_cost_usd_total. Safe for concurrent use (every run's
// model streams add to it). It holds one entry per model and role seen:
// a handful, as the models are the server's configuration.
type costCounter struct {
	mu    sync.Mutex // guards m
	m     map[costKey]pricing.NanoUSD
	limit int // distinct keys kept; further ones are counted under "other"
}

type costKey struct{ model, role string }

// maxCostKeys bounds the counter's entries: a model server that reports a
// new model name on every answer must not grow the metrics without end.
const maxCostKeys = 256

// add counts n for a turn of model by role (the outbox adds only priced
// turns: an unknown cost is left out, never counted as 0).
func (c *costCounter) add(model, role string, n pricing.NanoUSD) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[costKey]pricing.NanoUSD{}
	}
	k := costKey{model, role}
	if _, ok := c.m[k]; !ok && len(c.m) >= maxCostKeys {
		k = costKey{"other", role}
	}
	c.m[k] += n
}

// ModelCost is the estimated cost of the model turns of one model and
// role since the engine started (Engine.ModelCosts).
type ModelCost struct {
	Model, Role string
	USD         float64
}

// ModelCosts is the estimated cost of every model turn published since
// the engine started, by model and role, sorted.
func (e *Engine) ModelCosts() []ModelCost {
	e.costs.mu.Lock()
	out := make([]ModelCost, 0, len(e.costs.m))
	for k, n := range e.costs.m {
		out = append(out, ModelCost{Model: k.model, Role: k.role, USD: n.Dollars()})
	}
	e.costs.mu.Unlock()
	slices.SortFunc(out, func(a, b ModelCost) int {
		if c := strings.Compare(a.Model, b.Model); c != 0 {
			return c
		}
		return strings.Compare(a.Role, b.Role)
	})
	return out
}

// roleOfUsage is the role whose model turn a token_usage reports: the one
// it names (an advisor's), else the one its lane's agent plays.
func roleOfUsage(u *messages.TokenUsagePayload, lane messages.Lane) string {
	if u.Role != "" {
		return u.Role
	}
	switch messages.ParseStreamID(lane.StreamID).Kind {
	case messages.LaneDirector:
		return model.RoleDirector.String()
	case messages.LaneNode:
		return model.RoleWorker.String()
	case messages.LaneSubagent:
		return model.RoleSubagent.String()
	case messages.LaneSynthesis, messages.LaneNodeSynthesis:
		return model.RoleSynthesizer.String()
	case messages.LaneDebateTurn:
		return model.RoleDebater.String()
	case messages.LaneJudge:
		return model.RoleJudge.String()
	case messages.LaneSteering:
		return model.RoleSteerer.String()
	}
	return "other"
}
