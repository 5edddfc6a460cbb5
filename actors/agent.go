package actors

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/citations"
	"github.com/conclave-ai/conclave/actors/dag"
	"github.com/conclave-ai/conclave/actors/supervise"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/tool"
)

// agentShared is an agent's state that survives supervisor restarts
// (protoactor builds a new actor instance on restart). Only the agent's
// current instance touches it while it lives; its parent reads it after
// the agent terminated.
type agentShared struct {
	attempts  int    // 1-based attempt of the current instance
	opened    bool   // the lane's opening event was emitted
	lastPanic string // why the last attempt panicked
	failures  int    // attempts that failed (panic, transient model error): the backoff's exponent
	subSeq    int    // sub-agents delegated so far (keeps their lanes unique)
	approved  bool   // a human approved the node (hitl node and above)

	// remoteTask and remoteContext are a remote node's task (remote.go),
	// once the remote named it; remoteOpen: it has not ended.
	remoteTask, remoteContext string
	remoteOpen                bool
	// cause, when set, is why the agent's next instance starts: a
	// sibling failed and its supervisor restarts them all (all-for-one).
	// Set by the supervisor (restartCause) before the restart is sent,
	// taken by the new instance.
	cause atomic.Pointer[string]

	// done is the agent's report, stored before it is sent. protoactor
	// delivers a child's Terminated (a system message) ahead of queued user
	// messages, so a parent may learn that the child stopped before it
	// receives the child's AgentDone; it then takes the report from here
	// instead of closing the lane a second time.
	done atomic.Pointer[messages.AgentDone]
}

// restartCause records that the agent restarts because its sibling
// failed with reason (all-for-one).
func (sh *agentShared) restartCause(sibling string, reason any) {
	c := fmt.Sprintf("all-for-one: %s failed: %v", sibling, reason)
	sh.cause.Store(&c)
}

// agentSpec is fixed when the agent is spawned. Its methods answer what
// follows from the spec alone (the opening event, whether a call needs
// approval, the remote agent a node names, ...), so the actor holds only
// what changes while it runs.
type agentSpec struct {
	e       *Engine
	run     *runSpec
	role    model.Role
	agentID string
	lane    messages.Lane
	req     model.Request
	node    *nodeInfo // workers
	callID  string    // sub-agents: the delegating tool call
	round   int       // sub-agents: delegation round (1 = a node's own)
	async   bool      // sub-agents: started by start_async_task
	// steeringID is the note a steerer translates.
	steeringID string
	shared     *agentShared
	restore    *agentRestore // set for an agent rebuilt parked after a restart
	// remoteAgent: a sub-agent whose task a remote agent runs (delegate's "agent").
	remoteAgent string
	// laneOwned: the parent opens and closes the agent's lane (a debater's
	// turn, debatetools.go); the agent emits neither its opening event nor
	// a closing one.
	laneOwned bool
	// policy is how the agent's supervisor treats its failures; the
	// agent reads its backoff from it.
	policy supervise.Policy
}

// agentActor is every model-driven agent of a run: the director, a council
// node, a sub-agent or the synthesiser. It runs model turns (each streamed
// by a goroutine it owns, see turn.go), executes the tool calls between
// turns (delegate spawns a sub-agent child), and closes its lane with the
// role's completion or failure event.
//
// No goroutine runs while the agent waits for tools or sub-agents.
//
// The actor decides; the mechanisms are small types it holds: its fixed
// spec answers what follows from it alone (agentSpec), batch is the last
// turn's tool calls (toolBatch), tools runs them off the mailbox
// (toolRuns), subs and deleg are its delegations (subagentSet,
// delegationState), advice its advisor turns (adviceState) and remote a
// remote node's task (remoteFollower).
type agentActor struct {
	spec *agentSpec

	turn        int
	text        strings.Builder // answer text of this attempt, all turns
	usage       messages.Usage
	cur         *turnHandle
	batch       toolBatch    // the tool calls of the last turn (toolbatch.go)
	backoff     *time.Timer  // a restarted agent's wait before its first turn (begin)
	backoffDone *backoffDone // the message that timer sends
	tools       toolRuns     // the tool calls running off the mailbox (toolcalls.go)
	// history is what the model said and called in this attempt's earlier
	// turns (model.Request.History); turnText is the last turn's text.
	history   []model.Exchange
	turnText  string
	reasoning []string       // the reasoning of this attempt's turns, for evidence packages
	subs      subagentSet    // its sub-agent children (subagents.go)
	parked    *parking       // the pending interrupt, while parked
	remote    remoteFollower // a remote node's task (remote.go)

	deleg  delegationState // async tasks, spawn request, injected context (delegation.go)
	cites  citations.Manager
	advice adviceState // the advisor gate (advise.go)

	repaired bool          // a director's or steerer's invalid answer got its one repair turn
	finished bool          // reported AgentDone (or is failing: see failing)
	failing  *agentFailure // failed; waits for its sub-agents to stop before closing its lane
	stopping bool          // Stopping or Restarting received
}

