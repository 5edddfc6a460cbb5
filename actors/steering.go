package actors

import (
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/dag"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// Steering (run level only). A note posted to a live run opens its lane
// (steering_received); a note without a diff is translated into one by a
// steerer agent (the model, role steerer) on that lane. At the next wave
// boundary every translated diff is applied atomically (dag.Apply on the
// nodes that have not started) or rejected; the lane closes with
// steering_applied or steering_rejected. Notes still waiting when the run
// ends are rejected before its terminal event.

// steerItem is one steering note of a run.
type steerItem struct {
	id          string
	note        string
	diff        *messages.GraphDiff
	err         error // translation failed
	translating bool  // a steerer agent is working on it
}

// steeringQueue holds a run's notes in arrival order until a boundary.
type steeringQueue struct {
	items []*steerItem
	seen  map[string]bool // ids ever queued (scenario notes are posted once)
}

func (q *steeringQueue) translating() bool {
	if q == nil {
		return false
	}
	for _, it := range q.items {
		if it.translating {
			return true
		}
	}
	return false
}

func (q *steeringQueue) byID(id string) *steerItem {
	for _, it := range q.items {
		if it.id == id {
			return it
		}
	}
	return nil
}

func steeringLane(id string) messages.Lane {
	return messages.RunLane().Child(messages.SteeringStream(id))
}

// steer takes a note posted to the run.
func (r *runActor) steer(ctx actor.Context, m *messages.Steering) {
	if r.team != nil || r.ended.Load() {
		return
	}
	if r.steering == nil {
		r.steering = &steeringQueue{seen: map[string]bool{}}
	}
	if r.steering.seen[m.ID] {
		return
	}
	r.steering.seen[m.ID] = true
	it := &steerItem{id: m.ID, note: m.Note, diff: m.Diff}
	if it.diff != nil || r.failCode != "" || r.terminal != nil || r.phase == phaseSynthesizing {
		r.emitFor(ctx, steeringAgentID, steeringLane(m.ID), &messages.SteeringReceivedPayload{SteeringID: m.ID, Note: m.Note, Diff: m.Diff})
		switch {
		case r.failCode != "" || r.terminal != nil:
			r.rejectSteering(ctx, it, "the run is ending")
		case r.phase == phaseSynthesizing:
			r.rejectSteering(ctx, it, "no wave boundary is left: the run is synthesising its answer")
		default:
			r.steering.items = append(r.steering.items, it)
		}
		return
	}
	it.translating = true
	r.steering.items = append(r.steering.items, it)
	req := model.Request{Goal: "Turn the steering note into a graph diff.", Note: m.Note, Tools: r.e.cfg.Tools.All()}
	if r.g != nil {
		p := r.g.Plan.Clone()
		req.Plan = &p
	}
	spec := &agentSpec{steeringID: m.ID}
	r.agents.spawnWithSpec(ctx, model.RoleSteerer, steerNamePrefix+m.ID, steeringLane(m.ID), req, spec)
}

// queueSteering queues a note with its diff for the next boundary.
func (r *runActor) queueSteering(it *steerItem) {
	if r.steering == nil {
		r.steering = &steeringQueue{seen: map[string]bool{}}
	}
	r.steering.seen[it.id] = true
	r.steering.items = append(r.steering.items, it)
}

// steeringTranslated takes a steerer's report.
func (r *runActor) steeringTranslated(ctx actor.Context, c *child, m *messages.AgentDone) {
	it := r.steering.byID(c.steeringID)
	if it == nil {
		return
	}
	it.translating = false
	switch {
	case m.Err != nil:
		it.err = m.Err
	default:
		it.diff = m.Diff
	}
	if r.terminal != nil || r.failCode != "" { // no boundary will come: close its lane now
		r.dropSteering(ctx, "the run ended before the next wave boundary")
		return
	}
	r.graph.continueBoundary(ctx)
}

// applySteering applies or rejects every translated note, in arrival order.
func (r *runActor) applySteering(ctx actor.Context) {
	if r.steering == nil {
		return
	}
	var keep []*steerItem
	for _, it := range r.steering.items {
		switch {
		case it.translating:
			keep = append(keep, it)
		case it.err != nil:
			r.rejectSteering(ctx, it, "the note could not be turned into a graph diff: "+it.err.Error())
		default:
			plan, err := dag.Apply(r.g.Plan, *it.diff, r.g.Fixed)
			if err != nil {
				r.rejectSteering(ctx, it, err.Error())
				continue
			}
			r.emitFor(ctx, steeringAgentID, steeringLane(it.id), &messages.SteeringAppliedPayload{SteeringID: it.id, Diff: *it.diff,
				AppliedAtWave: r.graph.nextWave, Plan: plan, Waves: dag.WavesFrom(plan, r.g.StartedWaves(), r.graph.nextWave)})
		}
	}
	r.steering.items = keep
}

// rejectSteering closes a note's lane without changing the plan.
func (r *runActor) rejectSteering(ctx actor.Context, it *steerItem, reason string) {
	lane := steeringLane(it.id)
	r.emitFor(ctx, steeringAgentID, lane, messages.NewWarning(messages.WarnSteeringRejected, fmt.Sprintf("steering %s rejected: %s", it.id, reason)))
	r.emitFor(ctx, steeringAgentID, lane, &messages.SteeringRejectedPayload{SteeringID: it.id, Diff: it.diff, Error: reason})
}

// dropSteering rejects the notes still waiting when the run ends (their
// translators, if any, are stopped with the run's other agents, and
// closeDeadLane rejects theirs).
func (r *runActor) dropSteering(ctx actor.Context, reason string) {
	if r.steering == nil {
		return
	}
	for _, it := range r.steering.items {
		if !it.translating {
			r.rejectSteering(ctx, it, reason)
		}
	}
	// Translating ones stay: their steerer's end closes their lane.
	r.steering.items = slices.DeleteFunc(r.steering.items, func(it *steerItem) bool { return !it.translating })
}

// injectScenarioSteering posts the scenario's notes for wave i, as a human
// would (a simulation knob of the scripted scenarios).
func (r *runActor) injectScenarioSteering(ctx actor.Context, i int) {
	if r.team != nil || r.spec.scenario == nil || r.spec.rewind != nil {
		return
	}
	for k, st := range r.spec.scenario.Steering {
		if st.AtWave == i {
			r.steer(ctx, &messages.Steering{ID: fmt.Sprintf("scenario-%d", k+1), SteerNote: messages.SteerNote{Note: st.Note}})
		}
	}
}
