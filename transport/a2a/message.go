package a2a

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/conclave-ai/conclave/actors/interrupts"
	"github.com/conclave-ai/conclave/messages"
)

// runOptions are the run options a message's metadata may carry, with the
// names and meanings of the body of POST /api/v1/runs (docs/api.md). Other
// metadata keys are left alone: metadata is shared with other extensions.
type runOptions struct {
	HITL                   messages.HITLMode        `json:"hitl,omitempty"`
	Scenario               *messages.Scenario       `json:"scenario,omitempty"`
	Seed                   *int64                   `json:"seed,omitempty"`
	Concurrency            int                      `json:"concurrency,omitempty"`
	ApprovalTimeoutSeconds int                      `json:"approval_timeout_seconds,omitempty"`
	ApprovalTimeoutAction  messages.Decision        `json:"approval_timeout_action,omitempty"`
	Advisor                *messages.AdvisorOptions `json:"advisor,omitempty"`
	MaxDelegationRounds    int                      `json:"max_delegation_rounds,omitempty"`
	MaxReplans             *int                     `json:"max_replans,omitempty"`
	Budget                 *messages.RunBudget      `json:"budget,omitempty"`
}

// optionKeys are the metadata keys read as run options.
var optionKeys = []string{"hitl", "scenario", "seed", "concurrency", "approval_timeout_seconds", "approval_timeout_action", "advisor", "max_delegation_rounds", "max_replans", "budget"}

// checkMessage validates what every incoming message needs.
func checkMessage(msg *Message) *RPCError {
	if msg == nil {
		return rpcErrorf(CodeInvalidParams, "message is required")
	}
	if msg.MessageID == "" {
		return rpcErrorf(CodeInvalidParams, "message.messageId is required")
	}
	if msg.Role != RoleUser {
		return rpcErrorf(CodeInvalidParams, "message.role must be ROLE_USER, got %q", msg.Role)
	}
	if len(msg.Parts) == 0 {
		return rpcErrorf(CodeInvalidParams, "message.parts must not be empty")
	}
	for i := range msg.Parts {
		if n := msg.Parts[i].kinds(); n != 1 {
			return rpcErrorf(CodeInvalidParams, "message.parts[%d] must have exactly one of text, raw, url, data; it has %d", i, n)
		}
	}
	return nil
}

// startRunFrom turns a message without taskId into the run it asks for:
// the question is its text parts joined with newlines, the session its
// contextId (a new one when empty), the options its metadata; its file
// parts (raw bytes or a url) are the run's files (StartRun.Files).
func startRunFrom(msg *Message) (messages.StartRun, *RPCError) {
	var cmd messages.StartRun
	var texts []string
	for i, p := range msg.Parts {
		switch {
		case p.Text != nil:
			texts = append(texts, *p.Text)
		case p.Data != nil:
			// Structured input (the card's application/json input mode):
			// its compact JSON is part of the question, in order.
			var b bytes.Buffer
			if err := json.Compact(&b, p.Data); err != nil {
				return cmd, invalidParams(fmt.Sprintf("message.parts[%d].data", i), err)
			}
			texts = append(texts, b.String())
		case p.Raw != nil, p.URL != nil:
			f, rerr := filePart(i, p)
			if rerr != nil {
				return cmd, rerr
			}
			cmd.Files = append(cmd.Files, f)
		}
	}
	cmd.Question = strings.Join(texts, "\n")
	if messages.ValidRequestID(msg.MessageID) {
		cmd.RequestID = msg.MessageID // the message that started it
	}
	if strings.TrimSpace(cmd.Question) == "" {
		return cmd, rpcErrorf(CodeInvalidParams, "message: the text parts are empty; they are the question")
	}
	if msg.ContextID != "" {
		id, err := messages.NewSessionID(msg.ContextID)
		if err != nil {
			return cmd, rpcErrorf(CodeInvalidParams, "message.contextId: %v", err)
		}
		cmd.SessionID = id
	}
	opts, rerr := decodeOptions(msg.Metadata)
	if rerr != nil {
		return cmd, rerr
	}
	cmd.HITL, cmd.Scenario, cmd.Seed, cmd.Concurrency = opts.HITL, opts.Scenario, opts.Seed, opts.Concurrency
	if cmd.Scenario == nil {
		sc := DefaultScenario()
		cmd.Scenario = &sc
	}
	cmd.ApprovalTimeoutSeconds, cmd.ApprovalTimeoutAction = opts.ApprovalTimeoutSeconds, opts.ApprovalTimeoutAction
	cmd.Advisor, cmd.MaxDelegationRounds, cmd.MaxReplans = opts.Advisor, opts.MaxDelegationRounds, opts.MaxReplans
	cmd.Budget = opts.Budget
	return cmd, nil
}

