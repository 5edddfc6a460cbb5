package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// renderer folds the events of one run into what a person wants to see: a
// progress line per notable event, a status snapshot (per-wave node counts,
// tokens streamed) and a final summary. It does no I/O and keeps no clock,
// so it is fed one envelope at a time and tested without a terminal; the
// outputs in output.go decide how and when to write what it produces.
//
// It type-switches on payload structs; events of other runs are ignored.
type renderer struct {
	run   messages.RunID
	phase string
	nodes map[string]*nodeState
	lanes map[messages.StreamID]*nodeState
	waves [][]*nodeState
	// usage is what the run's model turns reported so far (token_usage,
	// every lane), then the terminal event's totals: the one token count
	// the status line and the summary show.
	usage messages.Usage
	// cost adds up token_usage's cost_usd (costUnknown: a turn came
	// without one), budget is run_started's: the spend line.
	cost        float64
	costUnknown bool
	budget      *messages.RunBudget
	term        *messages.Envelope
	// interrupts labels the open interrupts; waiting lists their ids in
	// the order they were raised.
	interrupts map[string]string
	waiting    []string
	// asking is the interrupt a prompt asks about now, shown first;
	// answered holds those the command answered whose events have not
	// come yet, not shown.
	asking   string
	answered map[string]bool
	// files are the files the run's agents wrote (file events), by path
	// in the order first written; a later write of a path replaces it.
	files     []writtenFile
	filesByAt map[string]int
	// tools are the running tool calls that reported progress, in the
	// order they first did, with their latest report.
	tools []toolLine
}

// writtenFile is a file an agent of the run wrote: the summary lists it.
type writtenFile struct {
	path, agent string
	size        int64
}

// toolLine is a running tool call's latest progress report.
type toolLine struct {
	lane messages.StreamID
	call string
	text string
}

type nodeStatus int

const (
	nodePending nodeStatus = iota
	nodeRunning
	nodeCompleted
	nodeFailed
	nodeCancelled
	nodeSkipped
)

type nodeState struct {
	id     string
	wave   int
	status nodeStatus
	// tokens: output tokens the node's model turns reported (token_usage
	// on its lane) in its current attempt.
	tokens int64
}

// noteKind says how a progress line reads. The terminal output shows only
// the notable kinds (warn, bad) above its status block; the plain output
// shows every line.
type noteKind int

const (
	noteInfo noteKind = iota
	noteOK
	// noteWaiting: something waits for the human ("waiting for you: …").
	// The terminal's status block says so while it waits, so the
	// terminal does not print the line too: it reads once on screen.
	noteWaiting
	noteWarn
	noteBad
)

// note is one progress line.
type note struct {
	kind noteKind
	text string
}

// waveCounts is the status of one wave's nodes.
type waveCounts struct {
	Wave                                                    int
	Pending, Running, Completed, Failed, Cancelled, Skipped int
}

// status is a snapshot of the run for the live status block.
type status struct {
	Phase string
	Waves []waveCounts
	// Usage is the tokens the run's model turns reported so far (the
	// totals of the terminal event once it came), as the summary says.
	Usage messages.Usage
	// Spend is the run's spend against its budget ("" when it has no
	// budget and no turn was priced): see spend.
	Spend string
	// Waiting describes the interrupts waiting for a human, oldest first.
	Waiting []string
	// Tools are the running tool calls' latest progress reports ("n001
	// search [######----] 2/3 reading source 2 of 3"), oldest call first.
	Tools []string
}

func newRenderer(run messages.RunID) *renderer {
	return &renderer{
		run: run, phase: "starting",
		nodes: make(map[string]*nodeState), lanes: make(map[messages.StreamID]*nodeState),
		interrupts: make(map[string]string), answered: make(map[string]bool),
	}
}

// node returns the state of node id, creating it in wave (when >= 0) if the
// plan did not list it.
func (r *renderer) node(id string, wave int) *nodeState {
	if n, ok := r.nodes[id]; ok {
		return n
	}
	n := &nodeState{id: id, wave: wave}
	r.nodes[id] = n
	r.lanes[messages.NodeStream(id)] = n
	if wave >= 0 {
		for len(r.waves) <= wave {
			r.waves = append(r.waves, nil)
		}
		r.waves[wave] = append(r.waves[wave], n)
	}
	return n
}

