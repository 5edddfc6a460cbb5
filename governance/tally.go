package governance

import (
	"errors"
	"fmt"
	"slices"

	"github.com/conclave-ai/conclave/messages"
)

// Why a signature is refused. The decision it carried does not happen.
var (
	ErrUnknownApprover   = errors.New("governance: not an approver of this interrupt")
	ErrDuplicateApprover = errors.New("governance: this approver has signed this interrupt already")
	ErrBadSignature      = errors.New("governance: the signature does not verify over the statement's canonical bytes")
	ErrWrongStatement    = errors.New("governance: the statement is not about this interrupt or its evidence package")
	ErrBadDecision       = errors.New("governance: a signed decision must be approve, revise or reject")
)

// Signature is one approver's valid signature of a statement.
type Signature struct {
	Approver  string                     `json:"approver"`
	Statement messages.ApprovalStatement `json:"statement"`
	Signature []byte                     `json:"signature"`
}

// Tally counts the signatures of one policy-covered interrupt. Signatures
// of the same statement (decision and edited arguments) count together;
// each approver signs once. A decision is reached when its statement has
// the rule's Required signatures (a rejection: the policy's
// RejectRequired). A Tally is not safe for concurrent use: its owner (the
// interrupt registry) serialises Add.
type Tally struct {
	interruptID string
	digest      string
	rule        Rule
	reject      int
	keys        map[string]*PublicKey
	sigs        []Signature
	signed      map[string]bool
}

// NewTally starts counting for interrupt id, whose evidence package has
// digest, under rule; keys are the tenant's approvers.
func NewTally(id, digest string, rule Rule, rejectRequired int, keys map[string]*PublicKey) *Tally {
	return &Tally{interruptID: id, digest: digest, rule: rule, reject: max(rejectRequired, 1), keys: keys, signed: map[string]bool{}}
}

// Restore puts back signatures recorded before a restart (already
// verified; verified again anyway, so a tampered journal cannot forge one).
func (t *Tally) Restore(sigs []Signature) error {
	for _, s := range sigs {
		if _, _, err := t.Add(s.Approver, s.Statement, s.Signature); err != nil {
			return err
		}
	}
	return nil
}

// Required is how many signatures statement's decision needs.
func (t *Tally) Required(d messages.Decision) int {
	if d == messages.DecisionReject {
		return t.reject
	}
	return t.rule.Required
}

// Add verifies and counts approver's signature of st. It returns how many
// valid signatures st now has and whether that reaches its decision.
func (t *Tally) Add(approver string, st messages.ApprovalStatement, sig []byte) (count int, decided bool, err error) {
	switch {
	case st.InterruptID != t.interruptID || st.EvidenceDigest != t.digest:
		return 0, false, ErrWrongStatement
	case st.Decision != messages.DecisionApprove && st.Decision != messages.DecisionRevise && st.Decision != messages.DecisionReject:
		return 0, false, ErrBadDecision
	case !slices.Contains(t.rule.Approvers, approver) || t.keys[approver] == nil:
		return 0, false, fmt.Errorf("%w: %q", ErrUnknownApprover, approver)
	case t.signed[approver]:
		return 0, false, fmt.Errorf("%w: %q", ErrDuplicateApprover, approver)
	case !Verify(t.keys[approver], st, sig):
		return 0, false, ErrBadSignature
	}
	if _, err := StatementBytes(st); err != nil {
		return 0, false, err
	}
	t.signed[approver] = true
	t.sigs = append(t.sigs, Signature{Approver: approver, Statement: st, Signature: sig})
	count = len(t.Signers(st))
	return count, count >= t.Required(st.Decision), nil
}

// Remove forgets approver's signature (one that could not be recorded).
func (t *Tally) Remove(approver string) {
	delete(t.signed, approver)
	t.sigs = slices.DeleteFunc(t.sigs, func(s Signature) bool { return s.Approver == approver })
}

// Signers lists the approvers who signed st (the same decision and edited
// arguments), in arrival order.
func (t *Tally) Signers(st messages.ApprovalStatement) []string {
	key, err := StatementBytes(st)
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range t.sigs {
		if b, _ := StatementBytes(s.Statement); string(b) == string(key) {
			out = append(out, s.Approver)
		}
	}
	return out
}

// Signatures are the valid signatures counted, in arrival order.
func (t *Tally) Signatures() []Signature { return slices.Clone(t.sigs) }
