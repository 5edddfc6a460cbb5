package audit_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/conclave-ai/conclave/audit"
	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func serverKey(t testing.TB) (*governance.PublicKey, *governance.PrivateKey) {
	t.Helper()
	pk, sk, _, err := governance.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return pk, sk
}

func openLog(t testing.TB, dir string, sk *governance.PrivateKey) *audit.Log {
	t.Helper()
	l, err := audit.Open(audit.Config{Dir: dir, Key: sk, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// appendN appends n abort records for tenant.
func appendN(t testing.TB, l *audit.Log, tenant messages.TenantID, n int) []messages.AuditRecord {
	t.Helper()
	recs := make([]messages.AuditRecord, n)
	for i := range recs {
		recs[i] = messages.AuditRecord{Tenant: tenant, Kind: messages.AuditAbort, RunID: messages.RunID(fmt.Sprintf("run-%d", i)),
			Actor: []string{"tenant:" + string(tenant)}, Details: messages.AuditDetails{ErrorCode: messages.ErrCodeAborted, Message: "aborted by the client"}}
	}
	out, err := l.Append(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func wantBad(t *testing.T, err error, tenant messages.TenantID, index uint64) {
	t.Helper()
	var ve *audit.VerifyError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a *VerifyError", err)
	}
	if ve.Tenant != tenant || ve.Index != index {
		t.Fatalf("first bad record: %s/%d (%v), want %s/%d", ve.Tenant, ve.Index, err, tenant, index)
	}
}

func TestVerify_ChainAndSignatures(t *testing.T) {
	t.Parallel()
	pk, sk := serverKey(t)
	l := openLog(t, "", sk)
	recs := appendN(t, l, "acme", 5)
	recs = append(recs, appendN(t, l, "globex", 2)...)
	if recs[0].Index != 1 || recs[4].Index != 5 || recs[5].Index != 1 || recs[0].PrevHash != audit.GenesisHash || recs[1].PrevHash != recs[0].Hash {
		t.Fatalf("chain: %+v", recs[:2])
	}
	if err := audit.Verify(recs, pk); err != nil {
		t.Fatalf("intact: %v", err)
	}
	// The record survives a JSON round trip (what an export is).
	b, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	var back []messages.AuditRecord
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if err := audit.Verify(back, pk); err != nil {
		t.Fatalf("after a JSON round trip: %v", err)
	}
	clone := func() []messages.AuditRecord {
		out := slices.Clone(recs)
		for i := range out {
			out[i].Signature = bytes.Clone(out[i].Signature)
		}
		return out
	}
	otherPub, _ := serverKey(t)
	cases := []struct {
		name   string
		mutate func([]messages.AuditRecord) []messages.AuditRecord
		pub    *governance.PublicKey
		tenant messages.TenantID
		index  uint64
	}{
		{"flipped detail", func(r []messages.AuditRecord) []messages.AuditRecord {
			r[2].Details.Message = "aborted by the clienT"
			return r
		}, pk, "acme", 3},
		{"flipped time", func(r []messages.AuditRecord) []messages.AuditRecord {
			r[3].Time = r[3].Time.Add(time.Nanosecond)
			return r
		}, pk, "acme", 4},
		{"deleted", func(r []messages.AuditRecord) []messages.AuditRecord { return slices.Delete(r, 2, 3) }, pk, "acme", 3},
		{"swapped", func(r []messages.AuditRecord) []messages.AuditRecord { r[1], r[2] = r[2], r[1]; return r }, pk, "acme", 2},
		{"bad signature", func(r []messages.AuditRecord) []messages.AuditRecord { r[4].Signature[100] ^= 1; return r }, pk, "acme", 5},
		{"another key", func(r []messages.AuditRecord) []messages.AuditRecord { return r }, otherPub, "acme", 1},
		{"rehashed", func(r []messages.AuditRecord) []messages.AuditRecord {
			// A forger recomputes the hash of a changed record: the
			// signature (and the next record's prev_hash) still tell.
			r[6].Details.Message = "x"
			b, _ := audit.RecordBytes(r[6])
			r[6].Hash = rehash(b)
			return r
		}, pk, "globex", 2},
		{"first dropped", func(r []messages.AuditRecord) []messages.AuditRecord { return r[1:] }, pk, "acme", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantBad(t, audit.Verify(c.mutate(clone()), c.pub), c.tenant, c.index)
		})
	}
}

func rehash(b []byte) string { return "sha256:" + sha256sum(b) }

func TestLog_ReadPages(t *testing.T) {
	t.Parallel()
	_, sk := serverKey(t)
	l := openLog(t, "", sk)
	appendN(t, l, "acme", 7)
	appendN(t, l, "globex", 2)
	ctx := context.Background()
	var got []uint64
	after := uint64(0)
	for {
		p, err := l.Read(ctx, "acme", after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if p.Head != 7 {
			t.Fatalf("head %d", p.Head)
		}
		for _, r := range p.Records {
			if r.Tenant != "acme" {
				t.Fatalf("record of %s", r.Tenant)
			}
			got = append(got, r.Index)
		}
		if len(p.Records) == 0 {
			break
		}
		after = p.NextAfter
	}
	if !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("pages: %v", got)
	}
	if p, err := l.Read(ctx, "nobody", 0, 10); err != nil || len(p.Records) != 0 || p.Head != 0 {
		t.Fatalf("unknown tenant: %+v %v", p, err)
	}
	for _, n := range []int{0, -1, audit.MaxPage + 1} {
		if _, err := l.Read(ctx, "acme", 0, n); err == nil {
			t.Fatalf("limit %d accepted", n)
		}
	}
}

// TestLog_Durable: records survive a close and a reopen, and the chain
// continues where it stopped.
func TestLog_Durable(t *testing.T) {
	t.Parallel()
	pk, sk := serverKey(t)
	dir := filepath.Join(t.TempDir(), "audit")
	l := openLog(t, dir, sk)
	first := appendN(t, l, "acme", 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), first); !errors.Is(err, audit.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	l = openLog(t, dir, sk)
	next := appendN(t, l, "acme", 1)
	if next[0].Index != 4 || next[0].PrevHash != first[2].Hash {
		t.Fatalf("after reopen: index %d prev %s", next[0].Index, next[0].PrevHash)
	}
	rep, err := l.VerifyStore(context.Background(), pk)
	if err != nil || rep.Records["acme"] != 4 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// TestLog_StoredTampering changes the stored data with pebble itself and
// checks that VerifyStore names the first bad record.
func TestLog_StoredTampering(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		tamper func(t *testing.T, db *pebble.DB)
		index  uint64
	}{
		{"intact", func(*testing.T, *pebble.DB) {}, 0},
		{"flipped byte", func(t *testing.T, db *pebble.DB) {
			k := audit.RecordKey("acme", 2)
			v := get(t, db, k)
			i := bytes.Index(v, []byte(`"kind":"`)) + len(`"kind":"`)
			v[i] ^= 0x20 // abort → Abort: still valid JSON
			set(t, db, k, v)
		}, 2},
		{"garbled byte", func(t *testing.T, db *pebble.DB) {
			k := audit.RecordKey("acme", 3)
			v := get(t, db, k)
			v[0] ^= 0xff
			set(t, db, k, v)
		}, 3},
		{"deleted", func(t *testing.T, db *pebble.DB) {
			if err := db.Delete(audit.RecordKey("acme", 2), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}, 2},
		{"swapped", func(t *testing.T, db *pebble.DB) {
			a, b := get(t, db, audit.RecordKey("acme", 2)), get(t, db, audit.RecordKey("acme", 3))
			set(t, db, audit.RecordKey("acme", 2), b)
			set(t, db, audit.RecordKey("acme", 3), a)
		}, 2},
		{"last deleted", func(t *testing.T, db *pebble.DB) {
			if err := db.Delete(audit.RecordKey("acme", 4), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pk, sk := serverKey(t)
			dir := filepath.Join(t.TempDir(), "audit")
			l := openLog(t, dir, sk)
			appendN(t, l, "acme", 4)
			appendN(t, l, "globex", 1)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			db, err := pebble.Open(dir, &pebble.Options{Logger: quietPebble{}})
			if err != nil {
				t.Fatal(err)
			}
			c.tamper(t, db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			ro, err := audit.Open(audit.Config{Dir: dir, ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			_, err = ro.VerifyStore(context.Background(), pk)
			if c.index == 0 {
				if err != nil {
					t.Fatalf("intact store: %v", err)
				}
				return
			}
			wantBad(t, err, "acme", c.index)
			// Reading the tampered record through the API path fails too.
			if _, err := ro.Read(context.Background(), "acme", 0, 10); err == nil && c.name != "last deleted" {
				t.Fatal("Read returned a tampered page")
			}
		})
	}
}

func get(t *testing.T, db *pebble.DB, k []byte) []byte {
	t.Helper()
	v, closer, err := db.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	return bytes.Clone(v)
}

func set(t *testing.T, db *pebble.DB, k, v []byte) {
	t.Helper()
	if err := db.Set(k, v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

func sha256sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// quietPebble is a pebble.Logger that keeps the tests' output clean.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
