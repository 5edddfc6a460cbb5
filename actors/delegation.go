package actors

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/citations"
	"github.com/conclave-ai/conclave/actors/delegation"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// Delegation tools an agent's runtime handles itself (not Config.Tools):
//
//   - delegate {task}: a sub-agent works on the task; the call's result is
//     its output, and the agent's next turn waits for it.
//   - start_async_task {task}: the same sub-agent, but the call answers at
//     once with {"task_id"} and the agent goes on; check_async_task,
//     update_async_task (context injected into the running sub-agent's
//     mailbox), cancel_async_task and list_async_tasks manage it. The
//     tasks' state reaches every turn in model.Request.AsyncTasks, a
//     channel of its own that context compaction never trims. An agent
//     that finishes while tasks still run waits for them before closing
//     its lane.
//   - spawn_subteam {goal, roles}: a worker's (first) request for a
//     sub-team, decided at the end of its wave (boundary.go).
//
// Delegation rounds: a node's sub-agent is round 1, its own sub-agent
// round 2, and so on. The delegation reaching max_delegation_rounds warns,
// once per chain (warning delegation_soft_limit); one reaching twice that fails the
// delegating agent with a delegation.RoundLimitError, and the failure
// climbs the chain: the run ends with run_error{code: delegation_limit}.

// delegationState is an agent's delegation bookkeeping.
type delegationState struct {
	tasks    delegation.AsyncTasks
	spawn    *messages.SpawnRequest // the first spawn_subteam call
	injected []string               // context injected by the supervisor (sub-agents)
	read     int                    // injected entries already passed to a turn
	awaiting bool                   // finished its last turn; waits for async tasks
	cited    []*subagent            // sub-agents that handed over sources not merged yet
}

// injectContext is update_async_task's message to a running sub-agent.
type injectContext struct{ text string }

func (d *delegationState) takeInjected() []string {
	if d.read == len(d.injected) {
		return nil
	}
	in := d.injected[d.read:]
	d.read = len(d.injected)
	return in
}

// moreInjected reports whether context arrived that no turn has read yet.
func (d *delegationState) moreInjected() bool { return d.read < len(d.injected) }

// runtimeTool runs call i if the runtime handles it, and reports whether it did.
func (a *agentActor) runtimeTool(ctx actor.Context, i int, c model.ToolCall) bool {
	switch c.Name {
	case model.ToolConsultAdvisor:
		a.consult(ctx, i, c)
	case model.ToolDelegate:
		var in struct {
			Task  string `json:"task"`
			Agent string `json:"agent"`
		}
		if err := json.Unmarshal(c.Args, &in); err != nil || in.Task == "" {
			a.toolResult(ctx, i, "", errors.New(`delegate needs {"task": "<what to do>"}`))
			return true
		}
		if in.Agent != "" {
			if _, err := a.spec.e.cfg.Remote.Lookup(in.Agent); err != nil {
				a.toolResult(ctx, i, "", err) // the model learns which agents there are
				return true
			}
		}
		if a.delegationAllowed(ctx, i) {
			a.spawnSubagent(ctx, i, in.Task, false, in.Agent)
		}
	case model.ToolStartAsyncTask:
		var in struct {
			Task string `json:"task"`
		}
		if err := json.Unmarshal(c.Args, &in); err != nil || in.Task == "" {
			a.toolResult(ctx, i, "", errors.New(`start_async_task needs {"task": "<what to do>"}`))
			return true
		}
		if a.delegationAllowed(ctx, i) {
			s := a.spawnSubagent(ctx, i, in.Task, true, "")
			// Task ids are the sub-agents' ids: unique, so neither fails.
			_ = a.deleg.tasks.Start(s.taskID, in.Task)
			_ = a.deleg.tasks.SetRunning(s.taskID)
			a.toolResult(ctx, i, jsonString(map[string]string{"task_id": s.taskID}), nil)
		}
	case model.ToolCheckAsyncTask:
		id, err := taskIDArg(c.Args)
		if err == nil {
			t, ok := a.deleg.tasks.Get(id)
			if !ok {
				err = fmt.Errorf("%w: %s", delegation.ErrUnknownTask, id)
			} else {
				a.toolResult(ctx, i, jsonString(asyncView(t)), nil)
				return true
			}
		}
		a.toolResult(ctx, i, "", err)
	case model.ToolUpdateAsyncTask:
		var in struct {
			TaskID  string `json:"task_id"`
			Context string `json:"context"`
		}
		err := json.Unmarshal(c.Args, &in)
		if err != nil || in.TaskID == "" || in.Context == "" {
			a.toolResult(ctx, i, "", errors.New(`update_async_task needs {"task_id": "<id>", "context": "<text>"}`))
			return true
		}
		if err := a.deleg.tasks.Update(in.TaskID); err != nil {
			a.toolResult(ctx, i, "", err)
			return true
		}
		if s := a.subs.byTask(in.TaskID); s != nil {
			ctx.Send(s.pid, &injectContext{text: in.Context})
		}
		a.toolResult(ctx, i, jsonString(map[string]string{"task_id": in.TaskID, "status": "context delivered"}), nil)
	case model.ToolCancelAsyncTask:
		id, err := taskIDArg(c.Args)
		if err == nil {
			err = a.deleg.tasks.Cancel(id)
		}
		if err != nil {
			a.toolResult(ctx, i, "", err)
			return true
		}
		if s := a.subs.byTask(id); s != nil && !s.reported {
			s.cancel = true
			ctx.Stop(s.pid) // its Terminated closes its lane as cancelled
		}
		a.toolResult(ctx, i, jsonString(map[string]string{"task_id": id, "status": delegation.StatusCancelled}), nil)
	case model.ToolListAsyncTasks:
		list := a.deleg.tasks.List()
		views := make([]map[string]string, len(list))
		for k, t := range list {
			views[k] = asyncView(t)
		}
		a.toolResult(ctx, i, jsonString(views), nil)
	case model.ToolSpawnSubteam:
		var in messages.SpawnRequest
		var raw struct {
			Goal  string   `json:"goal"`
			Roles []string `json:"roles"`
		}
		switch err := json.Unmarshal(c.Args, &raw); {
		case a.spec.role != model.RoleWorker:
			a.toolResult(ctx, i, "", errors.New("only a council node may spawn a sub-team"))
		case err != nil || raw.Goal == "" || len(raw.Roles) > maxSpawnRoles:
			a.toolResult(ctx, i, "", fmt.Errorf(`spawn_subteam needs {"goal": "<text>", "roles": [at most %d role names]}`, maxSpawnRoles))
		case a.deleg.spawn != nil:
			a.toolResult(ctx, i, "", errors.New("a sub-team was already requested: only the first spawn_subteam call counts"))
		default:
			in.Goal, in.Roles = raw.Goal, raw.Roles
			a.deleg.spawn = &in
			a.toolResult(ctx, i, "sub-team requested: it runs after this wave, if approved", nil)
		}
	default:
		return false
	}
	return true
}

