package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// Scenario drives the scripted model: the shape of the plan and how every
// agent behaves. The same scenario and seed always produce the same events
// per lane (and the same total order with concurrency 1). Every field is
// documented in the README; DefaultScenario says which zero fields take a
// default.
type Scenario struct {
	// Nodes is the number of council worker nodes in the plan.
	Nodes int `json:"nodes,omitempty"`
	// Waves is the number of dependency levels the nodes are spread over.
	Waves int `json:"waves,omitempty"`
	// FanIn is how many nodes of the previous wave each node depends on (at most).
	FanIn int `json:"fan_in,omitempty"`
	// Tokens is the number of text_delta events each worker node streams.
	Tokens int `json:"tokens,omitempty"`
	// ReasoningTokens is the number of reasoning_delta events per worker node.
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
	// PrefillProgress is how many prompt-progress reports (node_progress,
	// synthesis_progress) each worker and synthesiser turn streams before
	// its first token, as a local model's server reports reading a long
	// prompt. 0: none.
	PrefillProgress int `json:"prefill_progress,omitempty"`
	// SynthesisTokens is the number of text_delta events of the synthesiser.
	SynthesisTokens int `json:"synthesis_tokens,omitempty"`
	// TokenDelayMS is the delay before each streamed token, in milliseconds.
	TokenDelayMS int `json:"token_delay_ms,omitempty"`
	// ToolsPerNode is the number of tool calls each worker node makes.
	ToolsPerNode int `json:"tools_per_node,omitempty"`
	// ToolProgressSteps makes each of the ToolsPerNode search calls
	// report its progress this many times (step i of n, tool_call_progress),
	// ToolStepMS milliseconds apart. 0: no reports.
	ToolProgressSteps int `json:"tool_progress_steps,omitempty"`
	ToolStepMS        int `json:"tool_step_ms,omitempty"`
	// SubagentsPerNode is the number of sub-agents each worker node delegates to.
	SubagentsPerNode int `json:"subagents_per_node,omitempty"`
	// FailNodes fail with a model error halfway through their output.
	FailNodes NodeSelector `json:"fail_nodes,omitzero"`
	// PanicNodes panic halfway through their output on their first
	// PanicAttempts attempts; the supervisor restarts them.
	PanicNodes NodeSelector `json:"panic_nodes,omitzero"`
	// PanicAttempts is how many attempts of a panic node panic (default 1).
	PanicAttempts int `json:"panic_attempts,omitempty"`
	// TransientNodes fail halfway through their output with a transient
	// model error (model.ErrTransient: a rate limit) on their first
	// TransientAttempts attempts; the supervisor restarts them after a
	// growing backoff, or fails them past its restart limit.
	TransientNodes    NodeSelector `json:"transient_nodes,omitzero"`
	TransientAttempts int          `json:"transient_attempts,omitempty"`
	// PanicMembers are team members ("n001/m2") and debate agents
	// ("n003:a2") that panic on their first PanicAttempts attempts: a
	// member after its first Text chunk, a debate agent in its round-1
	// turn. What restarts then is the supervision's choice (all-for-one:
	// the whole team, or the whole round).
	PanicMembers []string `json:"panic_members,omitempty"`
	// Approvals adds this many search tool calls to the run, one per worker
	// node in id order (wrapping around), so that a run with hitl "tools"
	// makes exactly this many approval-gated calls when ToolsPerNode and
	// SubagentsPerNode are 0.
	Approvals int `json:"approvals,omitempty"`
	// RiskyApprovals makes this many of the Approvals calls high-risk:
	// they call the publish tool (risk high) instead of search, spread
	// over the worker nodes as Approvals are (governance).
	RiskyApprovals int `json:"risky_approvals,omitempty"`
	// InfoRequests adds this many ask_human tool calls, one per worker node
	// in id order (wrapping around); each raises an info_request interrupt.
	InfoRequests int `json:"info_requests,omitempty"`
	// Choices adds this many ask_choice tool calls, dealt to the worker
	// nodes as InfoRequests are; each raises a choice interrupt offering
	// three options (broad, deep, skip).
	Choices int `json:"choices,omitempty"`
	// MultipleChoice makes the Choices multiple choices.
	MultipleChoice bool `json:"multiple_choice,omitempty"`
	// Teams makes this many nodes team nodes: the first Teams nodes of the
	// plan in id order, each with a nested plan of TeamSize nodes.
	Teams int `json:"teams,omitempty"`
	// TeamSize is the number of nodes in a team's nested plan (default 3).
	TeamSize int `json:"team_size,omitempty"`
	// Debate makes the nodes after the team nodes debate nodes.
	Debate *DebateScenario `json:"debate,omitempty"`
	// Spawn selects the worker nodes that request a sub-team through the
	// spawn_subteam tool (roles "researcher" and "critic").
	Spawn NodeSelector `json:"spawn,omitzero"`
	// Steering notes are posted to the run when their wave starts, as a
	// human would; they apply at the next wave boundary.
	Steering []SteeringScript `json:"steering,omitempty"`
	// Advisor scripts the advisor's answers (the advisor itself is a run
	// option, StartRun.Advisor).
	Advisor *AdvisorScenario `json:"advisor,omitempty"`
	// Delegations scripts async delegation and deep delegation chains.
	Delegations *DelegationScenario `json:"delegations,omitempty"`
	// Calls names tools of the engine (an MCP server's "everything.echo",
	// or "search") that every worker node calls once each, in this order,
	// after its other calls of its first turn, with arguments the scripted
	// model makes up to satisfy the tool's JSON Schema (deterministic by
	// the seed). The engine refuses a run naming a tool it does not have.
	Calls []string `json:"calls,omitempty"`
	// Remote makes the nodes it selects remote-agent nodes: their plan
	// node names the remote A2A agent Remote.Agent (PlanNode.Agent) and
	// no tools.
	Remote *RemoteScenario `json:"remote,omitempty"`
	// Seed makes the run reproducible.
	Seed int64 `json:"seed,omitempty"`
}