// Event updates the state with env and appends its progress lines to dst.
// Terminal events add no line: see Summary.
func (r *renderer) Event(dst []note, env *messages.Envelope) []note {
	if env.RunID != r.run {
		return dst
	}
	add := func(kind noteKind, format string, args ...any) {
		dst = append(dst, note{kind: kind, text: fmt.Sprintf(format, args...)})
	}
	switch p := env.Payload.(type) {
	case *messages.RunStartedPayload:
		r.phase = "starting"
		r.budget = p.Budget
		add(noteInfo, "run %s: %q", env.RunID, p.Question)
	case *messages.PlanningStartedPayload:
		r.phase = "planning"
		add(noteInfo, "planning")
	case *messages.PlanProposedPayload:
		r.phase = "plan proposed"
		for w, ids := range p.Waves {
			for _, id := range ids {
				r.node(id, w)
			}
		}
		add(noteInfo, "plan: %s", nodesInWaves(len(p.Plan.Nodes), len(p.Waves)))
	case *messages.PlanningFailedPayload:
		r.phase = "planning failed"
		add(noteBad, "planning failed: %s", p.Error)
	case *messages.PlanApprovedPayload:
		r.phase = "plan approved"
		if p.Automatic {
			add(noteInfo, "plan approved (automatic)")
		} else {
			add(noteInfo, "plan approved")
		}
	case *messages.PlanRejectedPayload:
		r.phase = "plan rejected"
		add(noteBad, "plan rejected: %s", p.Reason)
	case *messages.ReplanAttemptPayload:
		r.phase = "re-planning"
		add(noteInfo, "re-planning (attempt %d of %d)", p.Attempt, p.MaxAttempts)
	case *messages.WaveStartedPayload:
		if p.Team != "" { // a team's nested wave: the status block counts the run's waves
			add(noteInfo, "team %s wave %d started: %s", p.Team, p.Wave, strings.Join(p.NodeIDs, " "))
			break
		}
		r.phase = fmt.Sprintf("wave %d", p.Wave)
		for _, id := range p.NodeIDs {
			r.node(id, p.Wave)
		}
		add(noteInfo, "wave %d started: %s", p.Wave, strings.Join(p.NodeIDs, " "))
	case *messages.WaveCompletedPayload:
		kind := noteOK
		if p.Failed+p.Cancelled+p.Skipped > 0 {
			kind = noteWarn
		}
		if p.Team != "" {
			add(kind, "team %s wave %d completed: %s", p.Team, p.Wave, counts(p.Completed, p.Failed, p.Cancelled, p.Skipped))
			break
		}
		add(kind, "wave %d completed: %s", p.Wave, counts(p.Completed, p.Failed, p.Cancelled, p.Skipped))
	case *messages.NodeStartedPayload:
		wave := p.Wave
		if env.Lane.Depth > 1 { // a team member: not in the run's waves
			wave = -1
		}
		n := r.node(p.NodeID, wave)
		n.status, n.tokens = nodeRunning, 0
		add(noteInfo, "node %s started", p.NodeID)
	case *messages.NodeCompletedPayload:
		n := r.node(p.NodeID, -1)
		n.status = nodeCompleted
		if p.Attempts > 1 {
			add(noteOK, "node %s completed (%d tokens out, %d attempts)", p.NodeID, n.tokens, p.Attempts)
		} else {
			add(noteOK, "node %s completed (%d tokens out)", p.NodeID, n.tokens)
		}
	case *messages.NodeFailedPayload:
		r.node(p.NodeID, -1).status = nodeFailed
		if p.Panicked {
			add(noteBad, "node %s failed after %d attempts: %s", p.NodeID, p.Attempts, p.Error)
		} else {
			add(noteBad, "node %s failed: %s", p.NodeID, p.Error)
		}
	case *messages.NodeCancelledPayload:
		r.node(p.NodeID, -1).status = nodeCancelled
		add(noteWarn, "node %s cancelled: %s", p.NodeID, p.Reason)
	case *messages.NodeSkippedPayload:
		r.node(p.NodeID, -1).status = nodeSkipped
		add(noteWarn, "node %s skipped: %s", p.NodeID, p.Reason)
	case *messages.TokenUsagePayload:
		r.usage.InputTokens += p.InputTokens
		r.usage.OutputTokens += p.OutputTokens
		if p.CostUSD != nil {
			r.cost += *p.CostUSD
		} else {
			r.costUnknown = true
		}
		if n, ok := r.lanes[env.Lane.StreamID]; ok {
			n.tokens += p.OutputTokens
		}
	case *messages.AgentRestartedPayload:
		// The failed attempt's partial output is discarded: so is its count.
		if n, ok := r.lanes[env.Lane.StreamID]; ok {
			n.tokens = 0
			add(noteWarn, "node %s restarted (attempt %d): %s", n.id, p.Attempt, p.Reason)
		} else {
			add(noteWarn, "%s restarted (attempt %d): %s", env.AgentID, p.Attempt, p.Reason)
		}
	case *messages.RemoteTaskPayload:
		// The task's naming and its changes of state; not the status texts
		// of a working task (a remote council reports each of its events).
		if p.State != "TASK_STATE_WORKING" || p.Message == "" {
			add(noteInfo, "%s: remote agent %s, task %s: %s", env.AgentID, p.Agent, p.TaskID, strings.ToLower(strings.TrimPrefix(p.State, "TASK_STATE_")))
		}
	case *messages.WarningPayload:
		if p.SuggestedAction != "" {
			add(noteWarn, "warning from %s: %s: %s (%s)", env.AgentID, p.Code, p.Message, p.SuggestedAction)
			break
		}
		add(noteWarn, "warning from %s: %s: %s", env.AgentID, p.Code, p.Message)
	case *messages.FilePayload:
		add(noteInfo, "%s wrote %s (%d bytes)", env.AgentID, p.Path, p.Size)
		r.wrote(writtenFile{path: p.Path, agent: env.AgentID, size: p.Size})
	case *messages.ToolCallProgressPayload:
		text := toolProgressLine(env.AgentID, p)
		r.setTool(env.Lane.StreamID, p.CallID, text)
		add(noteInfo, "%s", text)
	case *messages.ToolCallFinishedPayload:
		r.setTool(env.Lane.StreamID, p.CallID, "")
		if p.IsError {
			add(noteWarn, "tool %s of %s failed after %s: %s", p.Tool, env.AgentID, p.DurationDisplay, p.Result)
		}
	case *messages.SubagentStartedPayload:
		add(noteInfo, "sub-agent %s of %s started", p.SubagentID, env.Lane.ParentStreamID)
	case *messages.SubagentFinishedPayload:
		if p.Outcome == messages.OutcomeOK {
			add(noteInfo, "sub-agent %s of %s finished", p.SubagentID, env.Lane.ParentStreamID)
		} else {
			add(noteWarn, "sub-agent %s of %s %s: %s", p.SubagentID, env.Lane.ParentStreamID, p.Outcome, p.Error)
		}
	case *messages.SynthesisStartedPayload:
		r.phase = "synthesis"
		add(noteInfo, "synthesis started (%d inputs)", p.Inputs)
	case *messages.SynthesisCompletedPayload:
		add(noteOK, "synthesis completed")
	case *messages.SynthesisFailedPayload:
		add(noteBad, "synthesis failed: %s", p.Error)
	case *messages.InterruptRaisedPayload:
		label := interruptLabel(p, env.AgentID)
		r.interrupts[p.InterruptID] = label
		r.waiting = append(r.waiting, p.InterruptID)
		add(noteWaiting, "waiting for you: %s", label)
	case *messages.InterruptResolvedPayload:
		label := r.closeInterrupt(p.InterruptID, p.Kind, env.AgentID)
		switch p.Decision {
		case messages.DecisionCancel:
			add(noteWarn, "%s cancelled", label)
		case messages.DecisionApprove:
			switch p.Kind {
			case messages.InterruptInfoRequest:
				add(noteInfo, "%s answered", label)
			case messages.InterruptChoice:
				add(noteInfo, "%s answered: %s", label, strings.Join(p.Choices, ", "))
			default:
				add(noteInfo, "%s: approved", label)
			}
		default:
			if p.Kind == messages.InterruptChoice {
				add(noteInfo, "%s: declined", label)
				break
			}
			add(noteInfo, "%s: %s", label, past(p.Decision))
		}
	case *messages.InterruptExpiredPayload:
		label := r.closeInterrupt(p.InterruptID, p.Kind, env.AgentID)
		switch p.Kind {
		case messages.InterruptInfoRequest:
			add(noteWarn, "%s timed out: no answer", label)
		case messages.InterruptChoice:
			add(noteWarn, "%s timed out: nothing chosen", label)
		default:
			add(noteWarn, "%s timed out: %s", label, past(p.Action))
		}
	case *messages.RunFinishedPayload:
		r.phase, r.term, r.usage = "finished", env, p.Usage
	case *messages.RunErrorPayload:
		r.phase, r.term, r.usage = "failed: "+string(p.Code), env, p.Usage
	case *messages.RunCostEstimatePayload:
		add(noteInfo, "%s", estimate(p))
	case *messages.TeamStartedPayload:
		add(noteInfo, "team %s: %s", p.TeamID, nodesInWaves(len(p.Plan.Nodes), len(p.Waves)))
	case *messages.SubteamSpawnedPayload:
		r.phase = "sub-team"
		add(noteInfo, "%s spawned sub-team %s (%s), from wave %d", p.ParentNodeID, p.TeamID, p.ChildGraphSummary, p.AppliedAtWave)
	case *messages.SteeringReceivedPayload:
		add(noteInfo, "steering %s received: %s", p.SteeringID, shorten(p.Note))
	case *messages.SteeringAppliedPayload:
		add(noteOK, "steering %s applied at wave %d: %s now", p.SteeringID, p.AppliedAtWave, nodesInWaves(len(p.Plan.Nodes), len(p.Waves)))
	case *messages.SteeringRejectedPayload:
		add(noteWarn, "steering %s rejected: %s", p.SteeringID, p.Error)
	case *messages.DebateRoundStartedPayload:
		add(noteInfo, "debate %s round %d", p.NodeID, p.Round)
	case *messages.DebateRoundRestartedPayload:
		add(noteWarn, "debate %s round %d starts again (attempt %d): %s", p.NodeID, p.Round, p.Attempt, p.Reason)
	case *messages.DebateJudgeSummaryPayload:
		add(noteInfo, "debate %s judge, round %d: consensus %t, stop %t", p.NodeID, p.Round, p.Consensus, p.EarlyStop)
	case *messages.DebateStanceMapPayload:
		parts := make([]string, len(p.Stances))
		for i, st := range p.Stances {
			parts[i] = st.AgentID + " " + string(st.Stance)
		}
		add(noteInfo, "debate %s stances after %d rounds: %s", p.NodeID, p.Rounds, strings.Join(parts, ", "))
	case *messages.DissentPayload:
		add(noteWarn, "dissent of %s in %s: %s", p.DissentingAgentID, p.ConflictID, shorten(p.Position))
	case *messages.AdvisorPayload:
		kind := noteInfo
		if p.Kind != messages.AdvisorContinue {
			kind = noteWarn
		}
		// gate_redirect reads as "redirect"; an empty detail adds nothing.
		add(kind, "advisor on %s: %s", env.AgentID, joinNonEmpty(" ", strings.TrimPrefix(string(p.Kind), "gate_"), shorten(p.Detail)))
	case *messages.EscalationPayload:
		add(noteBad, "escalation from %s: %s", env.AgentID, p.Reason)
	}
	return dst
}

