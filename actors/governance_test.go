package actors_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/interrupts"
	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/testkit"
)

// signers are a tenant's approvers with their private keys.
type signers struct {
	keys map[string]*governance.PrivateKey
	cfg  *governance.Config
}

// newSigners makes n approvers a1..an of the local tenant and a policy:
// high needs m of them.
func newSigners(t *testing.T, n, m int) *signers {
	t.Helper()
	s := &signers{keys: map[string]*governance.PrivateKey{}}
	ten := &governance.Tenant{Approvers: map[string]*governance.PublicKey{}, Policy: governance.Policy{RejectRequired: 1}}
	var names []string
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("a%d", i)
		pk, sk, _, err := governance.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		s.keys[name], ten.Approvers[name] = sk, pk
		names = append(names, name)
	}
	ten.Policy.Rules = map[messages.RiskLevel]governance.Rule{messages.RiskHigh: {Required: m, Approvers: names}}
	s.cfg = &governance.Config{Tenants: map[messages.TenantID]*governance.Tenant{messages.LocalTenant: ten}}
	return s
}

// resume is approver's signed decision of in.
func (s *signers) resume(t *testing.T, in *messages.InterruptRaisedPayload, approver string, d messages.Decision) messages.Resume {
	t.Helper()
	st := messages.ApprovalStatement{InterruptID: in.InterruptID, EvidenceDigest: in.Approval.EvidenceDigest, Decision: d}
	sig, err := governance.Sign(s.keys[approver], st)
	if err != nil {
		t.Fatal(err)
	}
	return messages.Resume{InterruptID: in.InterruptID, Decision: d, Signature: &messages.ResumeSignature{Approver: approver, Signature: sig}}
}

// riskyRun starts a run whose one worker calls the high-risk publish tool
// (no hitl mode: the policy alone gates it) and returns the interrupt.
func riskyRun(t *testing.T, e *actors.Engine, session messages.SessionID) (actors.RunRef, *testkit.Probe, *messages.InterruptRaisedPayload) {
	t.Helper()
	ref, p, in := startRisky(t, e, messages.StartRun{Question: "q", SessionID: session})
	if in.Evidence.RiskLevel != messages.RiskHigh || len(in.Evidence.RecommendedActions) != 3 || in.Evidence.SourceAgentID != "n001" {
		t.Fatalf("evidence %+v", in.Evidence)
	}
	if d, _ := governance.EvidenceDigest(in.Evidence); d != in.Approval.EvidenceDigest {
		t.Fatalf("digest %s, requirement %s", d, in.Approval.EvidenceDigest)
	}
	return ref, p, in
}

func publishRan(events []*messages.Envelope) bool {
	for _, env := range events {
		if p, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok && p.Tool == model.ToolPublish {
			return !p.IsError
		}
	}
	return false
}

// TestGovernance_MofN: a high-risk call runs only once m distinct
// approvers signed its approval, for m = 1, 2, 3; each signature is an
// approval_signature_added event.
func TestGovernance_MofN(t *testing.T) {
	t.Parallel()
	for m := 1; m <= 3; m++ {
		t.Run(fmt.Sprint(m), func(t *testing.T) {
			t.Parallel()
			s := newSigners(t, 3, m)
			e := testkit.NewEngine(t, actors.Config{Governance: s.cfg})
			ref, p, in := riskyRun(t, e, "")
			defer p.Close()
			for k := 1; k <= m; k++ {
				info, err := e.Resume(s.resume(t, in, fmt.Sprintf("a%d", k), messages.DecisionApprove))
				if err != nil {
					t.Fatalf("signature %d: %v", k, err)
				}
				if len(info.Signed) != k {
					t.Fatalf("signature %d: signed %+v", k, info.Signed)
				}
				if want := messages.InterruptPending; k < m && info.Status != want {
					t.Fatalf("signature %d of %d: status %s", k, m, info.Status)
				}
			}
			events := followAll(t, e, p, ref)
			testkit.AssertInvariants(t, events)
			if !publishRan(events) {
				t.Fatal("the approved tool did not run")
			}
			added := 0
			for _, env := range events {
				if a, ok := env.Payload.(*messages.ApprovalSignatureAddedPayload); ok {
					added++
					if a.Count != added || a.Required != m || a.IsFullySigned != (added == m) {
						t.Errorf("signature event %+v", a)
					}
				}
				if r, ok := env.Payload.(*messages.InterruptResolvedPayload); ok && len(r.Signers) != m {
					t.Errorf("resolved by %v", r.Signers)
				}
			}
			if added != m {
				t.Fatalf("%d signature events, want %d", added, m)
			}
		})
	}
}

