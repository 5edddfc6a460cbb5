package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
)

// Records are derived from journaled events. Some facts of a decision
// arrive before it: the evidence digest with interrupt_raised, the
// approvers' signatures with approval_signature_added. They are kept in
// the store (sealed, under the pending prefix) until the interrupt's
// outcome, which may come after a restart, and go into its record.

// pending is what the log knows of an open interrupt.
type pending struct {
	Kind           messages.InterruptKind    `json:"kind"`
	EvidenceDigest string                    `json:"evidence_digest,omitempty"`
	ToolName       string                    `json:"tool_name,omitempty"`
	NodeID         string                    `json:"node_id,omitempty"`
	Signatures     []messages.AuditSignature `json:"signatures,omitempty"`
	// Approval is the signature rule of a policy-covered interrupt.
	Approval *messages.ApprovalRequirement `json:"approval,omitempty"`
}

// required is how many signatures decision d of the interrupt needs (0:
// not covered, or no decision).
func (pd pending) required(d messages.Decision) int {
	switch {
	case pd.Approval == nil || d == messages.DecisionCancel:
		return 0
	case d == messages.DecisionReject:
		return max(pd.Approval.RejectRequired, 1)
	}
	return pd.Approval.Required
}

// Audited reports whether events of type t take part in the audit log
// (a hub passes only those to Record).
func Audited(t messages.EventType) bool {
	switch t {
	case messages.InterruptRaised, messages.ApprovalSignatureAdded, messages.InterruptResolved, messages.InterruptExpired,
		messages.SubteamSpawned, messages.SteeringApplied, messages.SteeringRejected, messages.RunError:
		return true
	}
	return false
}

// Record appends the records the journaled events of one of tenant's
// sessions make (in order; events of other types are ignored), durably
// (fsync) before it returns, and moves the session's cursor (key is its
// journal key) past them. The caller passes each journaled batch once, in
// seq order.
//
// The cursor is what CatchUp starts from after a crash between the
// journal's fsync and this one. A batch without a decision moves it
// without an fsync and without the lock (one hub per session writes it):
// if that write is lost, CatchUp reads a few more events, none of which
// makes a record; a batch with decisions writes it with its records.
func (l *Log) Record(ctx context.Context, tenant messages.TenantID, key messages.SessionID, events []*messages.Envelope) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	release, err := l.acquire()
	if err != nil {
		return err
	}
	defer release()
	return l.record(tenant, key, events)
}

