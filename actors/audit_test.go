package actors_test

import (
	"context"
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
	pub, key, _, err := governance.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	log, err := audit.Open(audit.Config{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() }) // after the engine's shutdown: cleanups run in reverse
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
}