// TestGovernance_RefusedSignaturesNeverRunTheTool: unsigned, badly signed,
// unknown, duplicate and other-interrupt signatures are refused (a
// warning on the lane) and the tool never runs; a signed rejection ends
// the call.
func TestGovernance_RefusedSignaturesNeverRunTheTool(t *testing.T) {
	t.Parallel()
	s := newSigners(t, 3, 2)
	e := testkit.NewEngine(t, actors.Config{Governance: s.cfg})
	ref, p, in := riskyRun(t, e, "")
	defer p.Close()

	var invalid *interrupts.InvalidError
	if _, err := e.Resume(messages.Resume{InterruptID: in.InterruptID, Decision: messages.DecisionApprove}); !errors.As(err, &invalid) {
		t.Fatalf("unsigned: %v", err)
	}
	forged := s.resume(t, in, "a1", messages.DecisionApprove)
	forged.Signature.Approver = "a2" // a1's signature presented as a2's
	outsider := s.resume(t, in, "a1", messages.DecisionApprove)
	outsider.Signature.Approver = "mallory"
	edited := s.resume(t, in, "a1", messages.DecisionApprove)
	edited.Decision, edited.EditedArgs = messages.DecisionRevise, []byte(`{"text":"something else"}`)
	for name, tc := range map[string]struct {
		res  messages.Resume
		want error
	}{
		"another's signature": {forged, governance.ErrBadSignature},
		"unknown approver":    {outsider, governance.ErrUnknownApprover},
		"other bytes":         {edited, governance.ErrBadSignature},
	} {
		_, err := e.Resume(tc.res)
		var se *interrupts.SignatureError
		if !errors.As(err, &se) || !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if _, err := e.Resume(s.resume(t, in, "a1", messages.DecisionApprove)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Resume(s.resume(t, in, "a1", messages.DecisionApprove)); !errors.Is(err, governance.ErrDuplicateApprover) {
		t.Fatalf("duplicate: %v", err)
	}
	// One approval of two; a rejection needs one signature: it decides.
	if _, err := e.Resume(s.resume(t, in, "a3", messages.DecisionReject)); err != nil {
		t.Fatal(err)
	}
	events := followAll(t, e, p, ref)
	testkit.AssertInvariants(t, events)
	if publishRan(events) {
		t.Fatal("the tool ran")
	}
	refused := 0
	for _, env := range events {
		if w, ok := env.Payload.(*messages.WarningPayload); ok && w.Code == "signature_refused" {
			refused++
		}
	}
	if refused != 4 { // three forgeries and the duplicate
		t.Fatalf("%d signature_refused warnings, want 4", refused)
	}
}

// TestGovernance_ConcurrentSignatures: all approvers sign at once; exactly
// m signatures count, each once, and the decision is taken once.
func TestGovernance_ConcurrentSignatures(t *testing.T) {
	t.Parallel()
	s := newSigners(t, 5, 3)
	e := testkit.NewEngine(t, actors.Config{Governance: s.cfg})
	ref, p, in := riskyRun(t, e, "")
	defer p.Close()
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range 5 {
		res := s.resume(t, in, fmt.Sprintf("a%d", i+1), messages.DecisionApprove)
		wg.Go(func() { _, errs[i] = e.Resume(res) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, interrupts.ErrConflict):
			t.Errorf("late signature: %v", err)
		}
	}
	if ok != 3 {
		t.Fatalf("%d signatures accepted, want exactly 3 (%v)", ok, errs)
	}
	events := followAll(t, e, p, ref)
	if n := testkit.Count(events, messages.ApprovalSignatureAdded); n != 3 {
		t.Fatalf("%d signature events", n)
	}
	if !publishRan(events) {
		t.Fatal("the tool did not run")
	}
}

// TestGovernance_SignaturesSurviveARestart: one signature of two, then the
// engine stops; after the restart the interrupt is pending with that
// signature counted, and the second one decides.
func TestGovernance_SignaturesSurviveARestart(t *testing.T) {
	t.Parallel()
	s := newSigners(t, 3, 2)
	r := newRestartable(t)
	r.cfg.Governance = s.cfg
	r.restart()
	ref, p, in := riskyRun(t, r.e, "s")
	if _, err := r.e.Resume(s.resume(t, in, "a2", messages.DecisionApprove)); err != nil {
		t.Fatal(err)
	}
	p.Close()
	r.restart()
	info, ok := r.e.Interrupt("", in.InterruptID)
	if !ok || len(info.Signed) != 1 || info.Signed[0].Approver != "a2" {
		t.Fatalf("after the restart: %+v", info)
	}
	if _, err := r.e.Resume(s.resume(t, in, "a2", messages.DecisionApprove)); !errors.Is(err, governance.ErrDuplicateApprover) {
		t.Fatalf("a2 again: %v", err)
	}
	if _, err := r.e.Resume(s.resume(t, in, "a1", messages.DecisionApprove)); err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(context.Background(), r.e, "", "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Until(context.Background(), testkit.TerminalOf(ref.RunID)); err != nil {
		t.Fatal(err)
	}
	events := r.all("s")
	testkit.AssertInvariants(t, events)
	if !publishRan(events) {
		t.Fatal("the tool did not run")
	}
}

// followAll waits for the run's end and returns all its events.
func followAll(t *testing.T, e *actors.Engine, p *testkit.Probe, ref actors.RunRef) []*messages.Envelope {
	t.Helper()
	if _, err := p.Until(context.Background(), testkit.TerminalOf(ref.RunID)); err != nil {
		t.Fatal(err)
	}
	events, err := testkit.Follow(context.Background(), e, ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// riskyRunTimingOut is riskyRun with an approval timeout of one minute
// and the run's timeout action.
func riskyRunTimingOut(t *testing.T, e *actors.Engine, session messages.SessionID, action messages.Decision) (actors.RunRef, *testkit.Probe, *messages.InterruptRaisedPayload) {
	t.Helper()
	ref, p, in := startRisky(t, e, messages.StartRun{Question: "q", SessionID: session, ApprovalTimeoutSeconds: 60, ApprovalTimeoutAction: action})
	if in.TimeoutAction != messages.DecisionReject {
		t.Fatalf("a signed interrupt announces timeout_action %q (the run asked for %q), want reject", in.TimeoutAction, action)
	}
	return ref, p, in
}

// expiredRejected checks that the run's one interrupt expired rejected
// and that the covered tool did not run.
func expiredRejected(t *testing.T, events []*messages.Envelope) {
	t.Helper()
	testkit.AssertInvariants(t, events)
	exp := payloads[*messages.InterruptExpiredPayload](events)
	if len(exp) != 1 || exp[0].Action != messages.DecisionReject {
		t.Fatalf("interrupt_expired %+v, want one, rejected", exp)
	}
	if publishRan(events) {
		t.Fatal("the policy-covered tool ran without its signatures, at the timeout")
	}
}

// TestGovernance_TimeoutNeverGrants: a policy-covered (2-of-3) tool call
// whose approval times out is rejected, whatever the run's timeout action
// (approve, reject, the default), with no signature or one of two; a
// signature after the expiry is refused. Signatures complete before the
// expiry decide it as usual, and the timer takes nothing afterwards.
func TestGovernance_TimeoutNeverGrants(t *testing.T) {
	t.Parallel()
	s := newSigners(t, 3, 2)
	for _, action := range []messages.Decision{messages.DecisionApprove, messages.DecisionReject, ""} {
		for _, signatures := range []int{0, 1} {
			t.Run(fmt.Sprintf("%q/%d", action, signatures), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := testkit.NewEngine(t, actors.Config{Governance: s.cfg})
					ref, p, in := riskyRunTimingOut(t, e, "", action)
					defer p.Close()
					for k := 1; k <= signatures; k++ {
						if _, err := e.Resume(s.resume(t, in, fmt.Sprintf("a%d", k), messages.DecisionApprove)); err != nil {
							t.Fatal(err)
						}
					}
					time.Sleep(time.Minute)
					synctest.Wait()
					if _, err := e.Resume(s.resume(t, in, "a3", messages.DecisionApprove)); !errors.Is(err, actors.ErrInterruptExpired) {
						t.Fatalf("a signature after the expiry: %v, want ErrInterruptExpired", err)
					}
					expiredRejected(t, followAll(t, e, p, ref))
				})
			})
		}
	}
	t.Run("signed before the expiry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := testkit.NewEngine(t, actors.Config{Governance: s.cfg})
			ref, p, in := riskyRunTimingOut(t, e, "", messages.DecisionReject)
			defer p.Close()
			time.Sleep(59 * time.Second)
			for _, a := range []string{"a1", "a2"} {
				if _, err := e.Resume(s.resume(t, in, a, messages.DecisionApprove)); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(time.Hour)
			events := followAll(t, e, p, ref)
			testkit.AssertInvariants(t, events)
			if !publishRan(events) || testkit.Count(events, messages.InterruptExpired) != 0 {
				t.Fatal("fully signed before its expiry: the tool did not run, or the interrupt expired too")
			}
		})
	})
}

