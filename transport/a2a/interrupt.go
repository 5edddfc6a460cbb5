package a2a

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// InterruptData is the data part that describes one open interrupt in an
// INPUT_REQUIRED status message. A2A has no typed interrupt, so approvals
// and questions both travel this way (protocols.md §2.4). Reason is the
// interrupt's kind (tool_approval, info_request, plan_approval,
// node_approval, spawn_approval, choice); ResponseSchema is the JSON Schema of the
// data part that answers it (see ResumeData).
type InterruptData struct {
	InterruptID    string          `json:"interruptId"`
	Reason         string          `json:"reason"`
	AgentID        string          `json:"agentId"`
	Lane           string          `json:"lane"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ToolName       string          `json:"toolName,omitempty"`
	ToolArgs       json.RawMessage `json:"toolArgs,omitempty"`
	Question       string          `json:"question,omitempty"`
	ContextSnippet string          `json:"contextSnippet,omitempty"`
	// Options are a choice's options; MultipleChoice says several may be
	// chosen.
	Options        []messages.ChoiceOption `json:"options,omitempty"`
	MultipleChoice bool                    `json:"multipleChoice,omitempty"`
	Plan           *messages.Plan          `json:"plan,omitempty"`
	Waves          [][]string              `json:"waves,omitempty"`
	NodeID         string                  `json:"nodeId,omitempty"`
	Goal           string                  `json:"goal,omitempty"`
	SuggestedRoles []string                `json:"suggestedRoles,omitempty"`
	TimeoutSeconds int                     `json:"timeoutSeconds"`
	ExpiresAt      string                  `json:"expiresAt,omitempty"`
	ResponseSchema json.RawMessage         `json:"responseSchema"`
	// Evidence is what the human decides on (approval kinds); Approval,
	// when set, says the decision needs approvers' signatures, sent
	// through the HTTP API or `conclave approve` (docs/governance.md).
	Evidence *messages.EvidencePackage     `json:"evidence,omitempty"`
	Approval *messages.ApprovalRequirement `json:"approval,omitempty"`
}

// ResumeData is a data part of a resume message: the answer to one
// interrupt. Which fields it needs depends on the interrupt's kind, as for
// POST /api/v1/interrupts/{id}/resume (docs/api.md):
//
//   - tool_approval: decision approve | reject | revise; revise needs
//     editedArgs (the full replacement arguments); feedback optional.
//   - info_request: response.
//   - plan_approval: decision approve | reject | revise; revise needs plan;
//     reason optional.
//   - node_approval, spawn_approval: decision approve | reject; feedback optional.
//   - choice: choices, the chosen option ids (one for a single choice);
//     or decision reject (and feedback) to decline.
//
// Without InterruptID it answers the task's oldest open interrupt.
type ResumeData struct {
	InterruptID string          `json:"interruptId,omitempty"`
	Decision    string          `json:"decision,omitempty"`
	Feedback    string          `json:"feedback,omitempty"`
	Response    string          `json:"response,omitempty"`
	EditedArgs  json.RawMessage `json:"editedArgs,omitempty"`
	Plan        *messages.Plan  `json:"plan,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Choices     []string        `json:"choices,omitempty"`
}

func interruptData(o OpenInterrupt) InterruptData {
	d := InterruptData{
		InterruptID: o.InterruptID, Reason: string(o.Kind), AgentID: o.AgentID, Lane: string(o.Lane),
		ToolCallID: o.CallID, ToolName: o.ToolName, ToolArgs: o.ToolArgs,
		Question: o.Question, ContextSnippet: o.ContextSnippet, Options: o.Options, MultipleChoice: o.MultipleChoice,
		Plan: o.Plan, Waves: o.Waves, NodeID: o.NodeID, Goal: o.Goal, SuggestedRoles: o.SuggestedRoles,
		TimeoutSeconds: o.TimeoutSeconds, ResponseSchema: responseSchema(o),
		Evidence: o.Evidence, Approval: o.Approval,
	}
	switch {
	case !o.ExpiresAt.IsZero():
		d.ExpiresAt = timestamp(o.ExpiresAt)
	case o.TimeoutSeconds > 0 && !o.RaisedAt.IsZero(): // journals written before expires_at existed
		d.ExpiresAt = timestamp(o.RaisedAt.Add(time.Duration(o.TimeoutSeconds) * time.Second))
	}
	return d
}