func (a *agentActor) emit(ctx actor.Context, p messages.Payload) {
	a.spec.run.post(ctx, a.spec.agentID, a.spec.lane, p)
}

func (a *agentActor) target() interruptTarget {
	return interruptTarget{e: a.spec.e, run: a.spec.run, agent: a.spec.agentID, lane: a.spec.lane, parked: &a.parked}
}

func (a *agentActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		sh := a.spec.shared
		if done := sh.done.Load(); done != nil {
			// Restarted with a failing sibling (all-for-one) after it had
			// reported: its lane is closed, and its report stands.
			a.finished = true
			ctx.Request(ctx.Parent(), done)
			return
		}
		if rs := a.spec.restore; rs != nil {
			a.spec.restore = nil // a later restart starts afresh
			a.reattach(ctx, rs)
			return
		}
		sh.attempts++
		if a.spec.role == model.RoleWorker && a.spec.run.hitl.Includes(messages.HITLNode) && !sh.approved {
			a.nodeGate(ctx)
			return
		}
		a.begin(ctx)
	case *turnDone:
		a.turnDone(ctx, m)
	case *backoffDone:
		if m == a.backoffDone && !a.stopping { // not a stale one of an instance before
			a.backoff, a.backoffDone = nil, nil
			a.startTurn(ctx)
		}
	case *turnPanicked:
		a.spec.shared.lastPanic = fmt.Sprint(m.value)
		a.spec.shared.failures++
		panic(m.value) // raise it inside the actor, where the supervisor sees it
	case *messages.AgentDone:
		if s := a.subs[ctx.Sender().Id]; s != nil {
			a.takeReport(ctx, s, m)
		}
	case *actor.Terminated:
		a.subagentTerminated(ctx, m.Who)
	case *injectContext:
		a.deleg.injected = append(a.deleg.injected, m.text)
	case *toolDone:
		a.toolFinished(ctx, m)
	case *toolProgress:
		a.toolProgressed(ctx, m)
	case *remoteDone:
		a.remoteDone(ctx, m)
	case *actor.Stopping, *actor.Restarting:
		a.stopping = true
		if a.backoff != nil {
			a.backoff.Stop()
			a.backoff = nil
		}
		a.target().cancelParked(ctx)
		// Cancel the running turn and wait for its goroutine, so no delta
		// of this agent can reach the hub after the agent stopped.
		a.cur.stop()
		a.cur = nil
		a.tools.cancelAll()
		_, restarting := m.(*actor.Restarting)
		a.remote.stop(a.spec, !restarting)
	}
}

// begin opens the lane and starts the first turn; a restarted agent
// reports the restart, waits out its backoff (restartBackoff), then starts
// again from its first turn.
func (a *agentActor) begin(ctx actor.Context) {
	sh := a.spec.shared
	if !sh.opened {
		sh.opened = true
		if !a.spec.laneOwned {
			a.emit(ctx, a.spec.openPayload())
		}
		a.startTurn(ctx)
		return
	}
	reason := sh.lastPanic
	if c := sh.cause.Swap(nil); c != nil {
		reason = *c
	}
	a.emit(ctx, &messages.AgentRestartedPayload{Attempt: sh.attempts, Reason: reason})
	d := a.spec.policy.Wait(string(a.spec.run.runID)+"\x00"+a.spec.agentID, sh.failures)
	if d <= 0 { // no failure of its own: a restart of the server, or of a failing sibling
		a.startTurn(ctx)
		return
	}
	root, self, done := ctx.ActorSystem().Root, ctx.Self(), &backoffDone{}
	a.backoff, a.backoffDone = time.AfterFunc(d, func() { root.Send(self, done) }), done
}

// backoffDone: a restarted agent's backoff is over; its first turn starts.
type backoffDone struct{}

// transientFailure is the panic value of an agent whose model failed with
// model.ErrTransient: a failure its supervisor restarts it after.
type transientFailure struct{ err error }

func (f *transientFailure) String() string { return f.err.Error() }

