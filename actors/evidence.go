package actors

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// Evidence packages: every approval interrupt (tool, plan, node, spawn)
// carries what the human decides on, assembled from the run — the
// agent's reasoning so far, the call and its arguments, the sources it
// drew on, the options with their consequences — and a risk level (the
// tool's; for a plan or a node, the highest of the tools it uses), which
// the governance policy may cover (signing.go).

// Bounds of what an evidence package repeats of the run.
const (
	maxTraceSteps   = 8
	maxTraceStep    = 280
	maxEvidenceArgs = 2 << 10
)

// toolEvidence is the evidence of a tool approval of call c by the agent
// of spec s, who drew on srcs and reasoned reasoning so far.
func (s *agentSpec) toolEvidence(id string, c model.ToolCall, srcs []messages.Citation, reasoning []string) *messages.EvidencePackage {
	risk := s.e.toolRisk(c.Name)
	meta := map[string]string{"tool": c.Name, "arguments": clip(string(c.Args), maxEvidenceArgs)}
	if len(srcs) > 0 {
		meta["sources"] = citationURLs(srcs)
	}
	return &messages.EvidencePackage{
		ID:    id,
		Title: "Run " + c.Name,
		Narrative: fmt.Sprintf("%s (%s) asks to call %s with %s, working on: %s", s.agentID, s.role, c.Name,
			clip(string(c.Args), 200), clip(s.req.Goal, 200)),
		ReasoningTrace: traceSteps(reasoning),
		RecommendedActions: []messages.RecommendedAction{
			{Decision: messages.DecisionApprove, Label: "Run it", Consequences: []string{c.Name + " runs with these arguments; its result goes back to the agent"}},
			{Decision: messages.DecisionRevise, Label: "Run it with edited arguments", Consequences: []string{c.Name + " runs with the arguments you give"}},
			{Decision: messages.DecisionReject, Label: "Refuse", Consequences: []string{c.Name + " does not run; the agent gets an error result and carries on without it"}},
		},
		RiskLevel: risk, SourceAgentID: s.agentID, TaskID: s.taskID(), Metadata: meta,
	}
}

// nodeEvidence is the evidence of a node approval.
func (s *agentSpec) nodeEvidence(id string) *messages.EvidencePackage {
	n := s.node.node
	return &messages.EvidencePackage{
		ID: id, Title: "Start node " + n.ID,
		Narrative:      fmt.Sprintf("Node %s is ready to start: %s", n.ID, clip(n.Goal, 400)),
		ReasoningTrace: traceSteps(s.req.Context),
		RecommendedActions: []messages.RecommendedAction{
			{Decision: messages.DecisionApprove, Label: "Start it", Consequences: []string{"the node runs with tools: " + toolList(n.Tools)}},
			{Decision: messages.DecisionReject, Label: "Skip it", Consequences: []string{"the node is skipped, and so are the nodes that depend on it"}},
		},
		RiskLevel: s.e.toolsRisk(n.Tools), SourceAgentID: s.agentID, TaskID: n.ID,
		Metadata: map[string]string{"tools": toolList(n.Tools), "deps": strings.Join(n.Deps, ",")},
	}
}

