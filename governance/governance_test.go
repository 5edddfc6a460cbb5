package governance_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
)

func TestKeys_WriteReadAndMode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyPath, pubPath, err := governance.WriteKeyPair(dir, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(keyPath); st.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v", st.Mode().Perm())
	}
	sk, err := governance.ReadPrivateKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := governance.ReadPublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	if !pk.Equal(sk.Public()) {
		t.Fatal("the .pub file is not the key's public key")
	}
	if _, _, err := governance.WriteKeyPair(dir, "alice"); err == nil {
		t.Fatal("overwrote a key")
	}
	if err := os.Chmod(keyPath, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := governance.ReadPrivateKey(keyPath); !errors.Is(err, governance.ErrKeyExposed) {
		t.Fatalf("readable key accepted: %v", err)
	}
	if _, _, err := governance.WriteKeyPair(dir, "../x"); err == nil {
		t.Fatal("bad name accepted")
	}
}

// TestCanonical_KnownAnswer: the signed bytes are RFC 8785 (members sorted,
// no whitespace, numbers in ES6 form, edited arguments canonicalised too).
func TestCanonical_KnownAnswer(t *testing.T) {
	t.Parallel()
	st := messages.ApprovalStatement{InterruptID: "i-1", EvidenceDigest: "sha256:ab", Decision: messages.DecisionRevise,
		EditedArgs: json.RawMessage(`{ "z": 1.50, "a": ["é", 1e3] }`)}
	b, err := governance.StatementBytes(st)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"decision":"revise","edited_args":{"a":["é",1000],"z":1.5},"evidence_digest":"sha256:ab","interrupt_id":"i-1"}`
	if string(b) != want {
		t.Fatalf("canonical bytes\n got %s\nwant %s", b, want)
	}
	// Without edited arguments the member is absent.
	st.EditedArgs, st.Decision = nil, messages.DecisionApprove
	b, _ = governance.StatementBytes(st)
	if string(b) != `{"decision":"approve","evidence_digest":"sha256:ab","interrupt_id":"i-1"}` {
		t.Fatalf("canonical bytes %s", b)
	}
}

type approver struct {
	name string
	sk   *governance.PrivateKey
	pk   *governance.PublicKey
}

func approvers(t *testing.T, names ...string) ([]approver, map[string]*governance.PublicKey) {
	t.Helper()
	var out []approver
	keys := map[string]*governance.PublicKey{}
	for _, n := range names {
		pk, sk, _, err := governance.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, approver{n, sk, pk})
		keys[n] = pk
	}
	return out, keys
}

func sign(t *testing.T, a approver, st messages.ApprovalStatement) []byte {
	t.Helper()
	sig, err := governance.Sign(a.sk, st)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func TestTally_MofN(t *testing.T) {
	t.Parallel()
	as, keys := approvers(t, "alice", "bob", "carol")
	ev := &messages.EvidencePackage{ID: "e1", Title: "run search", RecommendedActions: []messages.RecommendedAction{{Decision: messages.DecisionApprove}}, RiskLevel: messages.RiskHigh}
	digest, err := governance.EvidenceDigest(ev)
	if err != nil || !strings.HasPrefix(digest, "sha256:") {
		t.Fatal(digest, err)
	}
	approve := messages.ApprovalStatement{InterruptID: "i1", EvidenceDigest: digest, Decision: messages.DecisionApprove}
	for m := 1; m <= 3; m++ {
		tl := governance.NewTally("i1", digest, governance.Rule{Required: m, Approvers: []string{"alice", "bob", "carol"}}, 1, keys)
		for k := range m {
			n, decided, err := tl.Add(as[k].name, approve, sign(t, as[k], approve))
			if err != nil || n != k+1 || decided != (k+1 == m) {
				t.Fatalf("m=%d, signature %d: count %d decided %v err %v", m, k+1, n, decided, err)
			}
		}
	}
}

func TestTally_Refusals(t *testing.T) {
	t.Parallel()
	as, keys := approvers(t, "alice", "bob", "carol")
	outsider, _ := approvers(t, "mallory")
	digest := "sha256:00"
	approve := messages.ApprovalStatement{InterruptID: "i1", EvidenceDigest: digest, Decision: messages.DecisionApprove}
	revise := messages.ApprovalStatement{InterruptID: "i1", EvidenceDigest: digest, Decision: messages.DecisionRevise, EditedArgs: json.RawMessage(`{"query":"x"}`)}
	changed := revise
	changed.EditedArgs = json.RawMessage(`{"query":"rm -rf"}`)
	other := approve
	other.InterruptID = "i2"
	tl := governance.NewTally("i1", digest, governance.Rule{Required: 2, Approvers: []string{"alice", "bob"}}, 1, keys)
	for _, tc := range []struct {
		name string
		who  string
		st   messages.ApprovalStatement
		sig  []byte
		want error
	}{
		{"unknown approver", "mallory", approve, sign(t, outsider[0], approve), governance.ErrUnknownApprover},
		{"approver outside the rule", "carol", approve, sign(t, as[2], approve), governance.ErrUnknownApprover},
		{"another's key", "alice", approve, sign(t, as[1], approve), governance.ErrBadSignature},
		{"edited args changed after signing", "alice", changed, sign(t, as[0], revise), governance.ErrBadSignature},
		{"another interrupt", "alice", other, sign(t, as[0], other), governance.ErrWrongStatement},
		{"truncated signature", "alice", approve, sign(t, as[0], approve)[:100], governance.ErrBadSignature},
		{"cancel is not signable", "alice", messages.ApprovalStatement{InterruptID: "i1", EvidenceDigest: digest, Decision: messages.DecisionCancel}, nil, governance.ErrBadDecision},
	} {
		if _, _, err := tl.Add(tc.who, tc.st, tc.sig); !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		}
	}
	if len(tl.Signatures()) != 0 {
		t.Fatal("a refused signature was counted")
	}
	// Alice approves, Bob revises: two different statements, neither decided.
	if n, decided, err := tl.Add("alice", approve, sign(t, as[0], approve)); n != 1 || decided || err != nil {
		t.Fatal(n, decided, err)
	}
	if n, decided, err := tl.Add("bob", revise, sign(t, as[1], revise)); n != 1 || decided || err != nil {
		t.Fatal(n, decided, err)
	}
	if _, _, err := tl.Add("alice", approve, sign(t, as[0], approve)); !errors.Is(err, governance.ErrDuplicateApprover) {
		t.Fatalf("duplicate: %v", err)
	}
	// A rejection needs one signature (reject_required 1).
	t2 := governance.NewTally("i1", digest, governance.Rule{Required: 3, Approvers: []string{"alice", "bob", "carol"}}, 1, keys)
	reject := messages.ApprovalStatement{InterruptID: "i1", EvidenceDigest: digest, Decision: messages.DecisionReject}
	if n, decided, err := t2.Add("carol", reject, sign(t, as[2], reject)); n != 1 || !decided || err != nil {
		t.Fatal(n, decided, err)
	}
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, n := range []string{"alice", "bob", "carol"} {
		if _, _, err := governance.WriteKeyPair(filepath.Join(dir, "keys"), n); err != nil {
			t.Fatal(err)
		}
	}
	write := func(body string) string {
		p := filepath.Join(dir, "gov.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c, err := governance.LoadConfig(write(`{"tenants": {"acme": {
		"approvers": {"alice": "keys/alice.pub", "bob": "keys/bob.pub", "carol": "keys/carol.pub"},
		"policy": {"high": {"required": 2}, "critical": {"required": 3}, "reject_required": 1}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	acme := c.Of("acme")
	if acme == nil || len(acme.Approvers) != 3 {
		t.Fatalf("acme %+v", acme)
	}
	for _, tc := range []struct {
		risk messages.RiskLevel
		want int
	}{{messages.RiskLow, 0}, {messages.RiskMedium, 0}, {messages.RiskHigh, 2}, {messages.RiskCritical, 3}} {
		r, ok := acme.Policy.Covers(tc.risk)
		if ok != (tc.want > 0) || r.Required != tc.want {
			t.Errorf("risk %s: rule %+v %v, want %d", tc.risk, r, ok, tc.want)
		}
	}
	if c.Of("other") != nil {
		t.Fatal("a tenant without governance has some")
	}
	for _, bad := range []string{
		`{"tenants": {"acme": {"approvers": {"alice": "keys/alice.pub"}, "policy": {"high": {"required": 2}}}}}`,
		`{"tenants": {"acme": {"approvers": {"alice": "keys/alice.pub"}, "policy": {"urgent": {"required": 1}}}}}`,
		`{"tenants": {"acme": {"approvers": {"alice": "keys/nope.pub"}}}}`,
		`{"tenants": {"acme": {"approvers": {"alice": "keys/alice.pub"}, "policy": {"high": {"required": 1, "approvers": ["zed"]}}}}}`,
		`{"tenants": {"acme": {"approvers": {}, "colour": 1}}}`,
	} {
		if _, err := governance.LoadConfig(write(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