// nodeGate asks a human whether the node may start (hitl node and above).
// The node has no lane yet, so the interrupt is on the run lane. A
// rejected (or timed out and rejected) node reports without opening its
// lane; the run supervisor skips it and its dependents.
func (a *agentActor) nodeGate(ctx actor.Context) {
	t := a.target()
	t.lane = a.spec.node.scope
	t.raiseInterrupt(ctx, &messages.InterruptRaisedPayload{Kind: messages.InterruptNodeApproval, NodeID: a.spec.agentID, Goal: a.spec.node.node.Goal,
		Evidence: a.spec.nodeEvidence(a.spec.e.cfg.NewID().String())},
		func(res *messages.Resolution) { a.nodeDecided(ctx, res) })
}

// nodeDecided applies a node approval's outcome.
func (a *agentActor) nodeDecided(ctx actor.Context, res *messages.Resolution) {
	if res.Decision == messages.DecisionApprove {
		a.spec.shared.approved = true
		a.begin(ctx)
		return
	}
	reason := "rejected by a human"
	switch {
	case res.Expired:
		reason = "node approval timed out"
	case res.Feedback != "":
		reason += ": " + res.Feedback
	}
	a.report(ctx, &messages.AgentDone{AgentID: a.spec.agentID, Attempts: a.spec.shared.attempts, Err: errors.New(reason), Rejected: true})
}

func (s *agentSpec) openPayload() messages.Payload {
	switch s.role {
	case model.RoleDirector:
		return &messages.PlanningStartedPayload{Question: s.run.question}
	case model.RoleWorker:
		n := s.node
		return &messages.NodeStartedPayload{NodeID: n.node.ID, Wave: n.wave, Goal: n.node.Goal, Deps: n.node.Deps, Role: n.node.Role}
	case model.RoleSubagent:
		return &messages.SubagentStartedPayload{SubagentID: s.agentID, Task: s.req.Goal, CallID: s.callID, Async: s.async, Round: s.round}
	case model.RoleSteerer:
		return &messages.SteeringReceivedPayload{SteeringID: s.steeringID, Note: s.req.Note}
	default:
		return &messages.SynthesisStartedPayload{Inputs: len(s.req.Context)}
	}
}

func (a *agentActor) turnDone(ctx actor.Context, m *turnDone) {
	if a.finished || a.stopping {
		return
	}
	a.cur = nil
	a.usage = a.usage.Add(m.usage)
	if a.advice.checking {
		a.advised(ctx, m)
		return
	}
	if a.advice.consultingNow() {
		a.consulted(ctx, m)
		return
	}
	a.text.WriteString(m.text)
	a.turnText = m.text
	if m.reasoning != "" {
		a.reasoning = append(a.reasoning, m.reasoning)
	}
	switch {
	case m.err != nil && errors.Is(m.err, model.ErrTransient):
		// A failure for the supervisor: it restarts the agent after a
		// backoff, or stops it at the restart limit (its parent then
		// closes the lane as failed).
		a.spec.shared.lastPanic = m.err.Error()
		a.spec.shared.failures++
		panic(&transientFailure{err: m.err})
	case m.err != nil:
		a.finishFailed(ctx, m.err)
	case len(m.calls) > 0 && a.spec.role == model.RoleSteerer:
		a.finishFailed(ctx, errors.New("a steerer has no tools: its answer must be a graph diff"))
	case len(m.calls) > 0:
		a.runTools(ctx, m.calls)
	case a.deleg.moreInjected():
		a.startTurn(ctx) // context injected during the turn: one more turn to read it
	case a.spec.adviserOn():
		a.cur = a.advice.startCheck(ctx, a.spec, a.text.String())
	default:
		a.finishOK(ctx)
	}
}

// runTools executes the calls of one turn, in order. Tools other than
// delegate run inline through Config.Tools; delegate spawns a sub-agent;
// ask_human raises an info_request; with hitl "tools" every call first
// waits for a human's approval. The next turn starts once every call has
// a result (sub-agents answer asynchronously).
func (a *agentActor) runTools(ctx actor.Context, calls []model.ToolCall) {
	a.batch.reset(calls, a.spec.shared.attempts)
	set := a.spec.e.cfg.Tools
	for i, c := range a.batch.calls {
		// Every call of the turn is published up front, before any runs or
		// waits for approval: the journal then holds the whole turn, which
		// is what recovery rebuilds a parked agent from. A call that will
		// wait for a human says so (AwaitsApproval).
		a.emit(ctx, &messages.ToolCallStartedPayload{CallID: a.batch.callIDs[i], Tool: c.Name, Args: c.Args,
			DisplayName: set.DisplayName(c.Name), ArgsSummary: tool.SummarizeArgs(c.Args),
			AwaitsApproval: a.spec.checkCall(c) == nil && a.spec.needsApproval(c)})
	}
	a.continueTools(ctx)
}