// closeInterrupt forgets an open interrupt and returns its label.
func (r *renderer) closeInterrupt(id string, kind messages.InterruptKind, agent string) string {
	label, ok := r.interrupts[id]
	if !ok { // raised before we were watching
		label = interruptLabel(&messages.InterruptRaisedPayload{Kind: kind, NodeID: agent}, agent)
	}
	delete(r.interrupts, id)
	delete(r.answered, id)
	if i := slices.Index(r.waiting, id); i >= 0 {
		r.waiting = slices.Delete(r.waiting, i, i+1)
	}
	return label
}

// interruptLabel says in a few words what an interrupt of agent asks for.
func interruptLabel(p *messages.InterruptRaisedPayload, agent string) string {
	switch p.Kind {
	case messages.InterruptToolApproval:
		if p.ToolName == "" {
			return "tool approval for " + agent
		}
		return fmt.Sprintf("tool approval for %s (%s)", agent, p.ToolName)
	case messages.InterruptInfoRequest:
		return "question from " + agent
	case messages.InterruptChoice:
		return "choice from " + agent
	case messages.InterruptPlanApproval:
		return "plan approval"
	case messages.InterruptNodeApproval:
		return "approval to start node " + p.NodeID
	}
	return fmt.Sprintf("%s for %s", p.Kind, agent)
}

