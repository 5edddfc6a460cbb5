package messages

import (
	"encoding/json"
	"fmt"
)

// HITLMode says which gates ask a human. Each mode includes the ones before
// it: none < plan < node < tools.
type HITLMode string

// HITL modes.
const (
	HITLNone  HITLMode = "none"
	HITLPlan  HITLMode = "plan"
	HITLNode  HITLMode = "node"
	HITLTools HITLMode = "tools"
)

var hitlRank = map[HITLMode]int{"": 0, HITLNone: 0, HITLPlan: 1, HITLNode: 2, HITLTools: 3}

// ParseHITLMode validates s; the empty string means none.
func ParseHITLMode(s string) (HITLMode, error) {
	m := HITLMode(s)
	if _, ok := hitlRank[m]; !ok {
		return "", fmt.Errorf("messages: hitl %q is not one of none, plan, node, tools", truncate(s, 32))
	}
	if m == "" {
		m = HITLNone
	}
	return m, nil
}

// Includes reports whether m asks for the gates of other (tools includes node, ...).
func (m HITLMode) Includes(other HITLMode) bool { return hitlRank[m] >= hitlRank[other] }

// UnmarshalJSON validates the mode.
func (m *HITLMode) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("messages: hitl must be a string: %w", err)
	}
	v, err := ParseHITLMode(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// MarshalJSON writes the empty mode as "none", so encoding is stable.
func (m HITLMode) MarshalJSON() ([]byte, error) {
	if m == "" {
		m = HITLNone
	}
	return json.Marshal(string(m))
}