// continueTools runs the remaining calls of the turn until one parks the
// agent on an interrupt; the interrupt's outcome continues from there.
func (a *agentActor) continueTools(ctx actor.Context) {
	for a.batch.next < len(a.batch.calls) && !a.finished { // a call can fail the agent (delegation limit)
		i := a.batch.next
		a.batch.next++
		c := a.batch.calls[i]
		if err := a.spec.checkCall(c); err != nil {
			a.toolResult(ctx, i, "", err) // the model sees why and can call again
			continue
		}
		switch {
		case c.Name == model.ToolAskHuman:
			a.askHuman(ctx, i, c)
			return
		case c.Name == model.ToolAskChoice:
			if a.askChoice(ctx, i, c) {
				return
			}
			continue
		case a.spec.needsApproval(c):
			a.approveTool(ctx, i, c)
			return
		}
		a.execute(ctx, i, c)
	}
	if a.batch.waiting == 0 && !a.finished {
		a.startTurn(ctx)
	}
}

// checkCall is why call c cannot run (an error result for the model), nil
// when it can: its arguments must be a JSON object its tool's schema
// accepts, of a tool the engine has.
func (s *agentSpec) checkCall(c model.ToolCall) error {
	if err := argsError(c.Name, c.Args); err != nil {
		return err
	}
	return s.e.cfg.Tools.Validate(c.Name, c.Args)
}

// needsApproval reports whether call c, once checked, waits for a human's
// approval before it runs (hitl "tools", or a governance policy covering
// the tool). ask_human and ask_choice ask a human anyway (an info request,
// a choice).
func (s *agentSpec) needsApproval(c model.ToolCall) bool {
	return c.Name != model.ToolAskHuman && c.Name != model.ToolAskChoice &&
		(s.run.hitl.Includes(messages.HITLTools) || s.e.policyCovers(s.run.tenant, c.Name))
}

// callAnswered takes the result of working call i. Results are published
// in call order (a fast call's waits for the slower calls before it), so a
// lane's events are the same for the same seed whatever order the work
// finished in; the next turn starts after the turn's last.
func (a *agentActor) callAnswered(ctx actor.Context, i int, r answer) {
	a.batch.answer(i, r)
	for len(a.batch.working) > 0 {
		k, r, ok := a.batch.ready()
		if !ok {
			return
		}
		for _, src := range r.sources {
			if m, _, err := a.cites.Add(src.URL, src.Title, a.spec.agentID, "tool:"+a.batch.calls[k].Name, r.at); err == nil {
				a.cites = m
			}
		}
		for _, f := range r.files {
			f.CallID, f.Tool = a.batch.callIDs[k], a.batch.calls[k].Name
			a.emit(ctx, &f)
		}
		a.toolResult(ctx, k, r.out, r.err)
	}
	if a.batch.idle() && a.parked == nil && !a.finished && !a.stopping {
		a.startTurn(ctx)
	}
}

func (a *agentActor) askHuman(ctx actor.Context, i int, c model.ToolCall) {
	var in struct {
		Question string `json:"question"`
		Context  string `json:"context"`
	}
	if err := json.Unmarshal(c.Args, &in); err != nil || in.Question == "" {
		a.toolResult(ctx, i, "", errors.New(`ask_human needs {"question": "<text>", "context": "<text>"}`))
		a.continueTools(ctx)
		return
	}
	a.target().raiseInterrupt(ctx, &messages.InterruptRaisedPayload{Kind: messages.InterruptInfoRequest,
		Question: in.Question, ContextSnippet: in.Context, CallID: a.batch.callIDs[i]},
		func(res *messages.Resolution) {
			out, err := infoAnswer(res)
			a.humanAnswered(ctx, i, out, err)
		})
}