// RemoteScenario selects the plan's nodes that a remote agent runs.
type RemoteScenario struct {
	// Agent is the registered name of the remote agent (serve --a2a-agent).
	Agent string `json:"agent"`
	// Nodes selects the leaf nodes it runs (ids, or a fraction).
	Nodes NodeSelector `json:"nodes,omitzero"`
	// Delegate makes every worker's delegate calls (SubagentsPerNode)
	// name the agent: their tasks are its, not sub-agents'.
	Delegate bool `json:"delegate,omitempty"`
}

// DebateScenario shapes the scripted debate nodes. Agent k (1-based) of a
// debate declares its stance from round 2 on: agents 2 and 6 shift, agent
// 3 concedes, the others hold.
type DebateScenario struct {
	// Nodes is the number of debate nodes (default 1).
	Nodes int `json:"nodes,omitempty"`
	// Agents per debate (default 3, 2..4).
	Agents int `json:"agents,omitempty"`
	// Rounds per debate (default 3, 1..5).
	Rounds int `json:"rounds,omitempty"`
	// Judge adds a judge after every round.
	Judge bool `json:"judge,omitempty"`
	// MinRounds is the debate's min_rounds (early stop from this round on).
	MinRounds int `json:"min_rounds,omitempty"`
	// ConsensusRound is the first round whose judge reports consensus
	// (0 = never).
	ConsensusRound int `json:"consensus_round,omitempty"`
	// CompactAfter is the debate's compact_after.
	CompactAfter int `json:"compact_after,omitempty"`
	// Tools are the debaters' tools (DebateConfig.Tools): each scripted
	// debater calls every one of them once in each of its turns, with
	// arguments made up from its schema, before it argues.
	Tools []string `json:"tools,omitempty"`
	// PanicRound: in this round, the last agent's turn panics on the
	// round's first run, so the round restarts from its first speaker
	// (debate_round_restarted). 0: none.
	PanicRound int `json:"panic_round,omitempty"`
}

