package audit_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/audit"
	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
)

// events stamps payloads as a hub would: seqs from 1, a second apart.
func events(first uint64, payloads ...messages.Payload) []*messages.Envelope {
	out := make([]*messages.Envelope, len(payloads))
	for i, p := range payloads {
		seq := first + uint64(i)
		out[i] = &messages.Envelope{Seq: seq, Type: p.EventType(), Timestamp: t0.Add(time.Duration(seq) * time.Second),
			SessionID: "s1", RunID: "r1", Payload: p}
	}
	return out
}

// TestLog_RecordDecisions feeds the log the journaled events of a run:
// a signed tool approval whose signatures arrive before a restart and
// whose decision comes after it, a plain node rejection, a plan approval
// that expires, steering, a spawn and an abort; other events make no
// record.
func TestLog_RecordDecisions(t *testing.T) {
	t.Parallel()
	pk, sk := serverKey(t)
	dir := filepath.Join(t.TempDir(), "audit")
	ctx := context.Background()
	ev := &messages.EvidencePackage{ID: "ev1", Title: "Run publish", RiskLevel: messages.RiskHigh,
		RecommendedActions: []messages.RecommendedAction{{Decision: messages.DecisionApprove, Label: "Run it"}}}
	digest, err := governance.EvidenceDigest(ev)
	if err != nil {
		t.Fatal(err)
	}
	stmt := messages.ApprovalStatement{InterruptID: "i1", EvidenceDigest: digest, Decision: messages.DecisionApprove}
	sig := func(name string) *messages.ApprovalSignatureAddedPayload {
		return &messages.ApprovalSignatureAddedPayload{InterruptID: "i1", Approver: name, Statement: stmt, Signature: []byte("sig-" + name)}
	}

	l := openLog(t, dir, sk)
	if err := l.Record(ctx, "acme", "acme/s1", events(1,
		&messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval, ToolName: "publish", Evidence: ev,
			Approval: &messages.ApprovalRequirement{EvidenceDigest: digest, Required: 2}},
		&messages.TextDeltaPayload{Delta: "not a decision"},
		sig("alice"),
	)); err != nil {
		t.Fatal(err)
	}
	if err := l.Record(ctx, "acme", "acme/s1", events(4, sig("bob"))); err != nil {
		t.Fatal(err)
	}
	if l.Head("acme") != 0 {
		t.Fatalf("records before any decision: %d", l.Head("acme"))
	}
	if err := l.Close(); err != nil { // a restart between the signatures and the decision
		t.Fatal(err)
	}
	l = openLog(t, dir, sk)
	wave := 1
	if err := l.Record(ctx, "acme", "acme/s1", events(5,
		&messages.InterruptResolvedPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval, Decision: messages.DecisionApprove, Signers: []string{"alice", "bob"}},
		&messages.InterruptRaisedPayload{InterruptID: "i2", Kind: messages.InterruptNodeApproval, NodeID: "n002", Evidence: ev},
		&messages.InterruptResolvedPayload{InterruptID: "i2", Kind: messages.InterruptNodeApproval, Decision: messages.DecisionReject, Feedback: "no"},
		&messages.InterruptRaisedPayload{InterruptID: "i3", Kind: messages.InterruptPlanApproval, Evidence: ev},
		&messages.InterruptExpiredPayload{InterruptID: "i3", Kind: messages.InterruptPlanApproval, Action: messages.DecisionReject},
		&messages.SteeringAppliedPayload{SteeringID: "st1", AppliedAtWave: wave},
		&messages.SteeringRejectedPayload{SteeringID: "st2", Error: "bad diff"},
		&messages.SubteamSpawnedPayload{ParentNodeID: "n001", TeamID: "n001-t", Goal: "dig", AppliedAtWave: 2},
		&messages.RunErrorPayload{Code: messages.ErrCodeAborted, Message: "aborted by the client"},
	)); err != nil {
		t.Fatal(err)
	}
	page, err := l.Read(ctx, "acme", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []messages.AuditKind
	for _, r := range page.Records {
		kinds = append(kinds, r.Kind)
	}
	want := []messages.AuditKind{messages.AuditToolApproval, messages.AuditNodeRejection, messages.AuditInterruptExpired,
		messages.AuditSteeringApplied, messages.AuditSteeringRejected, messages.AuditSubteamSpawned, messages.AuditAbort}
	if len(kinds) != len(want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("kinds %v, want %v", kinds, want)
		}
	}
	tool := page.Records[0]
	if tool.InterruptID != "i1" || tool.Seq != 5 || tool.RunID != "r1" || tool.SessionID != "s1" || tool.Details.EvidenceDigest != digest ||
		tool.Details.ToolName != "publish" || len(tool.Details.Signatures) != 2 || string(tool.Details.Signatures[1].Signature) != "sig-bob" ||
		len(tool.Actor) != 2 || tool.Actor[0] != "alice" {
		t.Fatalf("tool approval record: %+v", tool)
	}
	node := page.Records[1]
	if node.Actor[0] != "tenant:acme" || node.Details.NodeID != "n002" || node.Details.EvidenceDigest != digest || node.Details.Feedback != "no" {
		t.Fatalf("node rejection record: %+v", node)
	}
	if exp := page.Records[2]; exp.Actor[0] != "system:timeout" || exp.Details.Decision != messages.DecisionReject {
		t.Fatalf("expiry record: %+v", exp)
	}
	if rep, err := l.VerifyStore(ctx, pk); err != nil || rep.Records["acme"] != 7 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	if err := audit.Verify(page.Records, pk); err != nil {
		t.Fatal(err)
	}
}
