package messages

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestStartRunOptions_Defaults(t *testing.T) {
	t.Parallel()
	seed := int64(42)
	d := RunDefaults{Concurrency: 5, ApprovalTimeout: time.Minute}
	o, err := StartRun{Question: "q", Scenario: &Scenario{Nodes: 2}, Seed: &seed}.Options(d)
	if err != nil {
		t.Fatal(err)
	}
	want := RunOptions{Tenant: LocalTenant, Question: "q", HITL: HITLNone, Scenario: Scenario{Nodes: 2, Seed: 42}.WithDefaults(),
		Concurrency: 5, ApprovalTimeout: time.Minute, ApprovalTimeoutAction: DecisionReject, MaxDelegationRounds: DefaultMaxDelegationRounds,
		MaxReplans: DefaultMaxReplans}
	if o.Scenario.Seed != 42 || o.Scenario.Waves != 2 {
		t.Fatalf("scenario %+v", o.Scenario)
	}
	o.Scenario, want.Scenario = Scenario{}, Scenario{}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("options\n got %+v\nwant %+v", o, want)
	}
	// What run_started recorded comes back the same.
	st := &RunStartedPayload{Question: "q", HITL: HITLNone, Tenant: LocalTenant, Concurrency: 5, ApprovalTimeoutSeconds: 60,
		ApprovalTimeoutAction: DecisionReject, MaxDelegationRounds: DefaultMaxDelegationRounds, MaxReplans: ptr(DefaultMaxReplans)}
	if got := st.Options(RunDefaults{Concurrency: 9, ApprovalTimeout: time.Hour}); !reflect.DeepEqual(got, want) {
		t.Fatalf("run_started options\n got %+v\nwant %+v", got, want)
	}
	// A budget asked for is kept, and so is the one run_started recorded.
	b := &RunBudget{Tokens: 1000, CostUSD: 0.5}
	if o, err := (StartRun{Question: "q", Budget: b}).Options(d); err != nil || o.Budget != b {
		t.Fatalf("budget: %+v, %v", o.Budget, err)
	}
	if o := (&RunStartedPayload{Question: "q", Budget: b}).Options(d); o.Budget != b {
		t.Fatalf("run_started budget: %+v", o.Budget)
	}
	// An old run_started without the settings gets the server's defaults.
	old := (&RunStartedPayload{Question: "q"}).Options(d)
	if old.Concurrency != 5 || old.ApprovalTimeout != time.Minute || old.HITL != HITLNone || old.Tenant != LocalTenant || old.MaxReplans != 0 {
		t.Fatalf("old run_started options %+v", old)
	}
}

func TestStartRunOptions_Refused(t *testing.T) {
	t.Parallel()
	d := RunDefaults{Concurrency: 8, ApprovalTimeout: time.Minute}
	for _, tc := range []struct {
		req   StartRun
		field string // "" : not a FieldError
		says  string
	}{
		{StartRun{}, "question", "question is required"},
		{StartRun{Question: strings.Repeat("x", MaxQuestionBytes+1)}, "question", "longer than"},
		{StartRun{Question: "q", HITL: "sometimes"}, "hitl", `hitl must be none, plan, node or tools, got "sometimes"`},
		{StartRun{Question: "q", ApprovalTimeoutSeconds: -1}, "approval_timeout_seconds", "must be in 1..604800, got -1"},
		{StartRun{Question: "q", ApprovalTimeoutAction: "maybe"}, "approval_timeout_action", "must be reject or approve"},
		{StartRun{Question: "q", Concurrency: MaxConcurrency + 1}, "concurrency", "concurrency must be in 1..1024, got 1025"},
		{StartRun{Question: "q", MaxDelegationRounds: -2}, "max_delegation_rounds", "must be in 1..32"},
		{StartRun{Question: "q", MaxReplans: ptr(-1)}, "max_replans", "must be in 0..10, got -1"},
		{StartRun{Question: "q", RequestID: "has space"}, "request_id", "printable ASCII"},
		{StartRun{Question: "q", RequestID: strings.Repeat("x", MaxRequestIDBytes+1)}, "request_id", "printable ASCII"},
		{StartRun{Question: "q", MaxReplans: ptr(11)}, "max_replans", "must be in 0..10, got 11"},
		{StartRun{Question: "q", Advisor: &AdvisorOptions{MaxRedirects: 99}}, "advisor.max_redirects", "must be in 0..16"},
		{StartRun{Question: "q", Advisor: &AdvisorOptions{Mode: "nag"}}, "advisor.mode", "gate or consult"},
		{StartRun{Question: "q", Advisor: &AdvisorOptions{Mode: AdvisorModeConsult, MaxConsults: 17}}, "advisor.max_consults", "must be in 0..16"},
		{StartRun{Question: "q", Budget: &RunBudget{Tokens: -1}}, "budget.tokens", "must be 0"},
		{StartRun{Question: "q", Budget: &RunBudget{CostUSD: -0.5}}, "budget.cost_usd", "must be 0"},
		{StartRun{Question: "q", Budget: &RunBudget{CostUSD: 2e9}}, "budget.cost_usd", "at most 1e9"},
		{StartRun{Question: "q", Tenant: "no spaces"}, "", "tenant"},
		{StartRun{Question: "q", SessionID: "a/b"}, "", "session_id"},
		{StartRun{Question: "q", Scenario: &Scenario{Nodes: 2, Waves: 3}}, "", "waves must be in 1..nodes"},
	} {
		_, err := tc.req.Options(d)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: error %v, want it to say %q", tc.req, err, tc.says)
			continue
		}
		var fe *FieldError
		if isField := errors.As(err, &fe); isField != (tc.field != "") || (isField && fe.Field != tc.field) {
			t.Errorf("%+v: error %#v, want field %q", tc.req, err, tc.field)
		}
	}
}

func TestDurationDisplay(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0ms", 850 * time.Millisecond: "850ms", 1240 * time.Millisecond: "1.2s", 59 * time.Second: "59.0s",
		125 * time.Second: "2m05s", 61*time.Minute + 500*time.Millisecond: "61m01s",
	} {
		if got := DurationDisplay(d); got != want {
			t.Errorf("DurationDisplay(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestWarningCodes_SuggestAnAction(t *testing.T) {
	t.Parallel()
	for _, c := range []WarningCode{WarnInvalidOutput, WarnDelegationSoftLimit, WarnSteeringRejected, WarnSpawnRejected, WarnSignatureRefused, WarnOutputTruncated, WarnTurnLimitNear, WarnBudgetNear} {
		if w := NewWarning(c, "m"); w.SuggestedAction == "" || w.Code != c {
			t.Errorf("%s: %+v", c, w)
		}
	}
}