// askChoice raises a choice interrupt for call i and reports whether the
// agent parked on it; options the runtime refuses (messages.ChoiceQuestion
// Validate) are an error result the model can act on, and no interrupt.
func (a *agentActor) askChoice(ctx actor.Context, i int, c model.ToolCall) bool {
	var in struct {
		Question string                  `json:"question"`
		Context  string                  `json:"context"`
		Options  []messages.ChoiceOption `json:"options"`
		Multiple bool                    `json:"multiple"`
	}
	if err := json.Unmarshal(c.Args, &in); err != nil || in.Question == "" {
		a.toolResult(ctx, i, "", errors.New(`ask_choice needs {"question": "<text>", "options": [{"id": "<id>", "label": "<text>"}, ...]}`))
		return false
	}
	q := messages.ChoiceQuestion{Options: in.Options, Multiple: in.Multiple}
	if err := q.Validate(); err != nil {
		a.toolResult(ctx, i, "", fmt.Errorf("ask_choice: %w", err))
		return false
	}
	a.target().raiseInterrupt(ctx, &messages.InterruptRaisedPayload{Kind: messages.InterruptChoice,
		Question: in.Question, ContextSnippet: in.Context, Options: q.Options, MultipleChoice: q.Multiple, CallID: a.batch.callIDs[i]},
		func(res *messages.Resolution) {
			out, err := choiceAnswer(q, res)
			a.humanAnswered(ctx, i, out, err)
		})
	return true
}

// choiceAnswer is a call's result for a choice's outcome: the chosen ids
// and their labels, or an error when nobody chose in time (a timer never
// picks an option) or when the human declined.
func choiceAnswer(q messages.ChoiceQuestion, res *messages.Resolution) (string, error) {
	switch {
	case res.Expired:
		return "", errors.New("nobody chose before the timeout")
	case res.Decision == messages.DecisionReject || len(res.Choices) == 0:
		reason := "the human declined to choose"
		if res.Feedback != "" {
			reason += ": " + res.Feedback
		}
		return "", errors.New(reason)
	}
	return jsonString(map[string][]string{"choices": res.Choices, "labels": q.Labels(res.Choices)}), nil
}

// infoAnswer is a call's result for an info request's outcome.
func infoAnswer(res *messages.Resolution) (string, error) {
	if res.Expired {
		return "", errors.New("nobody answered before the timeout")
	}
	return res.Response, nil
}

// humanAnswered applies a human's answer (infoAnswer, choiceAnswer) to
// call i and carries on.
func (a *agentActor) humanAnswered(ctx actor.Context, i int, out string, err error) {
	a.toolResult(ctx, i, out, err)
	a.continueTools(ctx)
}

func (a *agentActor) approveTool(ctx actor.Context, i int, c model.ToolCall) {
	ev := a.spec.toolEvidence(a.spec.e.cfg.NewID().String(), c, a.cites.List(), append(a.reasoning, a.text.String()))
	a.target().raiseInterrupt(ctx, &messages.InterruptRaisedPayload{Kind: messages.InterruptToolApproval,
		ToolName: c.Name, ToolArgs: c.Args, CallID: a.batch.callIDs[i], Evidence: ev, EvidencePackageID: ev.ID},
		func(res *messages.Resolution) { a.approved(ctx, i, c, res) })
}

// approved applies a tool approval's outcome to call i and carries on.
func (a *agentActor) approved(ctx actor.Context, i int, c model.ToolCall, res *messages.Resolution) {
	switch res.Decision {
	case messages.DecisionApprove:
		a.execute(ctx, i, c)
	case messages.DecisionRevise:
		c.Args = res.EditedArgs // a JSON object (the registry checked)
		a.batch.calls[i] = c
		if err := a.spec.e.cfg.Tools.Validate(c.Name, c.Args); err != nil {
			a.toolResult(ctx, i, "", fmt.Errorf("the edited arguments are refused: %w", err))
			break
		}
		a.execute(ctx, i, c)
	default:
		reason := "rejected by a human"
		switch {
		case res.Expired:
			reason = "approval timed out; rejected"
		case res.Feedback != "":
			reason += ": " + res.Feedback
		}
		a.toolResult(ctx, i, "", errors.New(reason)) // the model sees it and can act on it
	}
	a.continueTools(ctx)
}

