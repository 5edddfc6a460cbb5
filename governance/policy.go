package governance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/conclave-ai/conclave/messages"
)

// Config is the governance configuration of a server: per tenant, its
// approvers' public keys and its policy. It is read from a JSON file:
//
//	{"tenants": {"acme": {
//	    "approvers": {"alice": "keys/alice.pub", "bob": "keys/bob.pub", "carol": "keys/carol.pub"},
//	    "policy": {"high": {"required": 2}, "critical": {"required": 3},
//	               "reject_required": 1}}}}
//
// Key paths are relative to the file's directory. A rule's "approvers"
// (names) narrows who may sign for it; without it every approver of the
// tenant may.
type Config struct {
	Tenants map[messages.TenantID]*Tenant
}

// Tenant is one tenant's approvers and policy.
type Tenant struct {
	Approvers map[string]*PublicKey
	Policy    Policy
}

// Policy maps risk levels to the signatures an approval needs.
type Policy struct {
	// Rules by risk level. An interrupt of risk r follows the rule of the
	// highest level <= r that has one; with none, it needs no signature.
	Rules map[messages.RiskLevel]Rule
	// RejectRequired is how many signatures a rejection of a covered
	// interrupt needs (default 1).
	RejectRequired int
}

// Rule is m of n: Required signatures of distinct approvers among
// Approvers.
type Rule struct {
	Required  int
	Approvers []string // sorted
}

// Covers returns the rule an interrupt of risk r follows, if any.
func (p Policy) Covers(r messages.RiskLevel) (Rule, bool) {
	var best messages.RiskLevel
	for level := range p.Rules {
		if r.AtLeast(level) && (best == "" || level.AtLeast(best)) {
			best = level
		}
	}
	if best == "" {
		return Rule{}, false
	}
	return p.Rules[best], true
}

// Of returns the tenant's configuration (nil: no governance for it).
func (c *Config) Of(t messages.TenantID) *Tenant {
	if c == nil {
		return nil
	}
	return c.Tenants[t]
}

type fileConfig struct {
	Tenants map[string]struct {
		Approvers map[string]string `json:"approvers"`
		Policy    map[string]json.RawMessage
	} `json:"tenants"`
}

type fileRule struct {
	Required  int      `json:"required"`
	Approvers []string `json:"approvers,omitempty"`
}

// LoadConfig reads a governance configuration file and every public key
// it names, checking that each rule can be met (1 <= required <= its
// approvers).
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("governance: %w", err)
	}
	var fc fileConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return nil, fmt.Errorf("governance: %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	c := &Config{Tenants: map[messages.TenantID]*Tenant{}}
	for tname, tc := range fc.Tenants {
		tenant, err := messages.NewTenantID(tname)
		if err != nil {
			return nil, fmt.Errorf("governance: %s: %w", path, err)
		}
		t := &Tenant{Approvers: map[string]*PublicKey{}, Policy: Policy{Rules: map[messages.RiskLevel]Rule{}, RejectRequired: 1}}
		for name, kp := range tc.Approvers {
			if !keyName.MatchString(name) {
				return nil, fmt.Errorf("governance: tenant %s: approver name %q must match %s", tname, name, keyName)
			}
			if !filepath.IsAbs(kp) {
				kp = filepath.Join(dir, kp)
			}
			pk, err := ReadPublicKey(kp)
			if err != nil {
				return nil, fmt.Errorf("governance: tenant %s, approver %s: %w", tname, name, err)
			}
			t.Approvers[name] = pk
		}
		for key, raw := range tc.Policy {
			if key == "reject_required" {
				if err := json.Unmarshal(raw, &t.Policy.RejectRequired); err != nil || t.Policy.RejectRequired < 1 {
					return nil, fmt.Errorf("governance: tenant %s: reject_required must be a number >= 1", tname)
				}
				continue
			}
			level, err := messages.ParseRiskLevel(key)
			if err != nil || key == "" {
				return nil, fmt.Errorf("governance: tenant %s: policy key %q is not a risk level (low, medium, high, critical) or reject_required", tname, key)
			}
			var fr fileRule
			d := json.NewDecoder(bytes.NewReader(raw))
			d.DisallowUnknownFields()
			if err := d.Decode(&fr); err != nil {
				return nil, fmt.Errorf("governance: tenant %s, policy %s: %w", tname, key, err)
			}
			rule, err := t.rule(fr)
			if err != nil {
				return nil, fmt.Errorf("governance: tenant %s, policy %s: %w", tname, key, err)
			}
			t.Policy.Rules[level] = rule
		}
		if n := len(t.Approvers); t.Policy.RejectRequired > n && len(t.Policy.Rules) > 0 {
			return nil, fmt.Errorf("governance: tenant %s: reject_required %d but %d approvers", tname, t.Policy.RejectRequired, n)
		}
		c.Tenants[tenant] = t
	}
	return c, nil
}

func (t *Tenant) rule(fr fileRule) (Rule, error) {
	names := fr.Approvers
	if len(names) == 0 {
		for n := range t.Approvers {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	names = slices.Compact(names)
	for _, n := range names {
		if t.Approvers[n] == nil {
			return Rule{}, fmt.Errorf("approver %q is not one of the tenant's approvers", n)
		}
	}
	if fr.Required < 1 || fr.Required > len(names) {
		return Rule{}, fmt.Errorf("required %d cannot be met by %d approvers", fr.Required, len(names))
	}
	return Rule{Required: fr.Required, Approvers: names}, nil
}