// prompt is the human-readable question of an interrupt.
func prompt(o OpenInterrupt) string {
	switch o.Kind {
	case messages.InterruptToolApproval:
		return fmt.Sprintf("%s wants to call %s with %s. Answer \"approve\" or \"reject\" (or send a data part with decision \"revise\" and editedArgs).",
			o.AgentID, o.ToolName, clip(strings.TrimSpace(string(o.ToolArgs)), 500))
	case messages.InterruptInfoRequest:
		s := fmt.Sprintf("%s asks: %s", o.AgentID, o.Question)
		if o.ContextSnippet != "" {
			s += " (context: " + clip(o.ContextSnippet, 500) + ")"
		}
		return s + " Answer with text."
	case messages.InterruptChoice:
		var b strings.Builder
		fmt.Fprintf(&b, "%s asks: %s", o.AgentID, o.Question)
		if o.ContextSnippet != "" {
			b.WriteString(" (context: " + clip(o.ContextSnippet, 500) + ")")
		}
		for i, opt := range o.Options {
			fmt.Fprintf(&b, "\n%d. %s (%s)", i+1, opt.Label, opt.ID)
			if opt.Description != "" {
				b.WriteString(": " + clip(opt.Description, 200))
			}
		}
		if o.MultipleChoice {
			b.WriteString("\nAnswer with the numbers, ids or labels of one or more options, separated by commas (or send a data part with choices).")
		} else {
			b.WriteString("\nAnswer with the number, id or label of one option (or send a data part with choices).")
		}
		return b.String()
	case messages.InterruptPlanApproval:
		n := 0
		if o.Plan != nil {
			n = len(o.Plan.Nodes)
		}
		return fmt.Sprintf("Approve the plan: %d nodes in %d waves? Answer \"approve\" or \"reject\" (or send a data part with decision \"revise\" and plan).", n, len(o.Waves))
	case messages.InterruptNodeApproval:
		return fmt.Sprintf("Start node %s: %s? Answer \"approve\" or \"reject\".", o.NodeID, o.Goal)
	case messages.InterruptSpawnApproval:
		return fmt.Sprintf("Spawn a sub-team for %s: %s (roles: %s)? Answer \"approve\" or \"reject\".", o.NodeID, o.Goal, strings.Join(o.SuggestedRoles, ", "))
	}
	return fmt.Sprintf("%s needs input (%s).", o.AgentID, o.Kind)
}

// Response schemas, one per kind (JSON Schema of the answering data part).
var (
	schemaToolApproval = json.RawMessage(`{"type":"object","required":["interruptId","decision"],"additionalProperties":false,` +
		`"properties":{"interruptId":{"type":"string"},"decision":{"enum":["approve","reject","revise"]},"feedback":{"type":"string"},"editedArgs":{"type":"object"}}}`)
	schemaInfoRequest = json.RawMessage(`{"type":"object","required":["interruptId","response"],"additionalProperties":false,` +
		`"properties":{"interruptId":{"type":"string"},"response":{"type":"string","minLength":1}}}`)
	schemaPlanApproval = json.RawMessage(`{"type":"object","required":["interruptId","decision"],"additionalProperties":false,` +
		`"properties":{"interruptId":{"type":"string"},"decision":{"enum":["approve","reject","revise"]},"reason":{"type":"string"},"plan":{"type":"object"}}}`)
	schemaApproval = json.RawMessage(`{"type":"object","required":["interruptId","decision"],"additionalProperties":false,` +
		`"properties":{"interruptId":{"type":"string"},"decision":{"enum":["approve","reject"]},"feedback":{"type":"string"}}}`)
)

// choiceSchema is a choice's response schema: choices are its option
// ids (at most one for a single choice), or decision reject declines.
func choiceSchema(o OpenInterrupt) json.RawMessage {
	ids := make([]string, len(o.Options))
	for i, opt := range o.Options {
		ids[i] = opt.ID
	}
	enum, _ := json.Marshal(ids) // strings: cannot fail
	maxItems := 1
	if o.MultipleChoice {
		maxItems = len(ids)
	}
	return json.RawMessage(`{"type":"object","required":["interruptId"],"additionalProperties":false,` +
		`"properties":{"interruptId":{"type":"string"},"choices":{"type":"array","minItems":1,"maxItems":` + strconv.Itoa(maxItems) +
		`,"uniqueItems":true,"items":{"enum":` + string(enum) + `}},"decision":{"enum":["reject"]},"feedback":{"type":"string"}}}`)
}

func responseSchema(o OpenInterrupt) json.RawMessage {
	switch o.Kind {
	case messages.InterruptChoice:
		return choiceSchema(o)
	case messages.InterruptToolApproval:
		return schemaToolApproval
	case messages.InterruptInfoRequest:
		return schemaInfoRequest
	case messages.InterruptPlanApproval:
		return schemaPlanApproval
	}
	return schemaApproval
}