// TestGovernance_TimeoutAfterARestart: one signature of two, the engine
// stops (the run kept in the journal), and comes back after the expiry
// with a run asking to approve on timeout: the interrupt expires at once,
// rejected, and the tool never runs; the same when the server comes back
// without the governance policy (the interrupt stays covered: its rule is
// journaled with it).
func TestGovernance_TimeoutAfterARestart(t *testing.T) {
	t.Parallel()
	s := newSigners(t, 3, 2)
	for _, policyBack := range []bool{true, false} {
		t.Run(fmt.Sprintf("policy %v", policyBack), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRestartable(t)
				r.cfg.Governance = s.cfg
				r.restart()
				ref, p, in := riskyRunTimingOut(t, r.e, "s", messages.DecisionApprove)
				if _, err := r.e.Resume(s.resume(t, in, "a1", messages.DecisionApprove)); err != nil {
					t.Fatal(err)
				}
				p.Close()
				if err := r.e.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * time.Minute) // the server is down past the expiry
				if !policyBack {
					r.cfg.Governance = nil
				}
				r.start()
				p, err := testkit.NewProbe(context.Background(), r.e, "", "s", 0)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				if _, err := p.Until(context.Background(), testkit.TerminalOf(ref.RunID)); err != nil {
					t.Fatal(err)
				}
				expiredRejected(t, r.all("s"))
			})
		})
	}
}

// startRisky starts cmd with the scenario of one worker calling the
// high-risk publish tool and returns the run, a probe of its session and
// its policy-covered tool approval.
func startRisky(t *testing.T, e *actors.Engine, cmd messages.StartRun) (actors.RunRef, *testkit.Probe, *messages.InterruptRaisedPayload) {
	t.Helper()
	ctx := context.Background()
	cmd.Scenario = &messages.Scenario{Nodes: 1, Approvals: 1, RiskyApprovals: 1}
	ref, err := e.StartRun(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, e, "", ref.SessionID, 0)
	if err != nil {
		t.Fatal(err)
	}
	events, err := p.Until(ctx, func(env *messages.Envelope) bool { return env.Type == messages.InterruptRaised })
	if err != nil {
		t.Fatal(err)
	}
	in := events[len(events)-1].Payload.(*messages.InterruptRaisedPayload)
	if in.Kind != messages.InterruptToolApproval || in.ToolName != model.ToolPublish || in.Evidence == nil || in.Approval == nil {
		t.Fatalf("interrupt %+v", in)
	}
	return ref, p, in
}
