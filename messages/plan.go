package messages

import "slices"

// Plan is the director's task graph: nodes and their dependencies. It is
// validated (ids, unknown dependencies, cycles, team depth and size, debate
// settings) before anything runs; see actors/dag.
type Plan struct {
	Nodes []PlanNode `json:"nodes"`
}

// NodeKind says how a plan node does its work.
type NodeKind string

// Node kinds. The empty kind is a leaf.
const (
	// KindLeaf is one worker agent (the default).
	KindLeaf NodeKind = "leaf"
	// KindTeam runs the nested plan in Team as its own waves, one level
	// deeper, and passes the team's compacted synthesis downstream.
	KindTeam NodeKind = "team"
	// KindDebate has the agents of Debate argue in rounds; the debate's
	// synthesis is the node's output.
	KindDebate NodeKind = "debate"
)

// PlanNode is one unit of work in a plan.
//
// Ids are unique within their plan and never contain '/': inside a team
// the runtime names node X of team T "T/X", so ids stay unique in the run.
type PlanNode struct {
	ID    string   `json:"id"`
	Goal  string   `json:"goal"`
	Deps  []string `json:"deps,omitempty"`
	Tools []string `json:"tools,omitempty"`
	// Kind is leaf when empty.
	Kind NodeKind `json:"kind,omitempty"`
	// Role is the specialist role the node's agent plays (free text).
	Role string `json:"role,omitempty"`
	// Team is the nested plan of a team node.
	Team *Plan `json:"team,omitempty"`
	// Debate configures a debate node.
	Debate *DebateConfig `json:"debate,omitempty"`
	// Agent names a remote A2A agent the operator registered (serve
	// --a2a-agent): the node is that agent's task, not a model's; its
	// tools are not used.
	Agent string `json:"agent,omitempty"`
}

// IsTeam reports whether n is a team node.
func (n *PlanNode) IsTeam() bool { return n.Kind == KindTeam }

// IsDebate reports whether n is a debate node.
func (n *PlanNode) IsDebate() bool { return n.Kind == KindDebate }

// DebateConfig is how a debate node runs: every agent speaks once per
// round, in order; an optional judge may end the debate early on consensus
// once MinRounds rounds are done; rounds older than the last CompactAfter
// are compacted in the agents' context.
type DebateConfig struct {
	Agents []DebateAgent `json:"agents"`
	Rounds int           `json:"rounds"`
	Judge  bool          `json:"judge,omitempty"`
	// MinRounds is the first round after which the judge may stop the
	// debate (default 1).
	MinRounds int `json:"min_rounds,omitempty"`
	// CompactAfter: once more than this many rounds are done, the older
	// rounds are compacted (debate_round_compacted). Default 3.
	CompactAfter int `json:"compact_after,omitempty"`
	// Tools are the tools every debater may call during its turns: a turn
	// with calls runs them on the debater's turn lane (tool_call_started,
	// tool_call_finished, approvals under hitl tools) and goes on with
	// their results until the debater answers. None: debaters have no
	// tools, and a turn with calls fails the debate.
	Tools []string `json:"tools,omitempty"`
}

// DebateAgent is one participant of a debate.
type DebateAgent struct {
	ID      string `json:"id"`
	Persona string `json:"persona,omitempty"`
	// Name, Color (#rrggbb) and Contentiousness (0..1) are how a UI shows
	// the agent and how boldly it argues; Display fills what is left out.
	Name            string   `json:"name,omitempty"`
	Color           string   `json:"color,omitempty"`
	Contentiousness *float64 `json:"contentiousness,omitempty"`
}

// debateColors are the default colours of a debate's agents, by position.
var debateColors = [MaxDebateAgents]string{"#4e79a7", "#e15759", "#59a14f", "#b07aa1"}

// DefaultContentiousness is a debater's when its agent sets none.
const DefaultContentiousness = 0.7

// Display is how the i-th agent of a debate is shown: its name (the
// persona, else the id), its colour (a palette colour by position) and its
// contentiousness (DefaultContentiousness), where the agent sets none.
func (a DebateAgent) Display(i int) (name, color string, contentiousness float64) {
	name, color, contentiousness = a.Name, a.Color, DefaultContentiousness
	if name == "" {
		name = a.Persona
	}
	if name == "" {
		name = a.ID
	}
	if color == "" {
		color = debateColors[i%len(debateColors)]
	}
	if a.Contentiousness != nil {
		contentiousness = *a.Contentiousness
	}
	return name, color, contentiousness
}

// Debate defaults and limits.
const (
	DefaultDebateCompactAfter = 3
	MaxDebateAgents           = 4
	MaxDebateRounds           = 5
)

// EffectiveMinRounds is MinRounds, or 1 when unset.
func (d *DebateConfig) EffectiveMinRounds() int { return max(d.MinRounds, 1) }

// EffectiveCompactAfter is CompactAfter, or DefaultDebateCompactAfter when unset.
func (d *DebateConfig) EffectiveCompactAfter() int {
	if d.CompactAfter <= 0 {
		return DefaultDebateCompactAfter
	}
	return d.CompactAfter
}

// Stance is how a debating agent's position ended up.
type Stance string

// Stances.
const (
	StanceHeld     Stance = "held"
	StanceShifted  Stance = "shifted"
	StanceConceded Stance = "conceded"
)

// AgentStance is one agent's final stance in a debate.
type AgentStance struct {
	AgentID string `json:"agent_id"`
	Stance  Stance `json:"stance"`
}

// Clone returns a deep copy of p: nested team plans and debate settings
// included, nil and empty slices kept apart; nothing is shared with p.
func (p Plan) Clone() Plan {
	var q Plan
	if p.Nodes != nil {
		q.Nodes = make([]PlanNode, len(p.Nodes))
		for i := range p.Nodes {
			q.Nodes[i] = p.Nodes[i].Clone()
		}
	}
	return q
}

// Clone returns a deep copy of n (see Plan.Clone).
func (n PlanNode) Clone() PlanNode {
	n.Deps = slices.Clone(n.Deps)
	n.Tools = slices.Clone(n.Tools)
	if n.Team != nil {
		team := n.Team.Clone()
		n.Team = &team
	}
	if n.Debate != nil {
		debate := *n.Debate
		debate.Agents = slices.Clone(debate.Agents)
		n.Debate = &debate
	}
	return n
}
