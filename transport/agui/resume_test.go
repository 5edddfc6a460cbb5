package agui_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/transport/agui"
)

// TestResumeFor: AG-UI resume entries become Conclave answers.
func TestResumeFor(t *testing.T) {
	t.Parallel()
	entry := func(status, payload string) agui.ResumeEntry {
		e := agui.ResumeEntry{InterruptID: "i", Status: status}
		if payload != "" {
			e.Payload = json.RawMessage(payload)
		}
		return e
	}
	ok := []struct {
		kind    messages.InterruptKind
		e       agui.ResumeEntry
		want    messages.Decision
		check   func(messages.Resume) bool
		comment string
	}{
		{messages.InterruptToolApproval, entry("resolved", `{"approved":true}`), messages.DecisionApprove, nil, "approve"},
		{messages.InterruptToolApproval, entry("resolved", ``), messages.DecisionApprove, nil, "no payload approves"},
		{messages.InterruptToolApproval, entry("resolved", `{"approved":true,"editedArgs":{"query":"x"}}`), messages.DecisionRevise,
			func(r messages.Resume) bool { return string(r.EditedArgs) == `{"query":"x"}` }, "approve with edits"},
		{messages.InterruptToolApproval, entry("resolved", `{"approved":false,"feedback":"no"}`), messages.DecisionReject,
			func(r messages.Resume) bool { return r.Feedback == "no" }, "reject"},
		{messages.InterruptToolApproval, entry("cancelled", ``), messages.DecisionReject, nil, "cancelled rejects"},
		{messages.InterruptInfoRequest, entry("resolved", `{"response":"Paris"}`), messages.DecisionApprove,
			func(r messages.Resume) bool { return r.Response == "Paris" }, "info object"},
		{messages.InterruptInfoRequest, entry("resolved", `"Paris"`), messages.DecisionApprove,
			func(r messages.Resume) bool { return r.Response == "Paris" }, "info string"},
		{messages.InterruptInfoRequest, entry("cancelled", ``), messages.DecisionApprove,
			func(r messages.Resume) bool { return r.Response != "" }, "cancelled info request"},
		{messages.InterruptPlanApproval, entry("resolved", `{"approved":true,"editedArgs":{"nodes":[{"id":"a","goal":"g"}]}}`), messages.DecisionRevise,
			func(r messages.Resume) bool { return r.Plan != nil && len(r.Plan.Nodes) == 1 }, "edited plan"},
		{messages.InterruptPlanApproval, entry("resolved", `{"approved":false,"reason":"too big"}`), messages.DecisionReject,
			func(r messages.Resume) bool { return r.Reason == "too big" }, "plan rejected"},
		{messages.InterruptNodeApproval, entry("resolved", `{"approved":true}`), messages.DecisionApprove, nil, "node"},
		{messages.InterruptChoice, entry("resolved", `{"choices":["a","b"]}`), messages.DecisionApprove,
			func(r messages.Resume) bool { return len(r.Choices) == 2 && r.Choices[1] == "b" }, "choice object"},
		{messages.InterruptChoice, entry("resolved", `["a"]`), messages.DecisionApprove,
			func(r messages.Resume) bool { return len(r.Choices) == 1 && r.Choices[0] == "a" }, "choice array"},
		{messages.InterruptChoice, entry("resolved", `"a"`), messages.DecisionApprove,
			func(r messages.Resume) bool { return len(r.Choices) == 1 && r.Choices[0] == "a" }, "choice string"},
		{messages.InterruptChoice, entry("cancelled", ``), messages.DecisionReject,
			func(r messages.Resume) bool { return len(r.Choices) == 0 }, "cancelled choice declines"},
	}
	for _, c := range ok {
		r, err := agui.ResumeFor(c.kind, c.e)
		if err != nil {
			t.Errorf("%s: %v", c.comment, err)
			continue
		}
		if r.Decision != c.want || r.InterruptID != "i" || (c.check != nil && !c.check(r)) {
			t.Errorf("%s: %+v", c.comment, r)
		}
	}
	bad := []struct {
		kind messages.InterruptKind
		e    agui.ResumeEntry
	}{
		{messages.InterruptInfoRequest, entry("resolved", `{"approved":true}`)},
		{messages.InterruptInfoRequest, entry("resolved", ``)},
		{messages.InterruptToolApproval, entry("resolved", `"yes"`)},
		{messages.InterruptToolApproval, entry("resolved", `{"approved":true,"editedArgs":[1]}`)},
		{messages.InterruptPlanApproval, entry("resolved", `{"approved":true,"editedArgs":{"nodes":[]}}`)},
		{messages.InterruptNodeApproval, entry("resolved", `{"approved":"maybe"}`)},
		{messages.InterruptToolApproval, entry("later", ``)},
		{messages.InterruptChoice, entry("resolved", ``)},
		{messages.InterruptChoice, entry("resolved", `{"choices":[]}`)},
		{messages.InterruptChoice, entry("resolved", `{"approved":true}`)},
		{"", entry("resolved", `{"approved":true}`)},
	}
	for _, c := range bad {
		if r, err := agui.ResumeFor(c.kind, c.e); !errors.Is(err, agui.ErrInvalidResume) {
			t.Errorf("%s %s %s: %+v, %v", c.kind, c.e.Status, c.e.Payload, r, err)
		}
	}
}
