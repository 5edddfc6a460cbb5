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

// runSteering takes the notes posted to a run (a team's supervisor takes
// none): it opens each note's lane, has a steerer translate a note without
// a diff, and at each wave boundary applies or rejects the notes waiting in
// queue (nil until the first note); notes still waiting when the run ends
// are rejected.
type runSteering struct {
	r     *runActor
	queue *steeringQueue
}

func steeringLane(id string) messages.Lane {
	return messages.RunLane().Child(messages.SteeringStream(id))
}

// steer takes a note posted to the run.
func (sq *runSteering) steer(ctx actor.Context, m *messages.Steering) {
	r := sq.r
	if r.team != nil || r.ended.Load() {
		return
	}
	if sq.queue == nil {
		sq.queue = &steeringQueue{seen: map[string]bool{}}
	}
	if sq.queue.seen[m.ID] {
		return
	}
	sq.queue.seen[m.ID] = true
	it := &steerItem{id: m.ID, note: m.Note, diff: m.Diff}
	if it.diff != nil || r.failCode != "" || r.terminal != nil || r.phase == phaseSynthesizing {
		r.emitFor(ctx, steeringAgentID, steeringLane(m.ID), &messages.SteeringReceivedPayload{SteeringID: m.ID, Note: m.Note, Diff: m.Diff})
		switch {
		case r.failCode != "" || r.terminal != nil:
			sq.rejectSteering(ctx, it, "the run is ending")
		case r.phase == phaseSynthesizing:
			sq.rejectSteering(ctx, it, "no wave boundary is left: the run is synthesising its answer")
		default:
			sq.queue.items = append(sq.queue.items, it)
		}
		return
	}
	it.translating = true
	sq.queue.items = append(sq.queue.items, it)
	req := model.Request{Goal: "Turn the steering note into a graph diff.", Note: m.Note, Tools: r.e.cfg.Tools.All()}
	if r.g != nil {
		p := r.g.Plan.Clone()
		req.Plan = &p
	}
	spec := &agentSpec{steeringID: m.ID}
	r.agents.spawnWithSpec(ctx, model.RoleSteerer, steerNamePrefix+m.ID, steeringLane(m.ID), req, spec)
}

// queueSteering queues a note with its diff for the next boundary.
func (sq *runSteering) queueSteering(it *steerItem) {
	if sq.queue == nil {
		sq.queue = &steeringQueue{seen: map[string]bool{}}
	}
	sq.queue.seen[it.id] = true
	sq.queue.items = append(sq.queue.items, it)
}

// steeringTranslated takes a steerer's report.
func (sq *runSteering) steeringTranslated(ctx actor.Context, c *child, m *messages.AgentDone) {
	r := sq.r
	it := sq.queue.byID(c.steeringID)
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
		sq.dropSteering(ctx, "the run ended before the next wave boundary")
		return
	}
	r.graph.continueBoundary(ctx)
}

// applySteering applies or rejects every translated note, in arrival order.
func (sq *runSteering) applySteering(ctx actor.Context) {
	r := sq.r
	if sq.queue == nil {
		return
	}
	var keep []*steerItem
	for _, it := range sq.queue.items {
		switch {
		case it.translating:
			keep = append(keep, it)
		case it.err != nil:
			sq.rejectSteering(ctx, it, "the note could not be turned into a graph diff: "+it.err.Error())
		default:
			plan, err := dag.Apply(r.g.Plan, *it.diff, r.g.Fixed)
			if err != nil {
				sq.rejectSteering(ctx, it, err.Error())
				continue
			}
			r.emitFor(ctx, steeringAgentID, steeringLane(it.id), &messages.SteeringAppliedPayload{SteeringID: it.id, Diff: *it.diff,
				AppliedAtWave: r.graph.nextWave, Plan: plan, Waves: dag.WavesFrom(plan, r.g.StartedWaves(), r.graph.nextWave)})
		}
	}
	sq.queue.items = keep
}

// rejectSteering closes a note's lane without changing the plan.
func (sq *runSteering) rejectSteering(ctx actor.Context, it *steerItem, reason string) {
	r := sq.r
	lane := steeringLane(it.id)
	r.emitFor(ctx, steeringAgentID, lane, messages.NewWarning(messages.WarnSteeringRejected, fmt.Sprintf("steering %s rejected: %s", it.id, reason)))
	r.emitFor(ctx, steeringAgentID, lane, &messages.SteeringRejectedPayload{SteeringID: it.id, Diff: it.diff, Error: reason})
}

// dropSteering rejects the notes still waiting when the run ends (their
// translators, if any, are stopped with the run's other agents, and
// closeDeadLane rejects theirs).
func (sq *runSteering) dropSteering(ctx actor.Context, reason string) {
	if sq.queue == nil {
		return
	}
	for _, it := range sq.queue.items {
		if !it.translating {
			sq.rejectSteering(ctx, it, reason)
		}
	}
	// Translating ones stay: their steerer's end closes their lane.
	sq.queue.items = slices.DeleteFunc(sq.queue.items, func(it *steerItem) bool { return !it.translating })
}

// injectScenarioSteering posts the scenario's notes for wave i, as a human
// would (a simulation knob of the scripted scenarios).
func (sq *runSteering) injectScenarioSteering(ctx actor.Context, i int) {
	r := sq.r
	if r.team != nil || r.spec.scenario == nil || r.spec.rewind != nil {
		return
	}
	for k, st := range r.spec.scenario.Steering {
		if st.AtWave == i {
			sq.steer(ctx, &messages.Steering{ID: fmt.Sprintf("scenario-%d", k+1), SteerNote: messages.SteerNote{Note: st.Note}})
		}
	}
}
