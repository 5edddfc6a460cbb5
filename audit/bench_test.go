package audit_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/conclave-ai/conclave/audit"
	"github.com/conclave-ai/conclave/messages"
)

// BenchmarkLog_Append appends one decision record per call to a log on
// disk: canonical bytes, SHA-256, the server's ML-DSA-65 signature and a
// pebble commit with fsync. ops/s is records per second, one at a time.
//
//	go test ./audit -run '^$' -bench BenchmarkLog -benchmem
func BenchmarkLog_Append(b *testing.B) {
	_, sk := serverKey(b)
	l := openLog(b, filepath.Join(b.TempDir(), "audit"), sk)
	rec := []messages.AuditRecord{{Tenant: "acme", Kind: messages.AuditToolApproval, RunID: "r1", SessionID: "s1", InterruptID: "i1",
		Actor: []string{"alice", "bob"}, Details: messages.AuditDetails{InterruptKind: messages.InterruptToolApproval, Decision: messages.DecisionApprove,
			EvidenceDigest: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", ToolName: "publish"}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Append(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkLog_Verify verifies one record (hash and signature).
func BenchmarkLog_Verify(b *testing.B) {
	pk, sk := serverKey(b)
	l := openLog(b, "", sk)
	recs := appendN(b, l, "acme", 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := audit.Verify(recs, pk); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLog_RecordNoDecision is what every journaled batch without a
// decision costs a hub: the session's cursor, written without an fsync.
func BenchmarkLog_RecordNoDecision(b *testing.B) {
	_, sk := serverKey(b)
	l := openLog(b, filepath.Join(b.TempDir(), "audit"), sk)
	ctx := context.Background()
	envs := events(1, &messages.TextDeltaPayload{Delta: "x"})
	b.ReportAllocs()
	for b.Loop() {
		envs[0].Seq++
		if err := l.Record(ctx, "acme", "acme/s1", envs); err != nil {
			b.Fatal(err)
		}
	}
}
