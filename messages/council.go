package messages

import "time"

// Payloads of the council and delegation events of issue 7: cost, teams,
// sub-team spawn, steering, debates, dissent, the advisor gate and
// citations. The catalogue rows are in types.go.

// RunCostEstimatePayload is a warn-only estimate made right after the plan
// is proposed: 2,000 tokens per model-driven node (team members and debate
// agents count), at 50 tokens a second.
type RunCostEstimatePayload struct {
	NodeCount      int   `json:"node_count"`
	EstTokens      int64 `json:"est_tokens"`
	EstWallSeconds int64 `json:"est_wall_seconds"`
}

// TeamStartedPayload: a team node begins its nested plan. Plan and Waves
// use the nested nodes' run-wide ids ("T/X").
type TeamStartedPayload struct {
	TeamID string     `json:"team_id"`
	Depth  int        `json:"depth"`
	Role   string     `json:"role,omitempty"`
	Plan   Plan       `json:"plan"`
	Waves  [][]string `json:"waves"`
}

// TeamSynthesizedPayload: the team's synthesis, compacted, is the team
// node's output.
type TeamSynthesizedPayload struct {
	TeamID          string `json:"team_id"`
	CompactedOutput string `json:"compacted_output"`
	// Compacted: the synthesis was longer than the compaction limit.
	Compacted bool `json:"compacted"`
}

// SubteamSpawnedPayload: a worker's spawn_subteam request was approved at
// its wave's end; the sub-team joins the plan as team node TeamID that
// depends on the worker, and the worker's dependents also wait for it.
type SubteamSpawnedPayload struct {
	ParentNodeID      string   `json:"parent_node_id"`
	TeamID            string   `json:"team_id"`
	Goal              string   `json:"goal"`
	Roles             []string `json:"roles"`
	ChildGraphSummary string   `json:"child_graph_summary"`
	AppliedAtWave     int      `json:"applied_at_wave"`
	// Plan and Waves are the plan of the graph the worker is in (the run's,
	// or its team's, with run-wide ids) after the sub-team joined it.
	Plan  Plan       `json:"plan"`
	Waves [][]string `json:"waves"`
}

// SteeringReceivedPayload opens a steering lane: a note (or diff) posted to
// the run. A note without a diff is turned into one by the model on this
// lane.
type SteeringReceivedPayload struct {
	SteeringID string     `json:"steering_id"`
	Note       string     `json:"note,omitempty"`
	Diff       *GraphDiff `json:"diff,omitempty"`
}

// SteeringAppliedPayload closes a steering lane: the diff was applied at the
// start of wave AppliedAtWave; Plan and Waves are the run's plan after it.
type SteeringAppliedPayload struct {
	SteeringID    string     `json:"steering_id"`
	Diff          GraphDiff  `json:"diff"`
	AppliedAtWave int        `json:"applied_at_wave"`
	Plan          Plan       `json:"plan"`
	Waves         [][]string `json:"waves"`
}

// SteeringRejectedPayload closes a steering lane without changing the
// plan: the note could not be turned into a valid diff, the diff is
// invalid for the plan at the boundary, or the run ended first.
type SteeringRejectedPayload struct {
	SteeringID string     `json:"steering_id"`
	Diff       *GraphDiff `json:"diff,omitempty"`
	Error      string     `json:"error"`
}

// DebateRoundStartedPayload: round Round (1-based) of a debate begins.
type DebateRoundStartedPayload struct {
	NodeID string `json:"node_id"`
	Round  int    `json:"round"`
}

// DebateTurnStartedPayload opens one agent's turn lane in a round.
type DebateTurnStartedPayload struct {
	NodeID  string `json:"node_id"`
	AgentID string `json:"agent_id"`
	Persona string `json:"persona,omitempty"`
	Round   int    `json:"round"`
	// AgentName, Color (#rrggbb) and Contentiousness (0..1, the sampling
	// temperature the debater's turn asks for): DebateConfig.Display.
	AgentName       string  `json:"agent_name"`
	Color           string  `json:"color"`
	Contentiousness float64 `json:"contentiousness"`
	// Attempt is which run of the round this is, from 2 once it was
	// restarted (debate_round_restarted); absent for the first.
	Attempt int `json:"attempt,omitempty"`
}

// DebateTurnCompletedPayload closes an agent's turn lane with its text and
// the stance it declared.
type DebateTurnCompletedPayload struct {
	NodeID  string `json:"node_id"`
	AgentID string `json:"agent_id"`
	Round   int    `json:"round"`
	Text    string `json:"text"`
	Stance  Stance `json:"stance"`
	// Cancelled: the debate stopped during the turn; Text is empty.
	Cancelled bool `json:"cancelled,omitempty"`
	// Restarted: the turn failed and its round starts again
	// (debate_round_restarted follows); Text is what it said, which counts
	// for nothing.
	Restarted bool `json:"restarted,omitempty"`
	Attempt   int  `json:"attempt,omitempty"`
}

// DebateJudgeStartedPayload opens the judge's lane for a round.
type DebateJudgeStartedPayload struct {
	NodeID  string `json:"node_id"`
	Round   int    `json:"round"`
	Attempt int    `json:"attempt,omitempty"`
}

