package testkit

import (
	"testing"

	"github.com/conclave-ai/conclave/audit"
	"github.com/conclave-ai/conclave/governance"
)

// AuditLog opens an in-memory audit log signed by a fresh ML-DSA-65 server
// key and closes it when t ends; it returns the log and the key's public
// half, to verify what the log holds. Open it before the engine that
// writes to it: cleanups run in reverse, so the engine shuts down first.
func AuditLog(t testing.TB) (*audit.Log, *governance.PublicKey) {
	t.Helper()
	pub, key, _, err := governance.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	log, err := audit.Open(audit.Config{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	return log, pub
}