// execute runs call i, whose arguments are valid: the runtime's own tools
// here (delegate spawns a sub-agent, which answers later), the others on
// a goroutine of their own (toolcalls.go), which answers with toolDone.
func (a *agentActor) execute(ctx actor.Context, i int, c model.ToolCall) {
	if a.runtimeTool(ctx, i, c) {
		return
	}
	t, def, ok := a.spec.e.cfg.Tools.Lookup(c.Name)
	if !ok { // Validate knows it: a runtime tool runtimeTool does not handle
		a.toolResult(ctx, i, "", fmt.Errorf("tool %q is not available to this agent", c.Name))
		return
	}
	a.batch.startWorking(a.spec.e.cfg.Now(), i)
	if a.tools.max == 0 {
		a.tools.max = a.spec.e.cfg.ToolParallel
	}
	a.tools.start(ctx, a.spec.e, toolStart{idx: i, t: t, def: def, args: c.Args,
		info: tool.CallInfo{Tenant: a.spec.run.tenant, RunID: a.spec.run.runID, AgentID: a.spec.agentID, CallID: c.ID, Index: i, Attempt: a.spec.shared.attempts, Turn: a.turn},
		span: toolSpan(a.spec.e, a.spec.run, a.spec.lane, a.spec.shared.attempts, a.turn, c.ID)})
}

// toolFinished takes a tool call's outcome from its goroutine.
func (a *agentActor) toolFinished(ctx actor.Context, d *toolDone) {
	if a.finished || a.stopping {
		return
	}
	if !a.tools.finished(ctx, a.spec.e, d) {
		return // stale: an earlier turn's, or the instance's before a restart
	}
	a.callAnswered(ctx, d.idx, answer{out: d.res.Content, err: d.err, sources: d.res.Sources, files: d.res.Files, at: a.spec.e.cfg.Now()})
}

// toolProgressed publishes a running call's progress report (coalesced
// by the call's gate); a report of a call that ended, or of an earlier
// turn's or instance's, is dropped.
func (a *agentActor) toolProgressed(ctx actor.Context, m *toolProgress) {
	if a.finished || a.stopping || !a.tools.live(m) {
		return
	}
	a.emit(ctx, messages.NewToolCallProgress(a.batch.callIDs[m.idx], a.batch.calls[m.idx].Name, m.p.Progress, m.p.Total, a.spec.e.redact.String(m.p.Message)))
}

func (a *agentActor) toolResult(ctx actor.Context, i int, out string, err error) {
	r := &a.batch.results[i]
	r.Content, r.IsError = out, err != nil
	if err != nil {
		r.Content = err.Error()
	}
	r.Content = a.spec.e.redact.String(r.Content) // what the model reads, too
	var took time.Duration
	if b := a.batch.began[i]; !b.IsZero() {
		took = max(a.spec.e.cfg.Now().Sub(b), 0)
	}
	a.emit(ctx, &messages.ToolCallFinishedPayload{CallID: a.batch.callIDs[i], Tool: r.Name, Result: r.Content, IsError: r.IsError,
		DisplayName: a.spec.e.cfg.Tools.DisplayName(r.Name), DurationMS: took.Milliseconds(), DurationDisplay: messages.DurationDisplay(took)})
}

// spawnSubagent starts a sub-agent for call idx; agent, when set, names
// the remote agent whose task the sub-agent is (remote.go).
func (a *agentActor) spawnSubagent(ctx actor.Context, idx int, task string, async bool, agent string) *subagent {
	sh := a.spec.shared
	sh.subSeq++
	name := "sub" + strconv.Itoa(sh.subSeq)
	id := a.spec.agentID + "." + name
	lane := a.spec.lane.Child(messages.SubagentStream(a.spec.lane.StreamID, name))
	round := a.spec.round + 1
	spec := &agentSpec{
		e: a.spec.e, run: a.spec.run, role: model.RoleSubagent, agentID: id, lane: lane, callID: a.batch.callIDs[idx], round: round, async: async,
		req:    model.Request{Role: model.RoleSubagent, RunID: a.spec.run.runID, AgentID: id, Question: a.spec.run.question, Files: a.spec.run.files, Goal: task, Depth: round},
		shared: &agentShared{}, remoteAgent: agent,
	}
	spec.policy = a.spec.run.policy(a.spec.e.cfg, roleSubagent)
	var inst *agentActor
	props := spec.e.props(func() actor.Actor { inst = &agentActor{spec: spec}; return inst },
		actor.WithSupervisor(subagentStrategy(&inst)), actor.WithMailbox(actor.UnboundedLockfree()))
	pid, err := ctx.SpawnNamed(props, name)
	if err != nil { // names are unique per parent by construction
		panic(fmt.Sprintf("spawn %s: %v", id, err))
	}
	if a.subs == nil {
		a.subs = subagentSet{}
	}
	s := &subagent{pid: sendablePID(pid), shared: spec.shared, agentID: id, lane: lane, idx: idx, async: async, taskID: id, seq: sh.subSeq}
	a.subs[pid.Id] = s
	if !async {
		a.batch.startWorking(a.spec.e.cfg.Now(), idx)
	}
	return s
}