// Status returns a snapshot for the live status block.
func (r *renderer) Status() status {
	st := status{Phase: r.phase, Usage: r.usage, Spend: spend(r.usage, r.cost, r.costUnknown, r.budget), Waves: make([]waveCounts, len(r.waves))}
	for _, id := range r.waiting {
		switch {
		case r.answered[id]:
		case id == r.asking:
			st.Waiting = slices.Insert(st.Waiting, 0, r.interrupts[id])
		default:
			st.Waiting = append(st.Waiting, r.interrupts[id])
		}
	}
	for _, t := range r.tools {
		st.Tools = append(st.Tools, t.text)
	}
	for w, nodes := range r.waves {
		c := &st.Waves[w]
		c.Wave = w
		for _, n := range nodes {
			switch n.status {
			case nodePending:
				c.Pending++
			case nodeRunning:
				c.Running++
			case nodeCompleted:
				c.Completed++
			case nodeFailed:
				c.Failed++
			case nodeCancelled:
				c.Cancelled++
			case nodeSkipped:
				c.Skipped++
			}
		}
	}
	return st
}

// setTool records the latest progress of call on lane ("": the call
// ended).
func (r *renderer) setTool(lane messages.StreamID, call, text string) {
	i := slices.IndexFunc(r.tools, func(t toolLine) bool { return t.lane == lane && t.call == call })
	switch {
	case i >= 0 && text == "":
		r.tools = slices.Delete(r.tools, i, i+1)
	case i >= 0:
		r.tools[i].text = text
	case text != "":
		r.tools = append(r.tools, toolLine{lane: lane, call: call, text: text})
	}
}

