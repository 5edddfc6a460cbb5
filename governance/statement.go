package governance

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cloudflare/circl/sign/mldsa/mldsa65"
	"github.com/gowebpki/jcs"

	"github.com/conclave-ai/conclave/messages"
)

// ApprovalContext is the ML-DSA-65 context string of approval signatures
// (FIPS 204 ctx): a signature over the same bytes for another purpose does
// not verify as an approval.
const ApprovalContext = "conclave/approval/v1"

// Canonical returns the bytes of v an approver signs (or a digest covers):
// v encoded as JSON, then canonicalised by RFC 8785 (JSON Canonicalization
// Scheme: members sorted by UTF-16 code units, no whitespace, ES6 number
// form, minimal string escapes). docs/governance.md spells it out for
// signers in other languages.
func Canonical(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("governance: canonical: %w", err)
	}
	out, err := jcs.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("governance: canonical: %w", err)
	}
	return out, nil
}

// EvidenceDigest is the digest of an evidence package that a statement
// names: "sha256:" and the hex SHA-256 of its canonical bytes.
func EvidenceDigest(p *messages.EvidencePackage) (string, error) {
	b, err := Canonical(p)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// StatementBytes are the canonical bytes of an approval statement: what
// is signed. EditedArgs, when present, must be valid JSON; it is
// canonicalised with the rest.
func StatementBytes(s messages.ApprovalStatement) ([]byte, error) {
	if s.InterruptID == "" || s.EvidenceDigest == "" || s.Decision == "" {
		return nil, errors.New("governance: a statement needs interrupt_id, evidence_digest and decision")
	}
	return Canonical(s)
}

// Sign signs a statement.
func Sign(sk *PrivateKey, s messages.ApprovalStatement) ([]byte, error) {
	msg, err := StatementBytes(s)
	if err != nil {
		return nil, err
	}
	sig := make([]byte, mldsa65.SignatureSize)
	if err := mldsa65.SignTo(sk, msg, []byte(ApprovalContext), true, sig); err != nil {
		return nil, fmt.Errorf("governance: sign: %w", err)
	}
	return sig, nil
}

// Verify reports whether sig is pk's signature of the statement.
func Verify(pk *PublicKey, s messages.ApprovalStatement, sig []byte) bool {
	msg, err := StatementBytes(s)
	if err != nil || len(sig) != mldsa65.SignatureSize {
		return false
	}
	return mldsa65.Verify(pk, msg, []byte(ApprovalContext), sig)
}