// SteeringScript is one steering note of a scenario.
type SteeringScript struct {
	// AtWave is the 0-based wave whose start posts the note.
	AtWave int    `json:"at_wave"`
	Note   string `json:"note"`
	// Diff is what the scripted model turns the note into; without it, the
	// model adds one leaf node with the note as its goal.
	Diff *GraphDiff `json:"diff,omitempty"`
}

// AdvisorScenario scripts the advisor: it redirects every checked agent
// Redirects times, then halts the Halt nodes, answers the Malformed nodes
// with text that is no signal, and lets the others continue.
type AdvisorScenario struct {
	// Consults: every worker calls consult_advisor this many times in its
	// first turn (the run's advisor must be in consult mode for them to
	// be answered).
	Consults  int          `json:"consults,omitempty"`
	Redirects int          `json:"redirects,omitempty"`
	Halt      NodeSelector `json:"halt,omitzero"`
	Malformed NodeSelector `json:"malformed,omitzero"`
}

// DelegationScenario scripts delegation.
type DelegationScenario struct {
	// Async is the number of async tasks each worker starts in its first
	// turn; in its second turn it updates the first, checks and lists them,
	// and cancels the last (when there are two or more); its third turn
	// collects the results.
	Async int `json:"async,omitempty"`
	// Depth: every sub-agent at delegation round < Depth delegates once
	// more, so chains reach round Depth (0 = sub-agents do not delegate).
	Depth int `json:"depth,omitempty"`
}

// Scenario limits, checked by Validate.
const (
	MaxNodes           = 100_000
	MaxTokens          = 1_000_000
	MaxPrefillProgress = 16
	MaxTokenDelayMS    = 60_000
	MaxToolsPerNode    = 100
	// MaxToolProgressSteps bounds ToolProgressSteps (the search tool's
	// schema says the same of its steps argument).
	MaxToolProgressSteps = 100
	MaxSubagents         = 100
	MaxFanIn             = 64
	// MaxTeamSize bounds the nodes of one team's nested plan (and of any
	// subgraph below the top-level plan).
	MaxTeamSize      = 16
	MaxSteeringNotes = 64
	// MaxScenarioCalls bounds Calls.
	MaxScenarioCalls = 32
	// MaxPanicMembers bounds PanicMembers.
	MaxPanicMembers = 64
)

