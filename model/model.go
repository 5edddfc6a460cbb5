// Package model defines how Conclave talks to a language model: one streaming
// call per agent turn, yielding text, reasoning, tool calls and usage.
//
// The scripted implementation in model/scripted is the embedded default: it
// is deterministic for a given scenario and seed, so runs can be replayed in
// tests and simulations.
package model

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/conclave-ai/conclave/messages"
)

// Role is the part an agent plays in a council run.
type Role int

// Roles.
const (
	// RoleDirector plans: its final text is the plan as JSON (messages.Plan).
	RoleDirector Role = iota + 1
	// RoleWorker is a council node working on one goal of the plan.
	RoleWorker
	// RoleSubagent is an agent delegated to by a worker through the delegate tool.
	RoleSubagent
	// RoleSynthesizer composes an answer from other agents' outputs: the
	// run's final answer, a team's synthesis, a debate's verdict.
	RoleSynthesizer
	// RoleDebater argues one side of a debate node for one round. Its text
	// may end with a line "STANCE: held|shifted|conceded".
	RoleDebater
	// RoleJudge assesses a debate round. Its text ends with a line
	// "CONSENSUS_REACHED: true|false".
	RoleJudge
	// RoleAdvisor checks an agent's terminating turn (Review). Its text is
	// "<signal>CONTINUE</signal>", "<signal>REDIRECT</signal> guidance" or
	// "<signal>HALT</signal> reason".
	RoleAdvisor
	// RoleSteerer turns a steering note (Note) on the current Plan into a
	// graph diff: its text is the diff as JSON (messages.GraphDiff).
	RoleSteerer
)

func (r Role) String() string {
	switch r {
	case RoleDirector:
		return "director"
	case RoleWorker:
		return "worker"
	case RoleSubagent:
		return "subagent"
	case RoleSynthesizer:
		return "synthesizer"
	case RoleDebater:
		return "debater"
	case RoleJudge:
		return "judge"
	case RoleAdvisor:
		return "advisor"
	case RoleSteerer:
		return "steerer"
	default:
		return "unknown"
	}
}

// Well-known tool names.
const (
	// ToolSearch looks something up; args {"query": string}.
	ToolSearch = "search"
	// ToolPublish publishes a text; args {"text": string}. It is the
	// scripted model's high-risk tool (Scenario.RiskyApprovals).
	ToolPublish = "publish"
	// ToolDelegate hands a task to a sub-agent; args {"task": string}. The
	// runtime runs the sub-agent and returns its output as the tool result.
	ToolDelegate = "delegate"
	// ToolAskHuman asks a human; args {"question": string, "context": string}.
	// The runtime raises an info_request interrupt and returns the answer.
	ToolAskHuman = "ask_human"
	// ToolAskChoice asks a human to choose; args {"question": string,
	// "options": [{"id", "label", "description"}], "multiple": bool,
	// "context": string}. The runtime raises a choice interrupt (2..10
	// options) and returns {"choices": [ids], "labels": [labels]}.
	ToolAskChoice = "ask_choice"
	// ToolConsultAdvisor asks the run's advisor for advice mid-run; args
	// {"question": string}. Only in the advisor's consult mode, within the
	// run's max_consults per agent; the advice is the result.
	ToolConsultAdvisor = "consult_advisor"
	// ToolSpawnSubteam asks for a sub-team; args {"goal": string,
	// "roles": [string]}. Only a worker's first call counts; the sub-team
	// runs after the worker's wave if approved.
	ToolSpawnSubteam = "spawn_subteam"
	// Async delegation: the agent goes on while the sub-agent works.
	// start_async_task {"task"} → task id; check_async_task {"task_id"} →
	// status (and output once done); update_async_task {"task_id",
	// "context"} injects context into the running sub-agent;
	// cancel_async_task {"task_id"}; list_async_tasks {} → every task.
	ToolStartAsyncTask  = "start_async_task"
	ToolCheckAsyncTask  = "check_async_task"
	ToolUpdateAsyncTask = "update_async_task"
	ToolCancelAsyncTask = "cancel_async_task"
	ToolListAsyncTasks  = "list_async_tasks"
)

// AsyncTask is the state of one async task as its supervisor sees it. The
// runtime keeps these in their own channel (Request.AsyncTasks), apart from
// Context, so that no compaction of the context ever drops them.
type AsyncTask struct {
	ID     string
	Task   string
	Status string // pending, running, completed, failed, cancelled
	Output string
}

