package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/conclave-ai/conclave/actors/interrupts"
	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
)

// Signed approvals (governance, docs/governance.md). When the tenant's
// policy covers an approval's risk level, its interrupt carries the
// requirement (interrupt_raised.approval) and the registry takes only
// signed decisions: each approver's valid signature is journaled as
// approval_signature_added (durably, before the API answers) and counts;
// the parked actor goes on once a decision has its m signatures. A
// signature refused is a warning event on the lane and changes nothing.
// After a restart the journaled signatures are counted again.

// signatureAckTimeout bounds how long recording a signature waits for the
// journal.
const signatureAckTimeout = 30 * time.Second

// signing returns what the registry needs for p if the policy covers it
// (setting p.Approval on a new interrupt), nil otherwise. restored are the
// signatures journaled before a restart.
func (t interruptTarget) signing(p *messages.InterruptRaisedPayload, lane messages.Lane, restored []*messages.ApprovalSignatureAddedPayload) *interrupts.Signing {
	gov := t.e.cfg.Governance.Of(t.run.tenant)
	if p.Evidence == nil || (gov == nil && p.Approval == nil) {
		return nil
	}
	req := p.Approval
	if req == nil { // a new interrupt: does the policy cover it?
		rule, ok := gov.Policy.Covers(p.Evidence.RiskLevel)
		if !ok {
			return nil
		}
		req = &messages.ApprovalRequirement{Required: rule.Required, RejectRequired: gov.Policy.RejectRequired, Approvers: rule.Approvers}
		digest, err := governance.EvidenceDigest(p.Evidence)
		if err != nil {
			// Fail closed: the interrupt still needs signatures, but no
			// statement can name a digest, so nobody can sign it and it
			// can only expire (rejected) or be cancelled.
			t.e.cfg.Logger.Error("governance: evidence digest; the interrupt cannot be signed and will be rejected at its expiry", "interrupt", p.InterruptID, "err", err)
			digest = "unavailable"
		}
		req.EvidenceDigest = digest
		p.Approval = req
	}
	// The rule it was raised under (journaled with it) stands after a
	// restart, with the approvers' current keys. A covered interrupt stays
	// covered when the server has lost its tenant's approvers (no
	// --governance any more): no signature verifies, so it is never
	// approved; it expires rejected, or is cancelled.
	var keys map[string]*governance.PublicKey
	if gov != nil {
		keys = gov.Approvers
	} else {
		t.e.cfg.Logger.Error("governance: an interrupt raised under a signature policy, and the server has no approvers for its tenant now: "+
			"it cannot be signed and will be rejected at its expiry", "interrupt", p.InterruptID, "tenant", t.run.tenant)
	}
	tally := governance.NewTally(p.InterruptID, req.EvidenceDigest, governance.Rule{Required: req.Required, Approvers: req.Approvers}, req.RejectRequired, keys)
	for _, s := range restored {
		if _, _, err := tally.Add(s.Approver, s.Statement, s.Signature); err != nil {
			t.e.cfg.Logger.Error("governance: a journaled signature does not verify any more; not counted", "interrupt", p.InterruptID, "approver", s.Approver, "err", err)
		}
	}
	root := t.e.system.Root
	return &interrupts.Signing{
		Tally: tally, Digest: req.EvidenceDigest,
		Record: func(sig governance.Signature, count, required int, full bool) error {
			ctx, cancel := context.WithTimeout(context.Background(), signatureAckTimeout)
			defer cancel()
			return t.run.out.postDurable(ctx, root, &messages.Emit{RunID: t.run.runID, AgentID: t.agent, Lane: lane,
				Payload: &messages.ApprovalSignatureAddedPayload{InterruptID: p.InterruptID, Approver: sig.Approver, Statement: sig.Statement,
					Signature: sig.Signature, Count: count, Required: required, IsFullySigned: full}})
		},
		Refused: func(approver string, err error) {
			t.run.post(root, t.agent, lane, messages.NewWarning(messages.WarnSignatureRefused,
				fmt.Sprintf("interrupt %s: the signature of %q was refused: %v", p.InterruptID, approver, err)))
		},
	}
}

// policyCovers reports whether a call of tool name needs a signed
// approval in tenant's policy, whatever the run's hitl mode.
func (e *Engine) policyCovers(tenant messages.TenantID, name string) bool {
	gov := e.cfg.Governance.Of(tenant)
	if gov == nil {
		return false
	}
	_, ok := gov.Policy.Covers(e.toolRisk(name))
	return ok
}
