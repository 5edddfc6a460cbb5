package messages

import (
	"encoding/json"
	"time"
)

// AuditKind is what an audit record records (docs/audit.md).
type AuditKind string

// Audit record kinds. An approval interrupt's answer is
// <kind>_approval, <kind>_rejection or <kind>_revision; an interrupt that
// ended because its run or agent stopped first is interrupt_cancelled.
const (
	AuditPlanApproval   AuditKind = "plan_approval"
	AuditPlanRejection  AuditKind = "plan_rejection"
	AuditPlanRevision   AuditKind = "plan_revision"
	AuditNodeApproval   AuditKind = "node_approval"
	AuditNodeRejection  AuditKind = "node_rejection"
	AuditToolApproval   AuditKind = "tool_approval"
	AuditToolRejection  AuditKind = "tool_rejection"
	AuditToolRevision   AuditKind = "tool_revision"
	AuditSpawnApproval  AuditKind = "spawn_approval"
	AuditSpawnRejection AuditKind = "spawn_rejection"
	AuditInfoResponse   AuditKind = "info_response"
	// AuditChoiceResponse: a human's answer to a choice; details.choices
	// are the chosen option ids.
	AuditChoiceResponse     AuditKind = "choice_response"
	AuditInterruptCancelled AuditKind = "interrupt_cancelled"
	AuditInterruptExpired   AuditKind = "interrupt_expired"
	// AuditSubteamSpawned: an approved (or ungated) spawn_subteam joined
	// the plan at a wave boundary.
	AuditSubteamSpawned   AuditKind = "subteam_spawned"
	AuditSteeringApplied  AuditKind = "steering_applied"
	AuditSteeringRejected AuditKind = "steering_rejected"
	AuditAbort            AuditKind = "abort"
)

// AuditRecord is one entry of a tenant's hash-chained, server-signed audit
// log (package audit, docs/audit.md). Index counts the tenant's records
// from 1; PrevHash is the previous record's Hash (64 zeros after "sha256:"
// for the first); Hash is "sha256:" and the hex SHA-256 of the record's
// canonical bytes (RFC 8785) without its hash and signature members;
// Signature is the server's ML-DSA-65 signature of those same bytes
// (context "conclave/audit/v1").
type AuditRecord struct {
	Tenant TenantID  `json:"tenant"`
	Index  uint64    `json:"index"`
	Time   time.Time `json:"time"`
	Kind   AuditKind `json:"kind"`
	// RunID, SessionID and Seq locate the journaled event the record was
	// derived from.
	RunID       RunID     `json:"run_id,omitempty"`
	SessionID   SessionID `json:"session_id,omitempty"`
	Seq         uint64    `json:"seq,omitempty"`
	InterruptID string    `json:"interrupt_id,omitempty"`
	// Actor is who decided: the approvers whose signatures decided it,
	// "tenant:<id>" for a decision made through the tenant's API token,
	// "system:timeout" for an expiry, "system" for the runtime.
	Actor     []string     `json:"actor"`
	Details   AuditDetails `json:"details"`
	PrevHash  string       `json:"prev_hash"`
	Hash      string       `json:"hash,omitempty"`
	Signature []byte       `json:"signature,omitempty"`
}

// AuditDetails are the facts of a decision; which fields are set depends
// on the record's kind.
type AuditDetails struct {
	InterruptKind InterruptKind `json:"interrupt_kind,omitempty"`
	Decision      Decision      `json:"decision,omitempty"`
	// EvidenceDigest is the digest of the evidence package the approvers
	// were shown (governance.EvidenceDigest).
	EvidenceDigest string `json:"evidence_digest,omitempty"`
	// Signatures are the approvers' signatures of a policy-covered
	// interrupt, in the order they arrived.
	Signatures []AuditSignature `json:"signatures,omitempty"`
	// Required is, for a policy-covered interrupt, how many approvers'
	// signatures its decision needs under the rule it was raised with
	// (absent: not covered). A verifier flags a covered decision with
	// fewer signatures, and a covered interrupt that expired other than
	// rejected.
	Required   int             `json:"required,omitempty"`
	Feedback   string          `json:"feedback,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	EditedArgs json.RawMessage `json:"edited_args,omitempty"`
	// Choices are the option ids a choice_response chose.
	Choices    []string `json:"choices,omitempty"`
	ToolName   string   `json:"tool_name,omitempty"`
	NodeID     string   `json:"node_id,omitempty"`
	TeamID     string   `json:"team_id,omitempty"`
	SteeringID string   `json:"steering_id,omitempty"`
	// AppliedAtWave is the wave boundary of a spawn or steering.
	AppliedAtWave *int      `json:"applied_at_wave,omitempty"`
	ErrorCode     ErrorCode `json:"error_code,omitempty"`
	Message       string    `json:"message,omitempty"`
}

// AuditSignature is one approver's signature of an approval statement.
type AuditSignature struct {
	Approver  string            `json:"approver"`
	Statement ApprovalStatement `json:"statement"`
	Signature []byte            `json:"signature"`
}

// AuditPage is the answer of GET /api/v1/audit: the caller's tenant's
// records after a cursor, in index order. NextAfter is the cursor of the
// next page (the last record's index); Head is the tenant's last index
// when the page was read, so a client knows when it has everything and a
// verifier can tell a truncated export.
type AuditPage struct {
	Records   []AuditRecord `json:"records"`
	NextAfter uint64        `json:"next_after"`
	Head      uint64        `json:"head"`
}
