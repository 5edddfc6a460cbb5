package actors_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/audit"
	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// TestAudit_SignedApprovalRecorded: a 2-of-3 signed tool approval reaches
// the audit log, through the hub, as one tool_approval record carrying
// both approvers' signatures (which verify) and the evidence digest,
// pointing at the journaled interrupt_resolved; the chain verifies under
// the server's key.
func TestAudit_SignedApprovalRecorded(t *testing.T) {
	t.Parallel()
	log, pub := testkit.AuditLog(t) // before the engine: it shuts down first
	s := newSigners(t, 3, 2)
	e := testkit.NewEngine(t, actors.Config{Governance: s.cfg, Audit: log})
	ref, p, in := riskyRun(t, e, "")
	defer p.Close()
	for _, a := range []string{"a1", "a3"} {
		if _, err := e.Resume(s.resume(t, in, a, messages.DecisionApprove)); err != nil {
			t.Fatal(err)
		}
	}
	events := followAll(t, e, p, ref)
	var resolved *messages.Envelope
	for _, env := range events {
		if env.Type == messages.InterruptResolved {
			resolved = env
		}
	}
	if resolved == nil {
		t.Fatal("no interrupt_resolved")
	}
	page, err := log.Read(context.Background(), messages.LocalTenant, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 1 {
		t.Fatalf("%d records: %+v", len(page.Records), page.Records)
	}
	r := page.Records[0]
	if r.Kind != messages.AuditToolApproval || r.InterruptID != in.InterruptID || r.Seq != resolved.Seq || r.RunID != ref.RunID ||
		r.Details.EvidenceDigest != in.Approval.EvidenceDigest || r.Details.ToolName != in.ToolName || len(r.Actor) != 2 || len(r.Details.Signatures) != 2 {
		t.Fatalf("record %+v", r)
	}
	for _, sig := range r.Details.Signatures {
		pk, ok := s.cfg.Tenants[messages.LocalTenant].Approvers[sig.Approver]
		if !ok || !governance.Verify(pk, sig.Statement, sig.Signature) {
			t.Fatalf("the recorded signature of %s does not verify", sig.Approver)
		}
	}
	if err := audit.Verify(page.Records, pub); err != nil {
		t.Fatal(err)
	}
	// The approvers' signatures inside the record verify against the
	// governance file; against another tenant's approvers, or with a
	// statement changed after signing, they do not.
	if err := audit.Verify(page.Records, pub, audit.WithApprovers(s.cfg)); err != nil {
		t.Fatal(err)
	}
	others := &governance.Config{Tenants: map[messages.TenantID]*governance.Tenant{messages.LocalTenant: {}}}
	var ve *audit.VerifyError
	if err := audit.Verify(page.Records, pub, audit.WithApprovers(others)); !errors.As(err, &ve) || !strings.Contains(ve.Reason, "is not an approver") {
		t.Fatalf("unknown approvers: %v", err)
	}
	r.Details.Signatures[1].Statement.Decision = messages.DecisionReject
	if err := audit.VerifyRecordApprovers(s.cfg, &r); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("a changed statement: %v", err)
	}
}

// TestAudit_EveryDecisionOfARun: a run with a plan gate, node gates (one
// rejected), a spawn gate and a steering note puts exactly one record in
// the audit log per decision event it journaled, in seq order, each
// pointing at its event.
func TestAudit_EveryDecisionOfARun(t *testing.T) {
	t.Parallel()
	log, pub := testkit.AuditLog(t) // before the engine: it shuts down first
	e := testkit.NewEngine(t, actors.Config{Audit: log})
	sc := messages.Scenario{Nodes: 4, Waves: 2, FanIn: 1, Tokens: 2, Spawn: messages.NodeSelector{IDs: []string{"n001"}},
		Steering: []messages.SteeringScript{{AtWave: 1, Note: "add a node on costs"}}}
	_, events := runWithAnswers(t, e, messages.StartRun{Question: "q", HITL: messages.HITLNode, Scenario: &sc},
		func(p *messages.InterruptRaisedPayload) messages.Resume {
			if p.Kind == messages.InterruptNodeApproval && p.NodeID == "n002" {
				return messages.Resume{Decision: messages.DecisionReject, Feedback: "not this one"}
			}
			return messages.Resume{Decision: messages.DecisionApprove}
		})
	type want struct {
		kind messages.AuditKind
		seq  uint64
	}
	var wants []want
	for _, env := range events {
		switch p := env.Payload.(type) {
		case *messages.InterruptResolvedPayload:
			k := map[messages.InterruptKind]string{messages.InterruptPlanApproval: "plan", messages.InterruptNodeApproval: "node",
				messages.InterruptSpawnApproval: "spawn", messages.InterruptToolApproval: "tool"}[p.Kind]
			suffix := "_approval"
			if p.Decision == messages.DecisionReject {
				suffix = "_rejection"
			}
			wants = append(wants, want{messages.AuditKind(k + suffix), env.Seq})
		case *messages.SubteamSpawnedPayload:
			wants = append(wants, want{messages.AuditSubteamSpawned, env.Seq})
		case *messages.SteeringAppliedPayload:
			wants = append(wants, want{messages.AuditSteeringApplied, env.Seq})
		case *messages.SteeringRejectedPayload:
			wants = append(wants, want{messages.AuditSteeringRejected, env.Seq})
		}
	}
	page, err := log.Read(context.Background(), messages.LocalTenant, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[messages.AuditKind]int{}
	for _, w := range wants {
		kinds[w.kind]++
	}
	for _, k := range []messages.AuditKind{messages.AuditPlanApproval, messages.AuditNodeApproval, messages.AuditNodeRejection,
		messages.AuditSpawnApproval, messages.AuditSubteamSpawned, messages.AuditSteeringApplied} {
		if kinds[k] == 0 {
			t.Errorf("the run journaled no decision of kind %s: %v", k, kinds)
		}
	}
	if len(page.Records) != len(wants) {
		t.Fatalf("%d records for %d decisions: %v", len(page.Records), len(wants), kinds)
	}
	for i, r := range page.Records {
		if r.Kind != wants[i].kind || r.Seq != wants[i].seq {
			t.Fatalf("record %d: %s at seq %d, want %s at seq %d", r.Index, r.Kind, r.Seq, wants[i].kind, wants[i].seq)
		}
		if r.InterruptID != "" && r.Details.EvidenceDigest == "" {
			t.Fatalf("record %d (%s) has no evidence digest", r.Index, r.Kind)
		}
	}
	if err := audit.Verify(page.Records, pub); err != nil {
		t.Fatal(err)
	}
}
