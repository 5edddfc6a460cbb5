package audit_test

import (
	"context"
	"path/filepath"
	"strings"
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

// TestVerify_CoveredDecisionsNeedTheirSignatures: the records of a
// policy-covered (2-of-n) interrupt carry how many signatures their
// decision needed; the verifier passes a decision with them and a
// rejection at the expiry, and flags an approval with one signature of
// two, and an expiry that approved (what a timer must never do), even
// though the server signed those records.
func TestVerify_CoveredDecisionsNeedTheirSignatures(t *testing.T) {
	t.Parallel()
	pk, sk := serverKey(t)
	ctx := context.Background()
	req := &messages.ApprovalRequirement{EvidenceDigest: "sha256:d", Required: 2, RejectRequired: 1}
	stmt := func(id string, d messages.Decision) messages.ApprovalStatement {
		return messages.ApprovalStatement{InterruptID: id, EvidenceDigest: "sha256:d", Decision: d}
	}
	sig := func(id, who string, d messages.Decision) *messages.ApprovalSignatureAddedPayload {
		return &messages.ApprovalSignatureAddedPayload{InterruptID: id, Approver: who, Statement: stmt(id, d), Signature: []byte("sig-" + who)}
	}
	raise := func(id string) *messages.InterruptRaisedPayload {
		return &messages.InterruptRaisedPayload{InterruptID: id, Kind: messages.InterruptToolApproval, ToolName: "publish",
			Evidence: &messages.EvidencePackage{ID: "ev", RiskLevel: messages.RiskHigh}, Approval: req}
	}
	for _, tc := range []struct {
		name     string
		events   []messages.Payload
		required int
		bad      string // "" when it verifies
	}{
		{"approved with two", []messages.Payload{raise("i"), sig("i", "alice", messages.DecisionApprove), sig("i", "bob", messages.DecisionApprove),
			&messages.InterruptResolvedPayload{InterruptID: "i", Kind: messages.InterruptToolApproval, Decision: messages.DecisionApprove, Signers: []string{"alice", "bob"}}}, 2, ""},
		{"rejected with one", []messages.Payload{raise("i"), sig("i", "alice", messages.DecisionReject),
			&messages.InterruptResolvedPayload{InterruptID: "i", Kind: messages.InterruptToolApproval, Decision: messages.DecisionReject, Signers: []string{"alice"}}}, 1, ""},
		{"expired rejected", []messages.Payload{raise("i"), sig("i", "alice", messages.DecisionApprove),
			&messages.InterruptExpiredPayload{InterruptID: "i", Kind: messages.InterruptToolApproval, Action: messages.DecisionReject}}, 1, ""},
		{"approved with one", []messages.Payload{raise("i"), sig("i", "alice", messages.DecisionApprove),
			&messages.InterruptResolvedPayload{InterruptID: "i", Kind: messages.InterruptToolApproval, Decision: messages.DecisionApprove, Signers: []string{"alice"}}}, 2,
			"approve with 1 of the 2 approvers' signatures"},
		{"expired approved", []messages.Payload{raise("i"),
			&messages.InterruptExpiredPayload{InterruptID: "i", Kind: messages.InterruptToolApproval, Action: messages.DecisionApprove}}, 2,
			"a timer may only reject it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := openLog(t, "", sk)
			if err := l.Record(ctx, "acme", "acme/s1", events(1, tc.events...)); err != nil {
				t.Fatal(err)
			}
			page, err := l.Read(ctx, "acme", 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Records) != 1 || page.Records[0].Details.Required != tc.required {
				t.Fatalf("records %+v, want one requiring %d signatures", page.Records, tc.required)
			}
			err = audit.Verify(page.Records, pk)
			if tc.bad == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantBad(t, err, "acme", 1)
			if !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("verify: %v, want %q", err, tc.bad)
			}
			if _, err := l.VerifyStore(ctx, pk); err == nil {
				t.Fatal("VerifyStore passed a covered decision without its signatures")
			}
		})
	}
}

// TestLog_RecordChoice: a human's answer to a choice is a choice_response
// record naming the chosen option ids, decided by the tenant; a choice
// that expires is an interrupt_expired record that chose nothing.
func TestLog_RecordChoice(t *testing.T) {
	t.Parallel()
	pk, sk := serverKey(t)
	ctx := context.Background()
	l := openLog(t, filepath.Join(t.TempDir(), "audit"), sk)
	opts := []messages.ChoiceOption{{ID: "red", Label: "Red"}, {ID: "blue", Label: "Blue"}}
	if err := l.Record(ctx, "acme", "acme/s1", events(1,
		&messages.InterruptRaisedPayload{InterruptID: "c1", Kind: messages.InterruptChoice, Question: "Which?", Options: opts, MultipleChoice: true},
		&messages.InterruptResolvedPayload{InterruptID: "c1", Kind: messages.InterruptChoice, Decision: messages.DecisionApprove, Choices: []string{"blue", "red"}},
		&messages.InterruptRaisedPayload{InterruptID: "c2", Kind: messages.InterruptChoice, Question: "Which?", Options: opts},
		&messages.InterruptExpiredPayload{InterruptID: "c2", Kind: messages.InterruptChoice, Action: messages.DecisionReject},
	)); err != nil {
		t.Fatal(err)
	}
	page, err := l.Read(ctx, "acme", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 2 {
		t.Fatalf("records %+v, want 2", page.Records)
	}
	if r := page.Records[0]; r.Kind != messages.AuditChoiceResponse || r.InterruptID != "c1" || r.Actor[0] != "tenant:acme" ||
		r.Details.InterruptKind != messages.InterruptChoice || strings.Join(r.Details.Choices, ",") != "blue,red" {
		t.Fatalf("choice record: %+v", r)
	}
	if r := page.Records[1]; r.Kind != messages.AuditInterruptExpired || r.Details.Decision != messages.DecisionReject || len(r.Details.Choices) != 0 {
		t.Fatalf("expired choice record: %+v", r)
	}
	if err := audit.Verify(page.Records, pk); err != nil {
		t.Fatal(err)
	}
}