// toolName is what a tool name may be (tool.Def's rule: the tool
// package, which imports this one, checks the same).
var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// memberID is what a PanicMembers entry may be: a node id with one or
// more "/member" segments (nested teams too), or a node id and ":agent".
var memberID = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}(/[A-Za-z0-9_.-]{1,64})*(/[A-Za-z0-9_.-]{1,64}|:[A-Za-z0-9_.-]{1,64})$`)

// DefaultScenario is what an empty scenario means. Only the fields set here
// have defaults; every other field's zero value means zero (no reasoning, no
// tools, no sub-agents, no delay, no failures, seed 0).
func DefaultScenario() Scenario {
	return Scenario{Nodes: 6, Waves: 3, FanIn: 2, Tokens: 24, SynthesisTokens: 32, PanicAttempts: 1}
}

// WithDefaults fills the zero fields that DefaultScenario sets. Waves
// defaults to min(3, Nodes).
func (s Scenario) WithDefaults() Scenario {
	d := DefaultScenario()
	if s.Nodes == 0 {
		s.Nodes = d.Nodes
		if s.Waves == 0 {
			s.Waves = d.Waves
		}
	}
	if s.Waves == 0 {
		s.Waves = min(d.Waves, s.Nodes)
	}
	if s.FanIn == 0 {
		s.FanIn = d.FanIn
	}
	if s.Tokens == 0 {
		s.Tokens = d.Tokens
	}
	if s.SynthesisTokens == 0 {
		s.SynthesisTokens = d.SynthesisTokens
	}
	if s.PanicAttempts == 0 {
		s.PanicAttempts = d.PanicAttempts
	}
	if !s.TransientNodes.IsZero() && s.TransientAttempts == 0 {
		s.TransientAttempts = 1
	}
	if s.Teams > 0 && s.TeamSize == 0 {
		s.TeamSize = 3
	}
	if d := s.Debate; d != nil {
		c := *d
		if c.Nodes == 0 {
			c.Nodes = 1
		}
		if c.Agents == 0 {
			c.Agents = 3
		}
		if c.Rounds == 0 {
			c.Rounds = 3
		}
		s.Debate = &c
	}
	return s
}

// Validate checks ranges; call it after WithDefaults.
func (s Scenario) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(s.Nodes >= 1 && s.Nodes <= MaxNodes, "nodes must be in 1..%d, got %d", MaxNodes, s.Nodes)
	check(s.Waves >= 1 && s.Waves <= s.Nodes, "waves must be in 1..nodes (%d), got %d", s.Nodes, s.Waves)
	check(s.FanIn >= 1 && s.FanIn <= MaxFanIn, "fan_in must be in 1..%d, got %d", MaxFanIn, s.FanIn)
	for name, v := range map[string]int{"tokens": s.Tokens, "reasoning_tokens": s.ReasoningTokens, "synthesis_tokens": s.SynthesisTokens} {
		check(v >= 0 && v <= MaxTokens, "%s must be in 0..%d, got %d", name, MaxTokens, v)
	}
	check(s.PrefillProgress >= 0 && s.PrefillProgress <= MaxPrefillProgress, "prefill_progress must be in 0..%d, got %d", MaxPrefillProgress, s.PrefillProgress)
	check(s.TokenDelayMS >= 0 && s.TokenDelayMS <= MaxTokenDelayMS, "token_delay_ms must be in 0..%d, got %d", MaxTokenDelayMS, s.TokenDelayMS)
	check(s.ToolsPerNode >= 0 && s.ToolsPerNode <= MaxToolsPerNode, "tools_per_node must be in 0..%d, got %d", MaxToolsPerNode, s.ToolsPerNode)
	check(s.ToolProgressSteps >= 0 && s.ToolProgressSteps <= MaxToolProgressSteps, "tool_progress_steps must be in 0..%d, got %d", MaxToolProgressSteps, s.ToolProgressSteps)
	check(s.ToolStepMS >= 0 && s.ToolStepMS <= MaxTokenDelayMS, "tool_step_ms must be in 0..%d, got %d", MaxTokenDelayMS, s.ToolStepMS)
	check(s.SubagentsPerNode >= 0 && s.SubagentsPerNode <= MaxSubagents, "subagents_per_node must be in 0..%d, got %d", MaxSubagents, s.SubagentsPerNode)
	check(s.PanicAttempts >= 1 && s.PanicAttempts <= 100, "panic_attempts must be in 1..100, got %d", s.PanicAttempts)
	check(s.Approvals >= 0 && s.Approvals <= MaxNodes, "approvals must be in 0..%d, got %d", MaxNodes, s.Approvals)
	check(s.RiskyApprovals >= 0 && s.RiskyApprovals <= s.Approvals, "risky_approvals must be in 0..approvals (%d), got %d", s.Approvals, s.RiskyApprovals)
	check(s.InfoRequests >= 0 && s.InfoRequests <= MaxNodes, "info_requests must be in 0..%d, got %d", MaxNodes, s.InfoRequests)
	check(s.Choices >= 0 && s.Choices <= MaxNodes, "choices must be in 0..%d, got %d", MaxNodes, s.Choices)
	check(s.Teams >= 0 && s.Teams <= s.Nodes, "teams must be in 0..nodes (%d), got %d", s.Nodes, s.Teams)
	check(s.TeamSize >= 0 && s.TeamSize <= MaxTeamSize, "team_size must be in 0..%d, got %d", MaxTeamSize, s.TeamSize)
	check(len(s.PanicMembers) <= MaxPanicMembers, "panic_members must have at most %d ids, got %d", MaxPanicMembers, len(s.PanicMembers))
	for i, id := range s.PanicMembers {
		check(memberID.MatchString(id), "panic_members[%d] must be a team member id (n001/m2) or a debate agent id (n003:a2), got %q", i, truncate(id, 64))
	}
	if d := s.Debate; d != nil {
		check(d.Nodes >= 0 && s.Teams+d.Nodes <= s.Nodes, "debate.nodes plus teams must be at most nodes (%d)", s.Nodes)
		check(d.Agents == 0 || d.Agents >= 2 && d.Agents <= MaxDebateAgents, "debate.agents must be in 2..%d, got %d", MaxDebateAgents, d.Agents)
		check(d.Rounds >= 0 && d.Rounds <= MaxDebateRounds, "debate.rounds must be in 1..%d, got %d", MaxDebateRounds, d.Rounds)
		check(d.MinRounds >= 0 && d.MinRounds <= MaxDebateRounds, "debate.min_rounds must be in 0..%d, got %d", MaxDebateRounds, d.MinRounds)
		check(d.ConsensusRound >= 0 && d.ConsensusRound <= MaxDebateRounds, "debate.consensus_round must be in 0..%d, got %d", MaxDebateRounds, d.ConsensusRound)
		check(d.CompactAfter >= 0 && d.CompactAfter <= MaxDebateRounds, "debate.compact_after must be in 0..%d, got %d", MaxDebateRounds, d.CompactAfter)
		check(d.PanicRound >= 0 && d.PanicRound <= MaxDebateRounds, "debate.panic_round must be in 0..%d, got %d", MaxDebateRounds, d.PanicRound)
	}
	check(len(s.Steering) <= MaxSteeringNotes, "steering may hold at most %d notes, got %d", MaxSteeringNotes, len(s.Steering))
	for i, st := range s.Steering {
		check(st.AtWave >= 0 && st.AtWave < s.Waves, "steering[%d].at_wave must be in 0..waves-1 (%d), got %d", i, s.Waves-1, st.AtWave)
		check(st.Note != "" && len(st.Note) <= MaxSteerNoteBytes, "steering[%d].note must be 1..%d bytes", i, MaxSteerNoteBytes)
	}
	if a := s.Advisor; a != nil {
		check(a.Redirects >= 0 && a.Redirects <= MaxAdvisorRedirects+1, "advisor.redirects must be in 0..%d, got %d", MaxAdvisorRedirects+1, a.Redirects)
		check(a.Consults >= 0 && a.Consults <= MaxAdvisorConsults+1, "advisor.consults must be in 0..%d, got %d", MaxAdvisorConsults+1, a.Consults)
		for name, sel := range map[string]NodeSelector{"advisor.halt": a.Halt, "advisor.malformed": a.Malformed} {
			if err := sel.validate(name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if d := s.Delegations; d != nil {
		check(d.Async >= 0 && d.Async <= MaxSubagents, "delegations.async must be in 0..%d, got %d", MaxSubagents, d.Async)
		check(d.Depth >= 0 && d.Depth <= 2*MaxMaxDelegationRounds, "delegations.depth must be in 0..%d, got %d", 2*MaxMaxDelegationRounds, d.Depth)
	}
	check(len(s.Calls) <= MaxScenarioCalls, "calls may name at most %d tools, got %d", MaxScenarioCalls, len(s.Calls))
	for i, name := range s.Calls {
		check(toolName.MatchString(name), "calls[%d] must be a tool name (1..64 letters, digits, '_', '-' or '.'), got %q", i, truncate(name, 70))
	}
	if r := s.Remote; r != nil {
		if r.Agent == "" {
			errs = append(errs, errors.New("remote.agent is required"))
		}
		if err := r.Nodes.validate("remote.nodes"); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.Spawn.validate("spawn"); err != nil {
		errs = append(errs, err)
	}
	if err := s.FailNodes.validate("fail_nodes"); err != nil {
		errs = append(errs, err)
	}
	check(s.TransientAttempts >= 0 && s.TransientAttempts <= 100, "transient_attempts must be in 0..100, got %d", s.TransientAttempts)
	if err := s.TransientNodes.validate("transient_nodes"); err != nil {
		errs = append(errs, err)
	}
	if err := s.PanicNodes.validate("panic_nodes"); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("messages: invalid scenario: %w", errors.Join(errs...))
	}
	return nil
}

// MinEvents is a lower bound of the events a run of this scenario (after
// WithDefaults) publishes if every node runs (no human rejects one): the
// streamed tokens of every worker node, team member and the synthesiser. The engine refuses a
// run whose lower bound is over its event budget at once, since it can
// never fit. It is 0 when the scenario can end or shrink the run early (a
// failing node, an advisor halt or malformed answer, a steering note that
// may remove nodes), since then nothing is certain.
func (s Scenario) MinEvents() int64 {
	if !s.FailNodes.IsZero() || len(s.Steering) > 0 ||
		(s.Advisor != nil && (!s.Advisor.Halt.IsZero() || !s.Advisor.Malformed.IsZero())) {
		return 0
	}
	debates := 0
	if s.Debate != nil {
		debates = s.Debate.Nodes // a debate's own token count is not a worker's: counted as none
	}
	workers := int64(s.Nodes-s.Teams-debates) + int64(s.Teams)*int64(s.TeamSize)
	// At most 1e5 workers x 16 x 2e6 tokens: far from overflowing int64.
	return max(workers, 0)*int64(s.Tokens+s.ReasoningTokens) + int64(s.SynthesisTokens)
}

// DecodeScenario strictly decodes a scenario with DecodeStrict (unknown
// fields, trailing data and invalid UTF-8 are errors), applies defaults
// and validates it. It reads r to its end; bounding r is the caller's job.
func DecodeScenario(r io.Reader) (Scenario, error) {
	var s Scenario
	if err := DecodeStrictReader(r, &s); err != nil {
		return Scenario{}, fmt.Errorf("messages: decode scenario: %w", err)
	}
	s = s.WithDefaults()
	return s, s.Validate()
}

// NodeSelector picks nodes either by id or as a fraction of all nodes. In
// JSON it is a list of node ids (["n001","n007"]) or a number in [0, 1]
// (0.05 = 5 % of the nodes, chosen by the seed).
type NodeSelector struct {
	IDs      []string
	Fraction float64
}

// IsZero reports whether the selector selects nothing.
func (s NodeSelector) IsZero() bool { return len(s.IDs) == 0 && s.Fraction == 0 }

func (s NodeSelector) validate(name string) error {
	if s.Fraction < 0 || s.Fraction > 1 {
		return fmt.Errorf("%s fraction must be in [0, 1], got %v", name, s.Fraction)
	}
	return nil
}

// MarshalJSON writes the list form when ids are set, else the fraction.
func (s NodeSelector) MarshalJSON() ([]byte, error) {
	if len(s.IDs) > 0 {
		return json.Marshal(s.IDs)
	}
	return json.Marshal(s.Fraction)
}

// UnmarshalJSON accepts a list of ids or a number.
func (s *NodeSelector) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var ids []string
		if err := json.Unmarshal(b, &ids); err != nil {
			return fmt.Errorf("node selector: %w", err)
		}
		*s = NodeSelector{IDs: ids}
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return errors.New("node selector must be a list of node ids or a fraction in [0, 1]")
	}
	*s = NodeSelector{Fraction: f}
	return nil
}