// DebateJudgeSummaryPayload closes the judge's lane. EarlyStop is true when
// the judge found consensus and the round is at least min_rounds.
type DebateJudgeSummaryPayload struct {
	NodeID     string `json:"node_id"`
	Round      int    `json:"round"`
	Consensus  bool   `json:"consensus"`
	EarlyStop  bool   `json:"early_stop"`
	Assessment string `json:"assessment"`
	// Cancelled: the debate stopped while the judge was working.
	Cancelled bool `json:"cancelled,omitempty"`
	// Restarted: the judge failed and the round starts again.
	Restarted bool `json:"restarted,omitempty"`
	Attempt   int  `json:"attempt,omitempty"`
}

// DebateRoundRestartedPayload: a turn (or the judge) of Round failed, and
// the round starts again from its first speaker: the debaters share the
// round's transcript, so they restart together (all-for-one), on the lanes
// of the round's Attempt (messages.DebateTurnStreamAt).
type DebateRoundRestartedPayload struct {
	NodeID  string `json:"node_id"`
	Round   int    `json:"round"`
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason"`
}

// DebateRoundCompactedPayload: an old round's transcript was replaced by
// Summary in the agents' context.
type DebateRoundCompactedPayload struct {
	NodeID  string `json:"node_id"`
	Round   int    `json:"round"`
	Summary string `json:"summary"`
}

// DebateStanceMapPayload: every agent's final stance, after the last round
// and before the debate synthesis.
type DebateStanceMapPayload struct {
	NodeID  string        `json:"node_id"`
	Rounds  int           `json:"rounds"`
	Stances []AgentStance `json:"stances"`
}

// DissentPayload records an overruled position when a conflict between
// agents is resolved (a debate's synthesis): the agent's opening position,
// kept so that it is not lost.
type DissentPayload struct {
	DissentID         string `json:"dissent_id"`
	ConflictID        string `json:"conflict_id"`
	DissentingAgentID string `json:"dissenting_agent_id"`
	Stance            Stance `json:"stance"`
	Position          string `json:"position"`
}

// AdvisorKind is what an advisor interaction decided.
type AdvisorKind string

// Advisor kinds (the gate's answers to an agent's terminating turn).
const (
	AdvisorContinue AdvisorKind = "gate_continue"
	AdvisorRedirect AdvisorKind = "gate_redirect"
	AdvisorHalt     AdvisorKind = "gate_halt"
	AdvisorBudget   AdvisorKind = "gate_budget"
)

// AdvisorPayload records one advisor gate decision on an agent's lane.
type AdvisorPayload struct {
	Kind AdvisorKind `json:"kind"`
	// Detail is the redirect guidance or the halt reason.
	Detail string `json:"detail,omitempty"`
	// Preview is the start of the terminating turn the advisor checked.
	Preview string `json:"preview,omitempty"`
	// Malformed: the advisor's answer did not parse as a signal.
	Malformed bool `json:"malformed,omitempty"`
	Redirects int  `json:"redirects"`
}

// EscalationPayload follows an advisor halt, right before the agent's lane
// closes with a failure.
type EscalationPayload struct {
	Reason string `json:"reason"`
}

// Citation is one source, deduplicated across the run's agents by
// normalised URL.
type Citation struct {
	Number      int    `json:"number"`
	URL         string `json:"url"`
	Title       string `json:"title,omitempty"`
	FirstSeenBy string `json:"first_seen_by"`
	// FirstSeenAt is when FirstSeenBy got the source (the tool result
	// that named it), UTC; absent in runs journaled before it existed.
	FirstSeenAt time.Time `json:"first_seen_at,omitzero"`
	AccessedVia string    `json:"accessed_via,omitempty"`
}

// CitationAddedPayload: a source was cited for the first time in the run.
type CitationAddedPayload struct {
	Citation
}

func (*RunCostEstimatePayload) EventType() EventType      { return RunCostEstimate }
func (*TeamStartedPayload) EventType() EventType          { return TeamStarted }
func (*TeamSynthesizedPayload) EventType() EventType      { return TeamSynthesized }
func (*SubteamSpawnedPayload) EventType() EventType       { return SubteamSpawned }
func (*SteeringReceivedPayload) EventType() EventType     { return SteeringReceived }
func (*SteeringAppliedPayload) EventType() EventType      { return SteeringApplied }
func (*SteeringRejectedPayload) EventType() EventType     { return SteeringRejected }
func (*DebateRoundStartedPayload) EventType() EventType   { return DebateRoundStarted }
func (*DebateTurnStartedPayload) EventType() EventType    { return DebateTurnStarted }
func (*DebateTurnCompletedPayload) EventType() EventType  { return DebateTurnCompleted }
func (*DebateJudgeStartedPayload) EventType() EventType   { return DebateJudgeStarted }
func (*DebateJudgeSummaryPayload) EventType() EventType   { return DebateJudgeSummary }
func (*DebateRoundCompactedPayload) EventType() EventType { return DebateRoundCompacted }
func (*DebateStanceMapPayload) EventType() EventType      { return DebateStanceMap }
func (*DissentPayload) EventType() EventType              { return Dissent }
func (*AdvisorPayload) EventType() EventType              { return Advisor }
func (*EscalationPayload) EventType() EventType           { return Escalation }
func (*CitationAddedPayload) EventType() EventType        { return CitationAdded }
