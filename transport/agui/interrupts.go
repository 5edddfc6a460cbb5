package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/conclave-ai/conclave/actors/interrupts"
	"github.com/conclave-ai/conclave/messages"
)

// Response schemas published with each interrupt: the payload a resolved
// resume entry carries. Approvals follow AG-UI's recommended
// approve-with-edits shape {approved, editedArgs}.
var (
	schemaToolApproval = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"editedArgs":{"type":"object","description":"full replacement arguments for the tool call"},"feedback":{"type":"string"}},"required":["approved"]}`)
	schemaPlanApproval = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"editedArgs":{"type":"object","description":"the edited plan: {\"nodes\":[{\"id\",\"goal\",\"deps\"}]}"},"reason":{"type":"string"}},"required":["approved"]}`)
	schemaApproval     = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"feedback":{"type":"string"}},"required":["approved"]}`)
	schemaInfoRequest  = json.RawMessage(`{"type":"object","properties":{"response":{"type":"string","minLength":1}},"required":["response"]}`)
)

// expiresFormat is ISO 8601 in UTC with milliseconds, which every JS Date parses.
const expiresFormat = "2006-01-02T15:04:05.000Z07:00"

// interrupt builds the AG-UI interrupt for an open Conclave interrupt.
// expires (zero: unknown) overrides the raise time + timeout.
func (p *Projector) interrupt(pi *pendingInterrupt, expires time.Time) Interrupt {
	in := pi.p
	if expires.IsZero() && in.TimeoutSeconds > 0 {
		expires = pi.raisedAt.Add(time.Duration(in.TimeoutSeconds) * time.Second)
	}
	out := Interrupt{ID: in.InterruptID, Metadata: Metadata{"conclave": in}}
	if in.Evidence != nil {
		out.Metadata["evidence"] = in.Evidence // also inside "conclave"; named here for clients that look for it
	}
	if !expires.IsZero() {
		out.ExpiresAt = expires.UTC().Format(expiresFormat)
	}
	if pi.lane != nil {
		out.SubagentRunID = pi.lane.subagent
	}
	switch in.Kind {
	case messages.InterruptToolApproval:
		out.Reason = ReasonToolCall
		out.Message = fmt.Sprintf("Approve the call of tool %s with arguments %s?", in.ToolName, compact(in.ToolArgs))
		out.ResponseSchema = schemaToolApproval
		if in.CallID != "" && pi.lane != nil {
			out.ToolCallID = p.ToolCallID(pi.lane.stream, in.CallID)
		}
	case messages.InterruptInfoRequest:
		out.Reason = ReasonInputRequired
		out.Message = in.Question
		if in.ContextSnippet != "" {
			out.Message += "\n\n" + in.ContextSnippet
		}
		out.ResponseSchema = schemaInfoRequest
		if in.CallID != "" && pi.lane != nil {
			out.ToolCallID = p.ToolCallID(pi.lane.stream, in.CallID)
		}
	case messages.InterruptChoice:
		out.Reason = ReasonInputRequired
		out.Message = choiceMessage(in)
		out.ResponseSchema = choiceSchema(in)
		if in.CallID != "" && pi.lane != nil {
			out.ToolCallID = p.ToolCallID(pi.lane.stream, in.CallID)
		}
	case messages.InterruptPlanApproval:
		out.Reason = ReasonPlanApproval
		n := 0
		if in.Plan != nil {
			n = len(in.Plan.Nodes)
		}
		out.Message = "Approve the plan: " + strconv.Itoa(n) + " nodes in " + strconv.Itoa(len(in.Waves)) + " waves?"
		out.ResponseSchema = schemaPlanApproval
	case messages.InterruptNodeApproval:
		out.Reason = ReasonConfirmation
		out.Message = "Start node " + in.NodeID + ": " + in.Goal + "?"
		out.ResponseSchema = schemaApproval
	case messages.InterruptSpawnApproval:
		out.Reason = ReasonConfirmation
		out.Message = "Spawn a sub-team for " + in.NodeID + ": " + in.Goal + " (roles: " + strings.Join(in.SuggestedRoles, ", ") + ")?"
		out.ResponseSchema = schemaApproval
	default: // kinds to come
		out.Reason = ReasonConfirmation
		out.Message = "Approve " + strings.ReplaceAll(string(in.Kind), "_", " ") + "?"
		out.ResponseSchema = schemaApproval
	}
	if out.Message == "" {
		out.Message = string(in.Kind)
	}
	return out
}

// choiceMessage is a choice's question with its options numbered.
func choiceMessage(in *messages.InterruptRaisedPayload) string {
	var b strings.Builder
	b.WriteString(in.Question)
	if in.ContextSnippet != "" {
		b.WriteString("\n\n" + in.ContextSnippet)
	}
	if in.MultipleChoice {
		b.WriteString("\n\nChoose one or more:")
	} else {
		b.WriteString("\n\nChoose one:")
	}
	for i, o := range in.Options {
		fmt.Fprintf(&b, "\n%d. %s (%s)", i+1, o.Label, o.ID)
		if o.Description != "" {
			b.WriteString(": " + o.Description)
		}
	}
	return b.String()
}

// choiceSchema is a choice's response schema: {choices: [ids]}, the ids
// an enum (one item for a single choice), each labelled.
func choiceSchema(in *messages.InterruptRaisedPayload) json.RawMessage {
	type option struct {
		Const       string `json:"const"`
		Title       string `json:"title"`
		Description string `json:"description,omitempty"`
	}
	type items struct {
		Type  string   `json:"type"`
		OneOf []option `json:"oneOf"`
	}
	type array struct {
		Type        string `json:"type"`
		MinItems    int    `json:"minItems"`
		MaxItems    int    `json:"maxItems"`
		UniqueItems bool   `json:"uniqueItems"`
		Items       items  `json:"items"`
	}
	type object struct {
		Type       string `json:"type"`
		Properties struct {
			Choices array `json:"choices"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	opts := make([]option, len(in.Options))
	for i, o := range in.Options {
		opts[i] = option{o.ID, o.Label, o.Description}
	}
	maxItems := 1
	if in.MultipleChoice {
		maxItems = len(in.Options)
	}
	schema := object{Type: "object", Required: []string{"choices"}}
	schema.Properties.Choices = array{Type: "array", MinItems: 1, MaxItems: maxItems, UniqueItems: true, Items: items{Type: "string", OneOf: opts}}
	b, err := json.Marshal(schema)
	if err != nil {
		panic(err) // unreachable: structs of strings and ints
	}
	return b
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if len(raw) == 0 || json.Compact(&b, raw) != nil {
		return "{}"
	}
	return b.String()
}

