package messages

// Control messages travel between actors of the runtime; they never reach a
// wire. They live here with the commands and events so that every message
// that crosses an actor boundary has one home.

// AgentDone is an agent's report to its parent (the run supervisor, or the
// agent that delegated to it) when it ends by itself. The agent has already
// closed its own lane. An agent that dies without reporting (panics beyond
// its restart limit, or is stopped) has its lane closed by the parent.
type AgentDone struct {
	AgentID  string
	Output   string
	Usage    Usage
	Attempts int
	// Plan and Waves are set by the director.
	Plan  *Plan
	Waves [][]string
	// Err is set when the agent failed; Code, when set, is the run error
	// code the failure should end the run with (default node_failed).
	Err  error
	Code ErrorCode
	// Citations are the sources the agent (and its sub-agents) cited, in
	// first-seen order, handed to its parent.
	Citations []Citation
	// Diff is a steerer's translation of its note.
	Diff *GraphDiff
	// Spawn is a worker's approved-to-ask sub-team request (its first
	// spawn_subteam call).
	Spawn *SpawnRequest
	// Rejected: a human rejected the node before it started; it opened no
	// lane, and its parent reports it as skipped.
	Rejected bool
	// Closing is the event that closed the agent's lane (node_completed,
	// node_failed, plan_proposed, synthesis_completed, …), nil if it
	// closed none: its supervisor applies it to the run's state.
	Closing Payload
}

// StopRun asks a run supervisor to stop its run: running agents are
// cancelled, unstarted nodes skipped, and the run ends with exactly one
// run_error carrying Code.
type StopRun struct {
	Code   ErrorCode
	Reason string
}

// Resolution ends a parked interrupt: delivered by the interrupt registry
// to the parked actor, exactly once, whether a human answered, the
// interrupt expired, or its run stopped first.
type Resolution struct {
	Resume
	Kind InterruptKind
	// Expired: nobody answered in time; Decision holds the timeout action.
	Expired bool
	// Cancelled: the run or agent stopped first; nothing is to be done.
	Cancelled bool
	// Signers are the approvers whose signatures decided a policy-covered
	// interrupt.
	Signers []string
}

// SpawnRequest is a worker's spawn_subteam request, carried to its
// supervisor with its report and considered at the end of its wave.
type SpawnRequest struct {
	Goal  string   `json:"goal"`
	Roles []string `json:"roles,omitempty"`
}

// Steering is a steering request delivered to a run supervisor (from
// Engine.Steer, or from the scenario's steering script).
type Steering struct {
	ID string
	SteerNote
}