// toolProgressLine is a progress report for people: "n001 search
// [######----] 2/3 reading source 2 of 3"; without a total, "n001 search
// 2 …" and no bar.
func toolProgressLine(agent string, p *messages.ToolCallProgressPayload) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s ", agent, p.Tool)
	if p.Total > 0 {
		const cells = 10
		done := int(min(max(p.Progress/p.Total, 0), 1) * cells)
		fmt.Fprintf(&b, "[%s%s] %g/%g", strings.Repeat("#", done), strings.Repeat("-", cells-done), p.Progress, p.Total)
	} else {
		fmt.Fprintf(&b, "%g", p.Progress)
	}
	if p.Message != "" {
		b.WriteString(" " + p.Message)
	}
	return b.String()
}

func (r *renderer) wrote(f writtenFile) {
	if i, ok := r.filesByAt[f.path]; ok {
		r.files[i] = f
		return
	}
	if r.filesByAt == nil {
		r.filesByAt = map[string]int{}
	}
	r.filesByAt[f.path] = len(r.files)
	r.files = append(r.files, f)
}

// Summary returns the closing lines: the answer of run_finished, or the
// code and message of run_error; then the files the run's agents wrote.
func (r *renderer) Summary() []note {
	if r.term == nil {
		return []note{{noteBad, "the run did not end"}}
	}
	return append(r.ending(), r.filesWritten()...)
}

// filesWritten lists the files the run wrote, with their sizes and
// writers, and the terminal event's files_bytes (every write counted).
func (r *renderer) filesWritten() []note {
	if len(r.files) == 0 {
		return nil
	}
	var total int64
	switch p := r.term.Payload.(type) {
	case *messages.RunFinishedPayload:
		total = p.FilesBytes
	case *messages.RunErrorPayload:
		total = p.FilesBytes
	}
	out := []note{{noteInfo, fmt.Sprintf("files written: %d (%d bytes written in all)", len(r.files), total)}}
	width := 0
	for _, f := range r.files {
		width = max(width, len(f.path))
	}
	for _, f := range r.files {
		out = append(out, note{noteInfo, fmt.Sprintf("  %-*s %8d bytes  by %s", width, f.path, f.size, f.agent)})
	}
	return out
}

