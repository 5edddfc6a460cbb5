// Package audit is the tenant-scoped, tamper-evident log of every decision
// taken in Conclave: approvals, rejections and revisions of plans, nodes,
// tools and spawns (with the approvers' signatures and the evidence
// digest), interrupt expiries and cancellations, spawned sub-teams,
// steering applied or rejected, and aborts.
//
// Each tenant's records form a hash chain: record n carries the SHA-256 of
// record n-1's canonical bytes (RFC 8785), and every record is signed by
// the server's ML-DSA-65 key (governance.LoadOrCreateServerKey). Changing
// any byte of a record breaks its hash and signature; deleting, inserting or
// reordering records breaks the indexes and the chain; deleting the last
// records is caught against the tenant's stored head (docs/audit.md says
// what this cannot catch: a rollback of both the tail and the head).
//
// Records are derived from the journaled events (Log.Record, called by
// each session's hub once a batch is fsynced and before it is offered to
// anyone), so actors need not know the audit exists. The store is its own
// pebble database (DATA/audit): it is never trimmed by retention nor
// truncated by a journal repair, and it can be verified on its own.
//
// A top-level package because the audit trail is a separate part of the
// architecture that operators and third parties read and verify.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/cloudflare/circl/sign/mldsa/mldsa65"

	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
)

// SigningContext is the ML-DSA-65 context string (FIPS 204 ctx) of the
// server's record signatures: a signature over the same bytes made for
// another purpose does not verify as an audit signature.
const SigningContext = "conclave/audit/v1"

// GenesisHash is the prev_hash of a tenant's first record.
var GenesisHash = "sha256:" + strings.Repeat("0", 64)

// RecordBytes are the canonical bytes of r that are hashed and signed: r
// without its hash and signature members, encoded by RFC 8785.
func RecordBytes(r messages.AuditRecord) ([]byte, error) {
	r.Hash, r.Signature = "", nil
	return governance.Canonical(r)
}

// hashOf is "sha256:" and the hex SHA-256 of b.
func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// seal sets r's PrevHash, Hash and Signature (r's other fields are final).
func seal(r *messages.AuditRecord, prev string, sk *governance.PrivateKey) error {
	r.PrevHash = prev
	b, err := RecordBytes(*r)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	sig := make([]byte, mldsa65.SignatureSize)
	if err := mldsa65.SignTo(sk, b, []byte(SigningContext), true, sig); err != nil {
		return fmt.Errorf("audit: sign: %w", err)
	}
	r.Hash, r.Signature = hashOf(b), sig
	return nil
}

// checkHash reports whether r's Hash is the hash of its canonical bytes,
// and returns those bytes.
func checkHash(r *messages.AuditRecord) ([]byte, error) {
	b, err := RecordBytes(*r)
	if err != nil {
		return nil, err
	}
	if got := hashOf(b); got != r.Hash {
		return nil, fmt.Errorf("hash mismatch: the record hashes to %s, it says %s", got, r.Hash)
	}
	return b, nil
}

// VerifyError names the first record that is not intact: its tenant and
// index (for a missing record, the index that is missing) and why.
type VerifyError struct {
	Tenant messages.TenantID
	Index  uint64
	Reason string
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("audit: tenant %s record %d: %s", e.Tenant, e.Index, e.Reason)
}

// Verifier checks records one at a time, in each tenant's index order
// (tenants may interleave). The zero value is not usable: see NewVerifier.
// Not safe for concurrent use.
type Verifier struct {
	pub   *governance.PublicKey
	chain map[messages.TenantID]link
	// approvers, when set, also checks the approvers' signatures inside
	// the records (WithApprovers).
	approvers *governance.Config
}

// VerifyOption adds a check to a Verifier.
type VerifyOption func(*Verifier)

// WithApprovers also checks, for every approver's signature a record
// carries, that the approver is one of the record's tenant's in cfg (the
// server's --governance file), that the signature verifies over the
// statement, and that the statement names the record's interrupt and
// evidence digest.
func WithApprovers(cfg *governance.Config) VerifyOption {
	return func(v *Verifier) { v.approvers = cfg }
}

// link is where a tenant's chain stands: the last verified record.
type link struct {
	index uint64
	hash  string
}

// NewVerifier verifies records signed by pub.
func NewVerifier(pub *governance.PublicKey, opts ...VerifyOption) *Verifier {
	v := &Verifier{pub: pub, chain: map[messages.TenantID]link{}}
	for _, o := range opts {
		o(v)
	}
	return v
}