// maxSpawnRoles bounds a sub-team (one node per role).
const maxSpawnRoles = messages.MaxTeamSize

// delegationAllowed checks the delegation round a delegation from this
// agent would reach: a warning at the soft limit; at the hard limit the
// call fails and so does the agent, with the typed error.
func (a *agentActor) delegationAllowed(ctx actor.Context, i int) bool {
	lim := delegation.Limits{Soft: a.spec.run.maxDelegationRounds}
	round := a.spec.round + 1
	switch lim.Check(round) {
	case delegation.HardLimit:
		err := lim.Err(round)
		a.toolResult(ctx, i, "", err)
		a.failCode(ctx, err, messages.ErrCodeDelegationLimit)
		return false
	case delegation.SoftLimit:
		if !lim.Warns(round) {
			break // its chain was warned at the soft limit
		}
		a.emit(ctx, messages.NewWarning(messages.WarnDelegationSoftLimit,
			fmt.Sprintf("delegation round %d reached the soft limit %d (the hard limit is %d)", round, lim.Soft, 2*lim.Soft)))
	}
	return true
}

// asyncEnded records an async task's end; an agent waiting for its tasks
// finishes once none runs.
func (a *agentActor) asyncEnded(ctx actor.Context, s *subagent, out string, err error) {
	if !s.cancel {
		_ = a.deleg.tasks.Finish(s.taskID, out, err) // ErrTaskEnded: cancelled meanwhile; it stays cancelled
	}
	if a.deleg.awaiting && !a.subs.asyncLive() {
		a.deleg.awaiting = false
		a.finishOK(ctx)
	}
}

// awaitAsync holds a finishing agent until its async tasks (among subs)
// ended, so that their lanes close before its own.
func (d *delegationState) awaitAsync(subs subagentSet) bool {
	if !subs.asyncLive() {
		return false
	}
	d.awaiting = true
	return true
}

// mergeCitations merges into cites the sources the sub-agents handed over
// since the last merge, in delegation order, so that numbering does not
// depend on which sub-agent finished first. It runs before each turn and
// at the agent's end.
func (d *delegationState) mergeCitations(cites citations.Manager) citations.Manager {
	subs := d.cited
	d.cited = nil
	slices.SortFunc(subs, func(x, y *subagent) int { return x.seq - y.seq })
	for _, s := range subs {
		if h, err := citations.FromHandoff(s.cites); err == nil {
			cites = cites.Merge(h)
		}
		s.cites = nil
	}
	return cites
}

func taskIDArg(args json.RawMessage) (string, error) {
	var in struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal(args, &in); err != nil || in.TaskID == "" {
		return "", errors.New(`needs {"task_id": "<id>"}`)
	}
	return in.TaskID, nil
}

func asyncView(t model.AsyncTask) map[string]string {
	v := map[string]string{"task_id": t.ID, "task": t.Task, "status": t.Status}
	if t.Output != "" {
		v["output"] = t.Output
	}
	return v
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // unreachable: maps and slices of strings
	}
	return string(b)
}