// ending is the summary's lines about how the run ended.
func (r *renderer) ending() []note {
	switch p := r.term.Payload.(type) {
	case *messages.RunFinishedPayload:
		out := []note{{noteInfo, ""}, {noteInfo, strings.TrimSpace(p.Answer)}, {noteInfo, ""}}
		if p.Sources != "" {
			out = append(out, note{noteInfo, strings.TrimSpace(p.Sources)}, note{noteInfo, ""})
		}
		if p.Nodes.Total > 0 && p.Nodes.Completed == 0 {
			// The engine let the synthesiser answer from nothing; say so
			// (docs: such a run is meant to end with run_error
			// no_nodes_completed instead).
			out = append(out, note{noteWarn, fmt.Sprintf("no node completed (%s): the answer has no input",
				counts(p.Nodes.Completed, p.Nodes.Failed, p.Nodes.Cancelled, p.Nodes.Skipped))})
		}
		return append(out,
			note{noteOK, fmt.Sprintf("run finished in %s: %d/%d nodes completed, %s",
				ms(p.DurationMS), p.Nodes.Completed, p.Nodes.Total, usage(p.Usage))})
	case *messages.RunErrorPayload:
		n := p.Nodes
		out := []note{{noteBad, fmt.Sprintf("run failed (%s): %s", p.Code, p.Message)}}
		if p.Code == messages.ErrCodeNoNodesCompleted {
			out = append(out, note{noteInfo, "no node of the plan completed (each was rejected, skipped, cancelled or failed), so nothing was synthesised"})
		}
		return append(out, note{noteInfo, fmt.Sprintf("after %s, %d nodes: %s; %s", ms(p.DurationMS), n.Total,
			counts(n.Completed, n.Failed, n.Cancelled, n.Skipped), usage(p.Usage))})
	}
	return nil
}

// spend is the run's spend against its budget for the status line:
// "budget 1234 of 5000 tokens, $0.0123 of $1.00", "$0.0123" without a
// budget, "cost unknown" once a model without a price was used, "" when
// there is nothing to say (no budget, no priced turn: the scripted model).
func spend(u messages.Usage, cost float64, unknown bool, b *messages.RunBudget) string {
	costText := fmt.Sprintf("$%.2f", cost)
	if cost != 0 && cost < 0.01 {
		costText = fmt.Sprintf("$%.4f", cost)
	}
	if unknown {
		costText = "cost unknown"
	}
	if b == nil {
		if unknown || cost == 0 {
			return ""
		}
		return costText
	}
	var parts []string
	if b.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d tokens", u.InputTokens+u.OutputTokens, b.Tokens))
	}
	if b.CostUSD > 0 {
		if !unknown {
			costText += fmt.Sprintf(" of $%.2f", b.CostUSD)
		}
		parts = append(parts, costText)
	} else if !unknown && cost > 0 {
		parts = append(parts, costText)
	}
	return "budget " + strings.Join(parts, ", ")
}

// usage says what the run's model turns used, as the status line does.
func usage(u messages.Usage) string {
	return fmt.Sprintf("%d tokens in, %d out", u.InputTokens, u.OutputTokens)
}

// estimate is the run_cost_estimate line. The engine's estimate is a
// real model's (a fixed number of tokens per agent at a fixed pace): the
// line says so, since the scripted model is far faster.
func estimate(p *messages.RunCostEstimatePayload) string {
	s := fmt.Sprintf("estimate for a real model: %d agents, about %d tokens, about %s", p.NodeCount, p.EstTokens,
		time.Duration(p.EstWallSeconds)*time.Second)
	if p.NodeCount > 0 && p.EstWallSeconds > 0 {
		s += fmt.Sprintf(" (%d tokens per agent at %d tokens/s; the scripted model is faster)",
			p.EstTokens/int64(p.NodeCount), p.EstTokens/p.EstWallSeconds)
	}
	return s
}

// joinNonEmpty joins the parts that are not empty.
func joinNonEmpty(sep string, parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), sep)
}

func counts(completed, failed, cancelled, skipped int) string {
	return fmt.Sprintf("%d completed, %d failed, %d cancelled, %d skipped", completed, failed, cancelled, skipped)
}

func ms(v int64) time.Duration {
	return (time.Duration(v) * time.Millisecond).Round(time.Millisecond)
}

// plural is "1 node", "2 nodes".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// nodesInWaves is "1 node in 1 wave", "3 nodes in 2 waves".
func nodesInWaves(nodes, waves int) string {
	return plural(nodes, "node", "nodes") + " in " + plural(waves, "wave", "waves")
}
