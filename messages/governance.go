package messages

import (
	"encoding/json"
	"fmt"
)

// RiskLevel is how much harm an approved action can do. Tools declare
// theirs; a policy maps a risk level to the signatures an approval needs.
type RiskLevel string

// Risk levels, in increasing order.
const (
	RiskLow      RiskLevel = "low"
	RiskMedium   RiskLevel = "medium"
	RiskHigh     RiskLevel = "high"
	RiskCritical RiskLevel = "critical"
)

var riskRank = map[RiskLevel]int{RiskLow: 1, RiskMedium: 2, RiskHigh: 3, RiskCritical: 4}

// ParseRiskLevel accepts the four levels ("" is low).
func ParseRiskLevel(s string) (RiskLevel, error) {
	r := RiskLevel(s)
	if r == "" {
		return RiskLow, nil
	}
	if _, ok := riskRank[r]; !ok {
		return "", fmt.Errorf("risk level %q is not one of low, medium, high, critical", truncate(s, 32))
	}
	return r, nil
}

// AtLeast reports whether r is at least other (low < medium < high < critical).
func (r RiskLevel) AtLeast(other RiskLevel) bool { return riskRank[r] >= riskRank[other] }

// EvidencePackage is what a human is shown to decide an approval: what is
// asked, why, on what evidence, and the options with their consequences
// (seed 000, "EvidencePackage Schema"). Every approval interrupt (tool,
// plan, node, spawn) carries one, assembled from the run.
type EvidencePackage struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Narrative string `json:"narrative"`
	// ReasoningTrace is the agent's reasoning so far, compressed to steps.
	ReasoningTrace []string `json:"reasoning_trace"`
	// RecommendedActions are 1 to 3 options, the first the recommended one.
	RecommendedActions []RecommendedAction `json:"recommended_actions"`
	RiskLevel          RiskLevel           `json:"risk_level"`
	SourceAgentID      string              `json:"source_agent_id"`
	// TaskID is what the approval is about: the node id, or the run id
	// for a plan.
	TaskID   string            `json:"task_id"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// RecommendedAction is one option of an evidence package.
type RecommendedAction struct {
	Decision     Decision `json:"decision"`
	Label        string   `json:"label"`
	Consequences []string `json:"consequences"`
}

// Validate checks the package's shape.
func (p *EvidencePackage) Validate() error {
	switch {
	case p.ID == "" || p.Title == "":
		return fmt.Errorf("evidence package: id and title are required")
	case len(p.RecommendedActions) < 1 || len(p.RecommendedActions) > 3:
		return fmt.Errorf("evidence package %s: %d recommended actions, want 1 to 3", p.ID, len(p.RecommendedActions))
	}
	if _, err := ParseRiskLevel(string(p.RiskLevel)); err != nil {
		return fmt.Errorf("evidence package %s: %w", p.ID, err)
	}
	return nil
}

// ApprovalStatement is what an approver signs: the interrupt, the digest
// of the evidence package they were shown, their decision and, for a
// revise, the edited arguments. Its canonical bytes (RFC 8785 JSON
// Canonicalization Scheme of this object, see docs/governance.md) are the
// signed message.
type ApprovalStatement struct {
	InterruptID    string          `json:"interrupt_id"`
	EvidenceDigest string          `json:"evidence_digest"`
	Decision       Decision        `json:"decision"`
	EditedArgs     json.RawMessage `json:"edited_args,omitempty"`
}