// record is Record for a caller that holds the store open (acquire).
func (l *Log) record(tenant messages.TenantID, key messages.SessionID, events []*messages.Envelope) error {
	if l.ro {
		return ErrReadOnly
	}
	if len(events) == 0 {
		return nil
	}
	last := events[len(events)-1].Seq
	if !slices.ContainsFunc(events, func(e *messages.Envelope) bool { return Audited(e.Type) }) {
		// Most batches: no lock, no fsync.
		return l.setCursor(l.db, tenant, key, last, pebble.NoSync)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.db.NewIndexedBatch() // reads see the pending state this batch wrote
	defer b.Close()
	if err := l.setCursor(b, tenant, key, last, nil); err != nil {
		return err
	}
	staged := map[messages.TenantID]link{}
	for _, env := range events {
		r, err := derive(b, tenant, env)
		if err != nil {
			return err
		}
		if r == nil {
			continue
		}
		if err := l.stage(b, staged, r); err != nil {
			return err
		}
	}
	// A batch that only adds to the facts of open interrupts (a raise, a
	// signature) makes no record: it needs no fsync of its own. If it is
	// lost, its cursor is lost with it and CatchUp derives it again; a
	// later fsync makes it durable (pebble's log is written in order).
	return l.commit(b, staged, false)
}

// derive returns the record env makes (nil for none) and updates the
// pending state in b.
func derive(b *pebble.Batch, tenant messages.TenantID, env *messages.Envelope) (*messages.AuditRecord, error) {
	rec := &messages.AuditRecord{Tenant: tenant, Time: env.Timestamp, RunID: env.RunID, SessionID: env.SessionID, Seq: env.Seq}
	byTenant := []string{"tenant:" + string(tenant)}
	switch p := env.Payload.(type) {
	case *messages.InterruptRaisedPayload:
		if p.Evidence == nil && p.Kind != messages.InterruptInfoRequest && p.Kind != messages.InterruptChoice {
			return nil, nil
		}
		pd, err := getPending(b, tenant, p.InterruptID)
		if err != nil {
			return nil, err
		}
		pd.Kind, pd.ToolName, pd.NodeID, pd.Approval = p.Kind, p.ToolName, p.NodeID, p.Approval
		switch {
		case p.Approval != nil:
			pd.EvidenceDigest = p.Approval.EvidenceDigest
		case p.Evidence != nil:
			if pd.EvidenceDigest, err = governance.EvidenceDigest(p.Evidence); err != nil {
				return nil, fmt.Errorf("audit: %w", err)
			}
		}
		return nil, putPending(b, tenant, p.InterruptID, pd)
	case *messages.ApprovalSignatureAddedPayload:
		pd, err := getPending(b, tenant, p.InterruptID)
		if err != nil {
			return nil, err
		}
		if pd.EvidenceDigest == "" {
			pd.EvidenceDigest = p.Statement.EvidenceDigest
		}
		pd.Signatures = append(pd.Signatures, messages.AuditSignature{Approver: p.Approver, Statement: p.Statement, Signature: p.Signature})
		return nil, putPending(b, tenant, p.InterruptID, pd)
	case *messages.InterruptResolvedPayload:
		pd, err := takePending(b, tenant, p.InterruptID)
		if err != nil {
			return nil, err
		}
		rec.InterruptID = p.InterruptID
		rec.Kind = resolutionKind(p.Kind, p.Decision)
		rec.Details = messages.AuditDetails{InterruptKind: p.Kind, Decision: p.Decision, EvidenceDigest: pd.EvidenceDigest,
			Feedback: p.Feedback, Reason: p.Reason, EditedArgs: p.EditedArgs, Choices: p.Choices, ToolName: pd.ToolName, NodeID: pd.NodeID, Required: pd.required(p.Decision)}
		switch {
		case p.Decision == messages.DecisionCancel:
			rec.Actor = []string{"system"}
		case len(p.Signers) > 0:
			rec.Actor = append([]string(nil), p.Signers...)
			rec.Details.Signatures = signaturesOf(pd.Signatures, p.Signers, p.Decision)
		default:
			rec.Actor = byTenant
		}
		return rec, nil
	case *messages.InterruptExpiredPayload:
		pd, err := takePending(b, tenant, p.InterruptID)
		if err != nil {
			return nil, err
		}
		rec.InterruptID, rec.Kind, rec.Actor = p.InterruptID, messages.AuditInterruptExpired, []string{"system:timeout"}
		rec.Details = messages.AuditDetails{InterruptKind: p.Kind, Decision: p.Action, EvidenceDigest: pd.EvidenceDigest,
			ToolName: pd.ToolName, NodeID: pd.NodeID, Signatures: pd.Signatures, Required: pd.required(p.Action)}
		return rec, nil
	case *messages.SubteamSpawnedPayload:
		wave := p.AppliedAtWave
		rec.Kind, rec.Actor = messages.AuditSubteamSpawned, []string{"system"}
		rec.Details = messages.AuditDetails{NodeID: p.ParentNodeID, TeamID: p.TeamID, AppliedAtWave: &wave, Message: p.Goal}
		return rec, nil
	case *messages.SteeringAppliedPayload:
		wave := p.AppliedAtWave
		rec.Kind, rec.Actor = messages.AuditSteeringApplied, byTenant
		rec.Details = messages.AuditDetails{SteeringID: p.SteeringID, AppliedAtWave: &wave}
		return rec, nil
	case *messages.SteeringRejectedPayload:
		rec.Kind, rec.Actor = messages.AuditSteeringRejected, byTenant
		rec.Details = messages.AuditDetails{SteeringID: p.SteeringID, Message: p.Error}
		return rec, nil
	case *messages.RunErrorPayload:
		if p.Code != messages.ErrCodeAborted {
			return nil, nil
		}
		rec.Kind, rec.Actor = messages.AuditAbort, byTenant
		rec.Details = messages.AuditDetails{ErrorCode: p.Code, Message: p.Message}
		return rec, nil
	}
	return nil, nil
}

// resolutionKind is the record kind of an interrupt's answer.
func resolutionKind(k messages.InterruptKind, d messages.Decision) messages.AuditKind {
	if d == messages.DecisionCancel {
		return messages.AuditInterruptCancelled
	}
	switch k {
	case messages.InterruptInfoRequest:
		return messages.AuditInfoResponse
	case messages.InterruptChoice:
		return messages.AuditChoiceResponse
	}
	var subject string
	switch k {
	case messages.InterruptPlanApproval:
		subject = "plan"
	case messages.InterruptNodeApproval:
		subject = "node"
	case messages.InterruptToolApproval:
		subject = "tool"
	case messages.InterruptSpawnApproval:
		subject = "spawn"
	default:
		subject = string(k)
	}
	switch d {
	case messages.DecisionReject:
		return messages.AuditKind(subject + "_rejection")
	case messages.DecisionRevise:
		return messages.AuditKind(subject + "_revision")
	}
	return messages.AuditKind(subject + "_approval")
}

// signaturesOf are the signatures of signers for decision d.
func signaturesOf(all []messages.AuditSignature, signers []string, d messages.Decision) []messages.AuditSignature {
	var out []messages.AuditSignature
	for _, name := range signers {
		for _, s := range all {
			if s.Approver == name && s.Statement.Decision == d {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

func getPending(b *pebble.Batch, tenant messages.TenantID, id string) (pending, error) {
	var pd pending
	k := pendingKey(tenant, id)
	v, closer, err := b.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return pd, nil
	} else if err != nil {
		return pd, fmt.Errorf("audit: %w", err)
	}
	defer closer.Close()
	body, err := unseal(k, v)
	if err != nil {
		return pd, err
	}
	if err := json.Unmarshal(body, &pd); err != nil {
		return pd, fmt.Errorf("%w: pending interrupt %s: %v", ErrCorrupt, id, err)
	}
	return pd, nil
}

func putPending(b *pebble.Batch, tenant messages.TenantID, id string, pd pending) error {
	body, err := json.Marshal(pd)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	k := pendingKey(tenant, id)
	return b.Set(k, sealValue(k, body), nil)
}

// takePending reads and deletes an interrupt's pending state.
func takePending(b *pebble.Batch, tenant messages.TenantID, id string) (pending, error) {
	pd, err := getPending(b, tenant, id)
	if err != nil {
		return pd, err
	}
	return pd, b.Delete(pendingKey(tenant, id), nil)
}
