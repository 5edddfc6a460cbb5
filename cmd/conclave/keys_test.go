package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
)

// TestKeys_Generate: `conclave keys generate NAME --dir DIR` writes a key
// pair that signs and verifies, the private key with mode 0600, and
// refuses to overwrite either file.
func TestKeys_Generate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "keys")
	r := runCLI(t, t.Context(), nil, false, "keys", "generate", "alice", "--dir", dir)
	if r.code != exitOK || !strings.Contains(r.stdout, "alice.key") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	keyPath, pubPath := filepath.Join(dir, "alice.key"), filepath.Join(dir, "alice.pub")
	st, err := os.Stat(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("alice.key mode %v, want 0600", st.Mode().Perm())
	}
	sk, err := governance.ReadPrivateKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := governance.ReadPublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	stmt := messages.ApprovalStatement{InterruptID: "i", EvidenceDigest: "sha256:00", Decision: messages.DecisionApprove}
	sig, err := governance.Sign(sk, stmt)
	if err != nil || !governance.Verify(pk, stmt, sig) {
		t.Fatalf("the generated pair does not sign and verify: %v", err)
	}
	before, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, t.Context(), nil, false, "keys", "generate", "alice", "--dir", dir)
	if r.code != exitFailed || !strings.Contains(r.stderr, "refusing to overwrite") {
		t.Fatalf("second generate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after, _ := os.ReadFile(keyPath); string(after) != string(before) {
		t.Fatal("the key was overwritten")
	}
	// Only the .pub left: still refused, and no .key written.
	if err := os.Remove(keyPath); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, t.Context(), nil, false, "keys", "generate", "alice", "--dir", dir); r.code != exitFailed {
		t.Fatalf("generate over a .pub: exit %d", r.code)
	}
	if _, err := os.Stat(keyPath); !os.IsNotExist(err) {
		t.Fatalf("a refused generate wrote %s", keyPath)
	}
	for _, args := range [][]string{{"keys", "generate", "bob"}, {"keys", "generate", "--dir", dir}, {"keys", "generate", "bad/name", "--dir", dir}} {
		if r := runCLI(t, t.Context(), nil, false, args...); r.code == exitOK {
			t.Fatalf("%v: exit 0", args)
		}
	}
}
