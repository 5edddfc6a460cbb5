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
	// RoleSynthesizer composes the final answer from the node outputs.
	RoleSynthesizer
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
	default:
		return "unknown"
	}
}

// Well-known tool names.
const (
	// ToolSearch looks something up; args {"query": string}.
	ToolSearch = "search"
	// ToolDelegate hands a task to a sub-agent; args {"task": string}. The
	// runtime runs the sub-agent and returns its output as the tool result.
	ToolDelegate = "delegate"
	// ToolAskHuman asks a human; args {"question": string, "context": string}.
	// The runtime raises an info_request interrupt and returns the answer.
	ToolAskHuman = "ask_human"
)

// Request is one model turn.
type Request struct {
	Role     Role
	RunID    messages.RunID
	AgentID  string
	Question string
	// Goal is the agent's own task (the node goal, the delegated task, ...).
	Goal string
	// Context holds inputs from other agents: dependency outputs for a
	// worker, every node output for the synthesiser.
	Context []string
	// Turn is 1-based within the agent's current attempt.
	Turn int
	// Attempt is 1-based; it grows when a supervisor restarts the agent.
	Attempt int
	// ToolResults answers the tool calls of the previous turn.
	ToolResults []ToolResult
	// Tools the agent may call.
	Tools []string
}

// ToolCall is a tool invocation requested by the model.
type ToolCall struct {
	ID   string
	Name string
	Args json.RawMessage
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