// ErrInvalidResume is wrapped by every error of ResumeFor.
var ErrInvalidResume = errors.New("agui: invalid resume entry")

// approvalPayload is a resolved approval's payload.
type approvalPayload struct {
	Approved   *bool           `json:"approved"`
	EditedArgs json.RawMessage `json:"editedArgs"`
	Plan       *messages.Plan  `json:"plan"`
	Feedback   string          `json:"feedback"`
	Reason     string          `json:"reason"`
}

// choicesOf reads a resolved choice's payload: {"choices": [ids]}, an
// array of ids, or one id as a string.
func choicesOf(payload []byte) ([]string, error) {
	const want = `payload must be {"choices": ["<option id>", …]}, an array of ids or one id`
	if len(payload) == 0 {
		return nil, errors.New(want)
	}
	var ids []string
	switch payload[0] {
	case '"':
		var id string
		if err := json.Unmarshal(payload, &id); err != nil {
			return nil, fmt.Errorf("%s: %v", want, err)
		}
		ids = []string{id}
	case '[':
		if err := json.Unmarshal(payload, &ids); err != nil {
			return nil, fmt.Errorf("%s: %v", want, err)
		}
	default:
		var obj struct {
			Choices []string `json:"choices"`
		}
		if err := json.Unmarshal(payload, &obj); err != nil {
			return nil, fmt.Errorf("%s: %v", want, err)
		}
		ids = obj.Choices
	}
	if len(ids) == 0 {
		return nil, errors.New(want)
	}
	return ids, nil
}