func (a *agentActor) takeReport(ctx actor.Context, s *subagent, m *messages.AgentDone) {
	if s.reported || a.finished || a.stopping {
		s.reported = true
		return
	}
	s.reported = true
	// The finished sub-agent is idle (no goroutine); it stops with this
	// agent. Stopping it here would race with that stop and make a dead letter.
	a.usage = a.usage.Add(m.Usage)
	if len(m.Citations) > 0 { // merged in delegation order (delegationState.mergeCitations), whatever order reports arrive in
		s.cites = m.Citations
		a.deleg.cited = append(a.deleg.cited, s)
	}
	if m.Code == messages.ErrCodeDelegationLimit {
		// Past the hard delegation limit the whole chain aborts.
		a.failCode(ctx, m.Err, m.Code)
		return
	}
	if s.async {
		a.asyncEnded(ctx, s, m.Output, m.Err)
		return
	}
	a.callAnswered(ctx, s.idx, answer{out: m.Output, err: m.Err})
}

func (a *agentActor) subagentTerminated(ctx actor.Context, who *actor.PID) {
	s := a.subs[who.Id]
	if s == nil {
		return
	}
	delete(a.subs, who.Id)
	defer func() {
		if f := a.failing; f != nil && !a.stopping && !a.subs.live() {
			a.closeFailed(ctx, f.err, f.code)
		}
	}()
	if d := s.shared.done.Load(); d != nil { // it reported; the report is still queued
		a.takeReport(ctx, s, d)
		return
	}
	if s.reported {
		return
	}
	// Died without reporting: close its lane for it.
	p := &messages.SubagentFinishedPayload{SubagentID: s.agentID, Outcome: messages.OutcomeCancelled, Error: "stopped with its parent"}
	switch {
	case s.cancel:
		p.Error = "cancelled by cancel_async_task"
	case a.failing != nil:
		p.Error = "its parent failed"
	case !a.stopping:
		p.Outcome, p.Error = messages.OutcomeFailed, "restart limit reached after panics"
	}
	a.spec.run.post(ctx, s.agentID, s.lane, p)
	switch {
	case a.stopping || a.finished:
	case s.async:
		a.asyncEnded(ctx, s, "", errors.New(p.Error))
	default:
		a.callAnswered(ctx, s.idx, answer{err: errors.New("sub-agent failed: " + p.Error)})
	}
}

func (a *agentActor) finishOK(ctx actor.Context) {
	if a.deleg.awaitAsync(a.subs) {
		return // the last async task's end finishes the agent
	}
	a.cites = a.deleg.mergeCitations(a.cites)
	done := &messages.AgentDone{AgentID: a.spec.agentID, Output: a.text.String(), Usage: a.usage, Attempts: a.spec.shared.attempts,
		Citations: a.cites.ToHandoff(), Spawn: a.deleg.spawn}
	switch a.spec.role {
	case model.RoleDirector:
		plan, err := a.spec.decodePlan(done.Output)
		if err != nil {
			if !a.repair(ctx, "plan", err) {
				a.finishFailed(ctx, err)
			}
			return
		}
		done.Plan, done.Waves = &plan, dag.Waves(plan)
		done.Closing = &messages.PlanProposedPayload{Plan: plan, Waves: done.Waves}
	case model.RoleWorker:
		done.Closing = &messages.NodeCompletedPayload{NodeID: a.spec.agentID, Output: done.Output, Attempts: done.Attempts, Usage: a.usage, Citations: done.Citations, Spawn: done.Spawn}
	case model.RoleSubagent:
		done.Closing = &messages.SubagentFinishedPayload{SubagentID: a.spec.agentID, Outcome: messages.OutcomeOK, Output: done.Output}
	case model.RoleSynthesizer:
		done.Closing = &messages.SynthesisCompletedPayload{Answer: done.Output}
	case model.RoleSteerer:
		// The supervisor closes the steering lane at the wave boundary.
		d, err := messages.DecodeGraphDiff(strings.NewReader(model.JSONObject(done.Output)))
		if err != nil {
			if err = fmt.Errorf("the model's answer is not a graph diff: %w", err); !a.repair(ctx, "graph diff", err) {
				a.finishFailed(ctx, err)
			}
			return
		}
		done.Diff = &d
	}
	if done.Closing != nil {
		a.emit(ctx, done.Closing)
	}
	a.report(ctx, done)
}