// Add verifies the next record of r.Tenant's chain: its index follows the
// previous one (the first is 1), its prev_hash is the previous record's
// hash, its hash is that of its canonical bytes and its signature is the
// server's. It returns a *VerifyError.
func (v *Verifier) Add(r *messages.AuditRecord) error {
	last, ok := v.chain[r.Tenant]
	if !ok {
		last = link{index: 0, hash: GenesisHash}
	}
	want := last.index + 1
	bad := func(format string, args ...any) error {
		return &VerifyError{Tenant: r.Tenant, Index: want, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case r.Index < want:
		return bad("record %d found where %d belongs: records reordered or duplicated", r.Index, want)
	case r.Index > want:
		return bad("missing: record %d follows %d (deleted, or records reordered)", r.Index, last.index)
	case r.PrevHash != last.hash:
		return bad("prev_hash %s is not the hash %s of record %d: the chain is broken", r.PrevHash, last.hash, last.index)
	}
	b, err := checkHash(r)
	if err != nil {
		return bad("%v", err)
	}
	if len(r.Signature) != mldsa65.SignatureSize || !mldsa65.Verify(v.pub, b, []byte(SigningContext), r.Signature) {
		return bad("the server's signature does not verify")
	}
	if v.approvers != nil {
		if reason := approverProblem(v.approvers.Of(r.Tenant), r); reason != "" {
			return bad("%s", reason)
		}
	}
	if reason := decisionProblem(r); reason != "" {
		return bad("%s", reason)
	}
	v.chain[r.Tenant] = link{index: r.Index, hash: r.Hash}
	return nil
}

// VerifyRecordApprovers checks only the approvers' signatures of r against
// cfg (see WithApprovers), not its place in the chain.
func VerifyRecordApprovers(cfg *governance.Config, r *messages.AuditRecord) error {
	if reason := approverProblem(cfg.Of(r.Tenant), r); reason != "" {
		return &VerifyError{Tenant: r.Tenant, Index: r.Index, Reason: reason}
	}
	return nil
}

// approverProblem says what is wrong with the approvers' signatures of r
// ("" if nothing), given its tenant's approvers (nil: the tenant has none).
func approverProblem(t *governance.Tenant, r *messages.AuditRecord) string {
	for i, s := range r.Details.Signatures {
		var pk *governance.PublicKey
		if t != nil {
			pk = t.Approvers[s.Approver]
		}
		switch {
		case pk == nil:
			return fmt.Sprintf("signature %d: %q is not an approver of tenant %s", i+1, s.Approver, r.Tenant)
		case s.Statement.InterruptID != r.InterruptID:
			return fmt.Sprintf("signature %d of %s names interrupt %s, not the record's %s", i+1, s.Approver, s.Statement.InterruptID, r.InterruptID)
		case s.Statement.EvidenceDigest != r.Details.EvidenceDigest:
			return fmt.Sprintf("signature %d of %s names another evidence package than the record's", i+1, s.Approver)
		case !governance.Verify(pk, s.Statement, s.Signature):
			return fmt.Sprintf("signature %d of %s does not verify over its statement", i+1, s.Approver)
		}
	}
	return ""
}

// decisionProblem says what is wrong with the decision of a
// policy-covered interrupt's record ("" if nothing): an expiry that did
// not reject it (a timer never takes a decision that needs signatures),
// or an answer with fewer distinct approvers' signatures of its decision
// than the rule required. The signatures themselves are checked by
// approverProblem (WithApprovers).
func decisionProblem(r *messages.AuditRecord) string {
	d := r.Details
	if d.Required == 0 || d.Decision == messages.DecisionCancel {
		return ""
	}
	if r.Kind == messages.AuditInterruptExpired {
		if d.Decision != messages.DecisionReject {
			return fmt.Sprintf("interrupt %s needs %d approvers' signatures and its expiry decided %s: a timer may only reject it", r.InterruptID, d.Required, d.Decision)
		}
		return ""
	}
	signed := map[string]bool{}
	for _, s := range d.Signatures {
		if s.Statement.Decision == d.Decision && s.Statement.InterruptID == r.InterruptID {
			signed[s.Approver] = true
		}
	}
	if len(signed) < d.Required {
		return fmt.Sprintf("interrupt %s: %s with %d of the %d approvers' signatures it needs", r.InterruptID, d.Decision, len(signed), d.Required)
	}
	return ""
}

// Last is the index of tenant's last verified record (0 for none).
func (v *Verifier) Last(tenant messages.TenantID) uint64 { return v.chain[tenant].index }

// Head checks that tenant's chain ends where its head says: a shorter
// chain lost its last records.
func (v *Verifier) Head(tenant messages.TenantID, index uint64, hash string) error {
	last := v.chain[tenant]
	switch {
	case last.index < index:
		return &VerifyError{Tenant: tenant, Index: last.index + 1, Reason: fmt.Sprintf("missing: the log ends at %d, its head is %d (the last records were deleted)", last.index, index)}
	case last.index > index:
		return &VerifyError{Tenant: tenant, Index: index + 1, Reason: fmt.Sprintf("record beyond the head %d", index)}
	case hash != "" && last.hash != hash:
		return &VerifyError{Tenant: tenant, Index: index, Reason: "the record's hash is not the head's"}
	}
	return nil
}

// Verify checks records (each tenant's from index 1, in order; tenants may
// interleave) against the server's public key and returns the first bad
// one as a *VerifyError, or nil.
func Verify(records []messages.AuditRecord, pub *governance.PublicKey, opts ...VerifyOption) error {
	v := NewVerifier(pub, opts...)
	for i := range records {
		if err := v.Add(&records[i]); err != nil {
			return err
		}
	}
	return nil
}
