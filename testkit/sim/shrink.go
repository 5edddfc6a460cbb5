package sim

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/conclave-ai/conclave/messages"
)

// Shrink reduces a failing scenario while it still fails: it drops runs,
// clients, crashes and actions, makes councils smaller, and turns features
// and faults off, one change at a time, keeping each change after which
// the simulation still fails, until no change does (or maxRuns
// simulations were spent). It returns the smallest failing scenario found
// and its result.
func Shrink(t *testing.T, sc Scenario, opts Options, maxRuns int) (Scenario, Result) {
	best := Run(t, sc, opts)
	if !best.Failed() {
		return sc, best
	}
	runs := 1
	for progress := true; progress && runs < maxRuns; {
		progress = false
		for _, cand := range candidates(sc) {
			if runs >= maxRuns {
				break
			}
			runs++
			if res := Run(t, cand, opts); res.Failed() {
				sc, best, progress = cand, res, true
				break // candidates of the smaller scenario next
			}
		}
	}
	return sc, best
}

// clone deep-copies a scenario (its runs hold pointers).
func clone(sc Scenario) Scenario {
	b, err := json.Marshal(sc)
	if err != nil {
		panic(err) // a Scenario always encodes
	}
	var out Scenario
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// candidates lists the one-step reductions of sc, the biggest first.
func candidates(sc Scenario) []Scenario {
	var out []Scenario
	with := func(change func(*Scenario)) {
		c := clone(sc)
		change(&c)
		out = append(out, c)
	}
	for i := range sc.Runs {
		if len(sc.Runs) > 1 {
			with(func(c *Scenario) { c.Runs = slices.Delete(c.Runs, i, i+1) })
		}
	}
	for _, steps := range []func(*Scenario) *[]int{
		func(c *Scenario) *[]int { return &c.Crashes }, func(c *Scenario) *[]int { return &c.DiskFaults },
		func(c *Scenario) *[]int { return &c.Aborts }, func(c *Scenario) *[]int { return &c.Steers },
		func(c *Scenario) *[]int { return &c.Rewinds }, func(c *Scenario) *[]int { return &c.Stalls },
		func(c *Scenario) *[]int { return &c.Pauses },
	} {
		for i := range *steps(&sc) {
			with(func(c *Scenario) { s := steps(c); *s = slices.Delete(*s, i, i+1) })
		}
	}
	if sc.Clients > 0 {
		with(func(c *Scenario) { c.Clients-- })
	}
	if sc.DamageHWM != "" {
		with(func(c *Scenario) { c.DamageHWM = "" })
	}
	if sc.DamageWAL {
		with(func(c *Scenario) { c.DamageWAL, c.DamageHWM = false, "" })
	}
	if sc.Retention > 0 {
		with(func(c *Scenario) { c.Retention = 0 })
	}
	if sc.Model.ErrorRate+sc.Model.TransientRate > 0 {
		with(func(c *Scenario) { c.Model.ErrorRate, c.Model.TransientRate = 0, 0 })
	}
	if sc.Tool != (ToolFaults{}) {
		with(func(c *Scenario) { c.Tool = ToolFaults{} })
	}
	for i, r := range sc.Runs {
		for _, f := range runReductions(r.Start) {
			with(func(c *Scenario) { f(&c.Runs[i].Start) })
		}
	}
	return out
}

// runReductions are the ways to make one run smaller that apply to it.
func runReductions(st messages.StartRun) []func(*messages.StartRun) {
	s := st.Scenario
	var out []func(*messages.StartRun)
	if s == nil { // a run for a model of your own, which needs none
		return out
	}
	add := func(applies bool, f func(*messages.StartRun)) {
		if applies {
			out = append(out, f)
		}
	}
	add(s.Nodes > 1, func(r *messages.StartRun) {
		r.Scenario.Nodes = max(1, r.Scenario.Nodes/2)
		r.Scenario.Waves = min(r.Scenario.Waves, r.Scenario.Nodes)
	})
	add(s.Waves > 1, func(r *messages.StartRun) { r.Scenario.Waves = 1 })
	add(s.Tokens > 1, func(r *messages.StartRun) { r.Scenario.Tokens = max(1, r.Scenario.Tokens/2) })
	add(s.SynthesisTokens > 0, func(r *messages.StartRun) { r.Scenario.SynthesisTokens = 0 })
	add(s.ReasoningTokens > 0, func(r *messages.StartRun) { r.Scenario.ReasoningTokens = 0 })
	add(s.ToolsPerNode > 0, func(r *messages.StartRun) { r.Scenario.ToolsPerNode = 0 })
	add(s.SubagentsPerNode > 0, func(r *messages.StartRun) { r.Scenario.SubagentsPerNode = 0 })
	add(s.Teams > 0, func(r *messages.StartRun) { r.Scenario.Teams, r.Scenario.TeamSize = 0, 0 })
	add(s.Debate != nil, func(r *messages.StartRun) { r.Scenario.Debate = nil })
	add(!s.Spawn.IsZero(), func(r *messages.StartRun) { r.Scenario.Spawn = messages.NodeSelector{} })
	add(!s.PanicNodes.IsZero(), func(r *messages.StartRun) { r.Scenario.PanicNodes = messages.NodeSelector{} })
	add(!s.FailNodes.IsZero(), func(r *messages.StartRun) { r.Scenario.FailNodes = messages.NodeSelector{} })
	add(!s.TransientNodes.IsZero(), func(r *messages.StartRun) { r.Scenario.TransientNodes = messages.NodeSelector{} })
	add(s.Delegations != nil, func(r *messages.StartRun) { r.Scenario.Delegations = nil })
	add(len(s.Steering) > 0, func(r *messages.StartRun) { r.Scenario.Steering = nil })
	add(s.Advisor != nil || st.Advisor != nil, func(r *messages.StartRun) { r.Scenario.Advisor, r.Advisor = nil, nil })
	add(st.HITL != "" && st.HITL != messages.HITLNone, func(r *messages.StartRun) {
		r.HITL, r.Scenario.Approvals, r.Scenario.InfoRequests = "", 0, 0
	})
	add(st.Concurrency > 1, func(r *messages.StartRun) { r.Concurrency = 1 })
	return out
}

// Size of a scenario, for reports: runs, nodes of all runs, and planned
// faults and actions.
func (sc Scenario) Size() (runs, nodes, actions int) {
	for _, r := range sc.Runs {
		if r.Start.Scenario != nil {
			nodes += r.Start.Scenario.Nodes
		}
	}
	actions = len(sc.Crashes) + len(sc.DiskFaults) + len(sc.Aborts) + len(sc.Steers) + len(sc.Rewinds) + len(sc.Stalls) + len(sc.Pauses) + sc.Clients
	return len(sc.Runs), nodes, actions
}
