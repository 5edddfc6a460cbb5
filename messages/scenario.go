package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	// SynthesisTokens is the number of text_delta events of the synthesiser.
	SynthesisTokens int `json:"synthesis_tokens,omitempty"`
	// TokenDelayMS is the delay before each streamed token, in milliseconds.
	TokenDelayMS int `json:"token_delay_ms,omitempty"`
	// ToolsPerNode is the number of tool calls each worker node makes.
	ToolsPerNode int `json:"tools_per_node,omitempty"`
	// SubagentsPerNode is the number of sub-agents each worker node delegates to.
	SubagentsPerNode int `json:"subagents_per_node,omitempty"`
	// FailNodes fail with a model error halfway through their output.
	FailNodes NodeSelector `json:"fail_nodes,omitzero"`
	// PanicNodes panic halfway through their output on their first
	// PanicAttempts attempts; the supervisor restarts them.
	PanicNodes NodeSelector `json:"panic_nodes,omitzero"`
	// PanicAttempts is how many attempts of a panic node panic (default 1).
	PanicAttempts int `json:"panic_attempts,omitempty"`
	// Approvals adds this many search tool calls to the run, one per worker
	// node in id order (wrapping around), so that a run with hitl "tools"
	// makes exactly this many approval-gated calls when ToolsPerNode and
	// SubagentsPerNode are 0.
	Approvals int `json:"approvals,omitempty"`
	// InfoRequests adds this many ask_human tool calls, one per worker node
	// in id order (wrapping around); each raises an info_request interrupt.
	InfoRequests int `json:"info_requests,omitempty"`
	// Seed makes the run reproducible.
	Seed int64 `json:"seed,omitempty"`
}

// Scenario limits, checked by Validate.
const (
	MaxNodes        = 100_000
	MaxTokens       = 1_000_000
	MaxTokenDelayMS = 60_000
	MaxToolsPerNode = 100
	MaxSubagents    = 100
	MaxFanIn        = 64
)

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
	check(s.TokenDelayMS >= 0 && s.TokenDelayMS <= MaxTokenDelayMS, "token_delay_ms must be in 0..%d, got %d", MaxTokenDelayMS, s.TokenDelayMS)
	check(s.ToolsPerNode >= 0 && s.ToolsPerNode <= MaxToolsPerNode, "tools_per_node must be in 0..%d, got %d", MaxToolsPerNode, s.ToolsPerNode)
	check(s.SubagentsPerNode >= 0 && s.SubagentsPerNode <= MaxSubagents, "subagents_per_node must be in 0..%d, got %d", MaxSubagents, s.SubagentsPerNode)
	check(s.PanicAttempts >= 1 && s.PanicAttempts <= 100, "panic_attempts must be in 1..100, got %d", s.PanicAttempts)
	check(s.Approvals >= 0 && s.Approvals <= MaxNodes, "approvals must be in 0..%d, got %d", MaxNodes, s.Approvals)
	check(s.InfoRequests >= 0 && s.InfoRequests <= MaxNodes, "info_requests must be in 0..%d, got %d", MaxNodes, s.InfoRequests)
	if err := s.FailNodes.validate("fail_nodes"); err != nil {
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

// DecodeScenario strictly decodes a scenario (unknown fields are errors),
// applies defaults and validates it.
func DecodeScenario(r io.Reader) (Scenario, error) {
	var s Scenario
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Scenario{}, fmt.Errorf("messages: decode scenario: %w", err)
	}
	if dec.More() {
		return Scenario{}, errors.New("messages: decode scenario: trailing data after the JSON object")
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