// ResumeFor maps an AG-UI resume entry to Conclave's answer to an
// interrupt of kind:
//
//   - cancelled → reject (an info request gets a response saying so, since
//     it cannot be rejected);
//   - resolved, approvals: {approved:true} → approve,
//     {approved:true, editedArgs:{…}} → revise with those arguments (for a
//     plan approval, editedArgs or plan is the edited plan),
//     {approved:false, feedback?|reason?} → reject; no payload → approve;
//   - resolved, info_request: {response:"…"} or a bare string → the response;
//   - resolved, choice: {choices:[ids]}, an array of ids or one id → the
//     choice (the registry checks the ids against the options); a
//     cancelled choice is declined (decision reject).
//
// The result is validated as the interrupt registry would validate it.
func ResumeFor(kind messages.InterruptKind, e ResumeEntry) (messages.Resume, error) {
	bad := func(format string, args ...any) (messages.Resume, error) {
		return messages.Resume{}, fmt.Errorf("%w: interrupt %s: %s", ErrInvalidResume, e.InterruptID, fmt.Sprintf(format, args...))
	}
	res := messages.Resume{InterruptID: e.InterruptID}
	payload := bytes.TrimSpace(e.Payload)
	switch e.Status {
	case ResumeCancelled:
		switch kind {
		case messages.InterruptInfoRequest:
			res.Response = "(no answer: the user cancelled this request)"
		case messages.InterruptChoice:
			res.Decision, res.Feedback = messages.DecisionReject, "cancelled by the user"
		default:
			res.Decision, res.Feedback, res.Reason = messages.DecisionReject, "cancelled by the user", "cancelled by the user"
		}
	case ResumeResolved:
		if kind == messages.InterruptChoice {
			ids, err := choicesOf(payload)
			if err != nil {
				return bad("%v", err)
			}
			res.Choices = ids
			break
		}
		if kind == messages.InterruptInfoRequest {
			var s string
			if len(payload) > 0 && payload[0] == '"' {
				if err := json.Unmarshal(payload, &s); err != nil {
					return bad("payload: %v", err)
				}
			} else if len(payload) > 0 {
				var obj struct {
					Response string `json:"response"`
				}
				if err := json.Unmarshal(payload, &obj); err != nil {
					return bad(`payload must be {"response": "<text>"} or a string: %v`, err)
				}
				s = obj.Response
			}
			if s == "" {
				return bad(`an input_required interrupt needs a payload {"response": "<text>"}`)
			}
			res.Response = s
			break
		}
		var a approvalPayload
		if len(payload) > 0 {
			if payload[0] != '{' {
				return bad(`payload must be an object {"approved": true|false, …}`)
			}
			if err := json.Unmarshal(payload, &a); err != nil {
				return bad("payload: %v", err)
			}
		}
		approved := a.Approved == nil || *a.Approved
		switch {
		case !approved:
			res.Decision = messages.DecisionReject
			res.Feedback, res.Reason = a.Feedback, a.Reason
			if res.Feedback == "" {
				res.Feedback = a.Reason
			}
			if res.Reason == "" {
				res.Reason = a.Feedback
			}
		case kind == messages.InterruptPlanApproval && (a.Plan != nil || len(a.EditedArgs) > 0):
			plan := a.Plan
			if plan == nil {
				plan = new(messages.Plan)
				if err := json.Unmarshal(a.EditedArgs, plan); err != nil {
					return bad("editedArgs must be the edited plan {\"nodes\": […]}: %v", err)
				}
			}
			res.Decision, res.Plan = messages.DecisionRevise, plan
		case kind == messages.InterruptToolApproval && len(a.EditedArgs) > 0 && !bytes.Equal(bytes.TrimSpace(a.EditedArgs), []byte("null")):
			res.Decision, res.EditedArgs = messages.DecisionRevise, a.EditedArgs
		default:
			res.Decision = messages.DecisionApprove
		}
	default:
		return bad("status %q is not resolved or cancelled", e.Status)
	}
	if err := interrupts.Validate(kind, &res); err != nil {
		var inv *interrupts.InvalidError
		if errors.As(err, &inv) {
			return bad("%s", inv.Reason)
		}
		return bad("%v", err)
	}
	return res, nil
}