// planEvidence is the evidence of the plan gate.
func (pl *runPlanner) planEvidence(id string, plan *messages.Plan, waves [][]string) *messages.EvidencePackage {
	r := pl.r
	var tools []string
	var steps []string
	var walk func(p messages.Plan)
	walk = func(p messages.Plan) {
		for _, n := range p.Nodes {
			tools = append(tools, n.Tools...)
			steps = append(steps, n.ID+": "+n.Goal)
			if n.Team != nil {
				walk(*n.Team)
			}
		}
	}
	walk(*plan)
	// What a rejection does, as decidePlan does it: the director plans
	// again while re-plans are left; else the run ends.
	reject := "the run ends with run_error plan_rejected"
	if r.st.Replans < r.spec.maxReplans {
		reject = fmt.Sprintf("the director plans again, told your reason (re-plan %d of %d); a rejection at the expiry ends the run instead", r.st.Replans+1, r.spec.maxReplans)
	}
	return &messages.EvidencePackage{
		ID: id, Title: "Approve the plan",
		Narrative:      fmt.Sprintf("The director planned %d nodes in %d waves for: %s", len(plan.Nodes), len(waves), clip(r.spec.question, 400)),
		ReasoningTrace: traceSteps(steps),
		RecommendedActions: []messages.RecommendedAction{
			{Decision: messages.DecisionApprove, Label: "Run the plan", Consequences: []string{"the waves start; the nodes use tools: " + toolList(tools)}},
			{Decision: messages.DecisionReject, Label: "Reject the plan", Consequences: []string{reject}},
		},
		RiskLevel: r.e.toolsRisk(tools), SourceAgentID: directorID(pl.directorLane().StreamID), TaskID: string(r.spec.runID),
		Metadata: map[string]string{"nodes": fmt.Sprint(len(plan.Nodes)), "waves": fmt.Sprint(len(waves))},
	}
}

// spawnEvidence is the evidence of a spawn gate.
func (w *graphRunner) spawnEvidence(id string, s *spawnAsk) *messages.EvidencePackage {
	return &messages.EvidencePackage{
		ID: id, Title: "Spawn a sub-team for " + s.parent,
		Narrative:      fmt.Sprintf("%s asks for a sub-team on: %s", s.parent, clip(s.req.Goal, 400)),
		ReasoningTrace: traceSteps(s.req.Roles),
		RecommendedActions: []messages.RecommendedAction{
			{Decision: messages.DecisionApprove, Label: "Spawn it", Consequences: []string{"a team node joins the plan after this wave; the nodes depending on " + s.parent + " wait for it"}},
			{Decision: messages.DecisionReject, Label: "Do not spawn it", Consequences: []string{"the plan stays as it is"}},
		},
		RiskLevel: messages.RiskMedium, SourceAgentID: s.parent, TaskID: s.parent,
		Metadata: map[string]string{"roles": strings.Join(s.req.Roles, ",")},
	}
}

// taskID is what an agent works on: its node's id, or its own.
func (s *agentSpec) taskID() string {
	if s.node != nil {
		return s.node.node.ID
	}
	return s.agentID
}

// toolRisk is a tool's risk level (the runtime's own tools are low).
func (e *Engine) toolRisk(name string) messages.RiskLevel {
	if _, def, ok := e.cfg.Tools.Lookup(name); ok && def.Risk != "" {
		return def.Risk
	}
	return messages.RiskLow
}

// toolsRisk is the highest risk level of the named tools.
func (e *Engine) toolsRisk(names []string) messages.RiskLevel {
	risk := messages.RiskLow
	for _, n := range names {
		if r := e.toolRisk(n); r.AtLeast(risk) {
			risk = r
		}
	}
	return risk
}

// traceSteps compresses texts to at most maxTraceSteps steps (the last
// ones), each clipped: the sentences of the reasoning, most recent last.
func traceSteps(texts []string) []string {
	var steps []string
	for _, t := range texts {
		for _, line := range strings.FieldsFunc(t, func(r rune) bool { return r == '\n' }) {
			if line = strings.TrimSpace(line); line != "" {
				steps = append(steps, clip(line, maxTraceStep))
			}
		}
	}
	if len(steps) > maxTraceSteps {
		steps = append([]string{fmt.Sprintf("[%d earlier steps]", len(steps)-maxTraceSteps+1)}, steps[len(steps)-maxTraceSteps+1:]...)
	}
	if steps == nil {
		steps = []string{}
	}
	return steps
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func toolList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func citationURLs(cs []messages.Citation) string {
	urls := make([]string, 0, len(cs))
	for _, c := range cs {
		urls = append(urls, c.URL)
	}
	return strings.Join(urls, " ")
}
