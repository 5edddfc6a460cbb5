package governance_test

import (
	"encoding/json"
	"testing"

	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
)

// benchStatement is a tool approval's statement with edited arguments.
var benchStatement = messages.ApprovalStatement{InterruptID: "3f1c2a9e-5b7d-4c1e-9a0b-1d2e3f4a5b6c",
	EvidenceDigest: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Decision: messages.DecisionRevise,
	EditedArgs: json.RawMessage(`{"query":"quarterly revenue by region","max_results":10,"filters":{"since":"2026-01-01","sources":["sec","ir"]}}`)}

// BenchmarkApproval_Sign is one approver's ML-DSA-65 signature of a
// statement (canonicalisation included).
//
//	go test ./governance -run '^$' -bench 'BenchmarkApproval|BenchmarkCanonical' -benchmem
func BenchmarkApproval_Sign(b *testing.B) {
	_, sk, _, err := governance.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := governance.Sign(sk, benchStatement); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApproval_Verify is what the server does for each signature it
// receives (canonicalisation included).
func BenchmarkApproval_Verify(b *testing.B) {
	pk, sk, _, err := governance.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	sig, err := governance.Sign(sk, benchStatement)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !governance.Verify(pk, benchStatement, sig) {
			b.Fatal("does not verify")
		}
	}
}

// BenchmarkCanonical_Statement is the RFC 8785 canonical bytes of a
// statement alone.
func BenchmarkCanonical_Statement(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := governance.StatementBytes(benchStatement); err != nil {
			b.Fatal(err)
		}
	}
}