// filePart is the file of a raw or url part (an A2A FilePart): its
// filename names it ("file-<i>" without one), its mediaType is its media
// type (else the name's extension tells it). The engine checks it as any
// run's file; a url is fetched only from the operator's allowed prefixes.
func filePart(i int, p Part) (messages.InputFile, *RPCError) {
	f := messages.InputFile{Name: p.Filename, MediaType: p.MediaType}
	if f.Name == "" {
		f.Name = fmt.Sprintf("file-%d", i)
	}
	if p.URL != nil {
		f.URL = *p.URL
		return f, nil
	}
	data, err := base64.StdEncoding.DecodeString(*p.Raw)
	if err != nil {
		return f, invalidParams(fmt.Sprintf("message.parts[%d].raw", i), err)
	}
	f.Data = data
	return f, nil
}

// DefaultScenario is the scripted model's scenario of a task whose message
// names none: the engine's default at a pace a watcher can follow (15 ms
// per token, as `conclave run`), so a task spends a few seconds WORKING
// instead of ending in milliseconds, and an agent or a conformance tool
// sees its progress. A message's metadata.scenario replaces it.
func DefaultScenario() messages.Scenario {
	sc := messages.DefaultScenario()
	sc.TokenDelayMS = 15
	return sc
}

// decodeOptions reads the run options out of message metadata. The option
// values are decoded strictly (an unknown scenario field is an error).
func decodeOptions(meta json.RawMessage) (runOptions, *RPCError) {
	var opts runOptions
	if len(bytes.TrimSpace(meta)) == 0 || string(bytes.TrimSpace(meta)) == "null" {
		return opts, nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(meta, &all); err != nil {
		return opts, invalidParams("message.metadata", err)
	}
	picked := map[string]json.RawMessage{}
	for _, k := range optionKeys {
		if v, ok := all[k]; ok {
			picked[k] = v
		}
	}
	if len(picked) == 0 {
		return opts, nil
	}
	b, _ := json.Marshal(picked)
	if err := messages.DecodeStrict(b, &opts); err != nil {
		return opts, invalidParams("message.metadata", err)
	}
	return opts, nil
}

// resumesFrom turns a message with the taskId of a task waiting for input
// into answers to its open interrupts (open lists them oldest first, as
// the INPUT_REQUIRED status message does):
//
//   - Data parts answer interrupts, one each: a ResumeData object. One
//     without interruptId answers the oldest open interrupt (the first one
//     the status message lists). When a message has data parts, its text
//     parts are ignored.
//   - Without data parts, the text parts (joined with newlines) answer the
//     oldest open interrupt: an info_request takes the text as its
//     response; an approval takes "approve" or "reject", optionally
//     followed by ":" and feedback (for a plan approval, the reason); a
//     choice takes the number, id or label of an option (a multiple
//     choice several, separated by commas), or "reject" to decline.
//
// The oldest, not "the only": interrupts raised after the client read the
// status come later in the list, so the one a client saw alone is still
// the oldest when its answer arrives. Every answer is checked before any is
// applied, so a message that is invalid anywhere changes nothing.
func resumesFrom(msg *Message, taskID string, open []OpenInterrupt) ([]messages.Resume, *RPCError) {
	byID := map[string]OpenInterrupt{}
	for _, o := range open {
		byID[o.InterruptID] = o
	}
	var out []messages.Resume
	var texts []string
	for i, p := range msg.Parts {
		switch {
		case p.Data != nil:
			var d ResumeData
			if err := messages.DecodeStrict(p.Data, &d); err != nil {
				return nil, invalidParams(fmt.Sprintf("message.parts[%d].data", i), err)
			}
			if d.InterruptID == "" {
				d.InterruptID = open[0].InterruptID
			}
			o, ok := byID[d.InterruptID]
			if !ok {
				return nil, rpcErrorf(CodeInvalidParams, "message.parts[%d].data: interrupt %q is not open on task %s", i, d.InterruptID, taskID)
			}
			if slices.ContainsFunc(out, func(r messages.Resume) bool { return r.InterruptID == d.InterruptID }) {
				return nil, rpcErrorf(CodeInvalidParams, "message.parts[%d].data: interrupt %q is answered twice", i, d.InterruptID)
			}
			res := messages.Resume{InterruptID: d.InterruptID, Decision: messages.Decision(d.Decision), Feedback: d.Feedback,
				Response: d.Response, EditedArgs: d.EditedArgs, Plan: d.Plan, Reason: d.Reason, Choices: d.Choices}
			if err := interrupts.ValidateFor(o.InterruptRaisedPayload, &res); err != nil {
				return nil, rpcErrorf(CodeInvalidParams, "message.parts[%d].data: %s", i, strings.TrimPrefix(err.Error(), "interrupts: "))
			}
			out = append(out, res)
		case p.Text != nil:
			texts = append(texts, *p.Text)
		default:
			return nil, rpcErrorf(CodeContentTypeNotSupported, "message.parts[%d]: an answer takes text or data parts", i)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	o := open[0]
	text := strings.Join(texts, "\n")
	res := messages.Resume{InterruptID: o.InterruptID}
	switch o.Kind {
	case messages.InterruptInfoRequest:
		res.Response = text
	case messages.InterruptChoice:
		ids, ok := o.Choice().MatchAll(text)
		word, rest, _ := strings.Cut(strings.TrimSpace(text), ":")
		switch {
		case ok:
			res.Choices = ids
		case strings.EqualFold(strings.TrimSpace(word), string(messages.DecisionReject)):
			res.Decision, res.Feedback = messages.DecisionReject, strings.TrimSpace(rest)
		default:
			return nil, rpcErrorf(CodeInvalidParams, "a choice is answered with the number, id or label of an option (several separated by commas for a multiple choice), \"reject\" to decline, or a data part; got %q", clip(text, 64))
		}
	default:
		word, rest, _ := strings.Cut(strings.TrimSpace(text), ":")
		switch d := messages.Decision(strings.ToLower(strings.TrimSpace(word))); d {
		case messages.DecisionApprove, messages.DecisionReject:
			res.Decision = d
		default:
			return nil, rpcErrorf(CodeInvalidParams, "a %s is answered with the text \"approve\" or \"reject\" (optionally \"reject: <feedback>\"), or a data part; got %q", o.Kind, clip(text, 64))
		}
		if o.Kind == messages.InterruptPlanApproval {
			res.Reason = strings.TrimSpace(rest)
		} else {
			res.Feedback = strings.TrimSpace(rest)
		}
	}
	if err := interrupts.ValidateFor(o.InterruptRaisedPayload, &res); err != nil {
		return nil, rpcErrorf(CodeInvalidParams, "message: %s", strings.TrimPrefix(err.Error(), "interrupts: "))
	}
	return []messages.Resume{res}, nil
}