// decodePlan reads and validates the director's plan (the JSON object of
// its answer, fences and prose around it dropped: model.JSONObject): a DAG
// whose nodes use only tools the engine has.
func (s *agentSpec) decodePlan(out string) (messages.Plan, error) {
	var plan messages.Plan
	if err := json.Unmarshal([]byte(model.JSONObject(out)), &plan); err != nil {
		return plan, fmt.Errorf("director output is not a plan: %w", err)
	}
	if err := dag.Validate(plan); err != nil {
		return plan, err
	}
	return plan, unknownTools(plan, s.e.cfg.Tools)
}

// unknownTools reports the first tool a plan's node (or a team's nested
// node) names that the engine does not have.
func unknownTools(p messages.Plan, tools *tool.Set) error {
	for _, n := range p.Nodes {
		names := n.Tools
		if n.Debate != nil {
			names = append(slices.Clone(names), n.Debate.Tools...)
		}
		for _, name := range names {
			if !tools.Has(name) {
				return fmt.Errorf("plan: node %s uses tool %q, which does not exist (tools: %s)", n.ID, name, strings.Join(tools.AllNames(), ", "))
			}
		}
		if n.Team != nil {
			if err := unknownTools(*n.Team, tools); err != nil {
				return err
			}
		}
	}
	return nil
}

// repair gives a director or steerer whose answer is invalid one more turn
// to correct it, the error as its guidance (a real model's JSON can be
// off); the lane says so with a warning. It reports false when the repair
// turn was spent already.
func (a *agentActor) repair(ctx actor.Context, what string, err error) bool {
	if a.repaired {
		return false
	}
	a.repaired = true
	a.emit(ctx, messages.NewWarning(messages.WarnInvalidOutput, fmt.Sprintf("the %s is invalid; the model gets one turn to correct it: %v", what, err)))
	a.history = append(a.history, model.Exchange{Text: a.turnText}) // the model sees what it answered
	a.advice.guidance = fmt.Sprintf("Your previous answer was not a valid %s: %v. Answer again with only the corrected JSON.", what, err)
	a.text.Reset()
	a.startTurn(ctx)
	return true
}

func (a *agentActor) finishFailed(ctx actor.Context, err error) {
	a.failCode(ctx, err, "")
}

// failCode closes the lane with the role's failure event and reports err;
// code, when set, is the run error code the failure should end the run with.
func (a *agentActor) failCode(ctx actor.Context, err error, code messages.ErrorCode) {
	if a.finished {
		return
	}
	if a.subs.live() {
		// Its sub-agents' lanes must close before its own: stop them, and
		// fail once the last one has terminated (subagentTerminated).
		a.finished, a.failing = true, &agentFailure{err: err, code: code}
		a.subs.stopLive(ctx)
		return
	}
	a.closeFailed(ctx, err, code)
}

// agentFailure is a failure waiting for the agent's sub-agents to stop.
type agentFailure struct {
	err  error
	code messages.ErrorCode
}

// closeFailed closes the lane with the role's failure event and reports.
func (a *agentActor) closeFailed(ctx actor.Context, err error, code messages.ErrorCode) {
	a.failing = nil
	var closing messages.Payload
	switch a.spec.role {
	case model.RoleDirector:
		closing = &messages.PlanningFailedPayload{Error: err.Error(), Code: model.CodeOf(err)}
	case model.RoleWorker:
		closing = &messages.NodeFailedPayload{NodeID: a.spec.agentID, Error: err.Error(), Attempts: a.spec.shared.attempts, Code: model.CodeOf(err)}
	case model.RoleSubagent:
		closing = &messages.SubagentFinishedPayload{SubagentID: a.spec.agentID, Outcome: messages.OutcomeFailed, Error: err.Error()}
	case model.RoleSynthesizer:
		closing = &messages.SynthesisFailedPayload{Error: err.Error(), Code: model.CodeOf(err)}
	}
	if closing != nil {
		a.emit(ctx, closing)
	}
	a.report(ctx, &messages.AgentDone{AgentID: a.spec.agentID, Usage: a.usage, Attempts: a.spec.shared.attempts, Err: err, Code: code, Closing: closing})
}

// report tells the parent the agent is done; the parent stops it.
func (a *agentActor) report(ctx actor.Context, done *messages.AgentDone) {
	a.finished = true
	a.spec.shared.done.Store(done)
	ctx.Request(ctx.Parent(), done) // Request, not Send: the parent identifies us by Sender()
}