// Request is one model turn.
type Request struct {
	Role     Role
	RunID    messages.RunID
	AgentID  string
	Question string
	// Files are the files the run started with (StartRun.Files): every
	// agent given the question is given them. A backend puts text files
	// in the prompt and passes images and PDFs as content parts where its
	// server accepts them.
	Files []messages.RunFile
	// Goal is the agent's own task (the node goal, the delegated task, ...).
	Goal string
	// Context holds inputs from other agents: dependency outputs for a
	// worker, every node output for the synthesiser.
	Context []string
	// Turn is 1-based within the agent's current attempt.
	Turn int
	// History is what the model said and called in the earlier turns of
	// this attempt, oldest first, with the calls' results: what a chat
	// model needs to go on. (An agent put back parked after a restart has
	// only its last turn.)
	History []Exchange
	// Attempt is 1-based; it grows when a supervisor restarts the agent.
	Attempt int
	// ToolResults answers the tool calls of the previous turn (the last
	// Exchange's results).
	ToolResults []ToolResult
	// Tools the agent may call: their definitions.
	Tools []ToolDef
	// Role-specific inputs.
	//
	// Temperature is the sampling temperature the turn asks for (a
	// debater's contentiousness, 0..1); nil: the model's default.
	Temperature *float64
	// Persona and Round: a debater's persona and the 1-based round (also
	// the round a judge assesses). Transcript is the debate so far, old
	// rounds compacted.
	Persona    string
	Round      int
	Transcript []string
	// Review is the terminating turn an advisor checks (or, with
	// Consult, the consulting agent's text so far).
	Review string
	// Consult is a worker's question to the advisor (consult mode): the
	// advisor answers with advice, not a signal.
	Consult string
	// Guidance is an advisor's redirect the agent must follow this turn.
	Guidance string
	// Note and Plan: a steering note and the plan it applies to (steerer).
	Note string
	Plan *messages.Plan
	// AsyncTasks is the state of the agent's async tasks (see AsyncTask).
	AsyncTasks []AsyncTask
	// Injected is context injected into a running sub-agent by its
	// supervisor's update_async_task.
	Injected []string
	// Depth is the delegation round of a sub-agent (1 = a node's own).
	Depth int
	// Agents are the remote agents a plan node may name ("agent"), for
	// a director: what each does, from its agent card.
	Agents []AgentDef
}

// AgentDef is what a director is told about a remote agent.
type AgentDef struct {
	Name        string
	Description string
}

// ToolDef is what a model is told about a tool it may call.
type ToolDef struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the call's arguments (a JSON object).
	Schema json.RawMessage
}

// Exchange is one earlier turn of an agent: its text, its tool calls and
// their results (in the calls' order).
type Exchange struct {
	Text    string
	Calls   []ToolCall
	Results []ToolResult
}

// ToolCall is a tool invocation requested by the model. Args is what the
// model sent, which may not be JSON (or not an object): the runtime then
// answers the call with an error result, as it answers a call of an
// unknown tool, and the model may call again.
//
// Meta is what the model's server sent with the call and wants back with
// it in later turns' history (Gemini's extra_content, its
// thought_signature), opaque to the runtime; nil for most servers. It is
// kept in memory only: a call rebuilt from the journal has none.
type ToolCall struct {
	ID   string
	Name string
	Args json.RawMessage
	Meta json.RawMessage
}

// ToolResult is the answer to a ToolCall.
type ToolResult struct {
	CallID  string
	Name    string
	Content string
	IsError bool
}

// Chunk is one item of a streamed turn: *Text, *Reasoning, *Call or *Usage.
type Chunk interface{ isChunk() }

// Text is a fragment of answer text.
type Text struct{ Text string }

// Reasoning is a fragment of reasoning text.
type Reasoning struct{ Text string }

// Call is a complete tool call. A turn that yields calls ends with them;
// the runtime runs the tools and starts the next turn with the results.
type Call struct{ Call ToolCall }

// Usage reports the turn's token usage; it is the last chunk of a turn.
type Usage struct {
	Model string
	Usage messages.Usage
}

// Progress reports how far the model has read its prompt before its first
// token (a local model's prefill): Processed of Total input tokens, Cached
// of them from its cache, after TimeMS.
type Progress struct {
	Processed, Total, Cached, TimeMS int64
}

func (*Progress) isChunk()  {}
func (*Text) isChunk()      {}
func (*Reasoning) isChunk() {}
func (*Call) isChunk()      {}
func (*Usage) isChunk()     {}

// Stream is one turn in progress. It is used by one goroutine.
type Stream interface {
	// Recv returns the next chunk, or io.EOF after the last one. It returns
	// the context's error once the context passed to Model.Stream is done.
	Recv() (Chunk, error)
	// Close releases the stream; it is safe to call more than once.
	Close() error
}

// Model starts streamed turns. Implementations must be safe for concurrent
// use by many agents.
type Model interface {
	Name() string
	Stream(ctx context.Context, req Request) (Stream, error)
}

// Factory builds the model for one run, from the run's scenario (which a
// real backend may ignore).
type Factory func(scenario messages.Scenario) (Model, error)

// ErrModel marks errors reported by a model (as opposed to cancellation).
var ErrModel = errors.New("model: error")

// ErrTransient marks a model error worth trying again after a while: a
// rate limit or a server error once the stream had begun, a dropped
// connection. An agent whose turn fails with it is restarted by its
// supervisor with exponential backoff (actors: supervision.go), up to the
// restart limit; any other model error fails the agent at once.
var ErrTransient = errors.New("model: transient error")

// Source is a document a tool result drew on: what a citation points at.
type Source struct {
	URL   string
	Title string
}
