package audit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// journalEvents appends payloads to session key of j after its head, as a
// hub would, and returns their envelopes.
func journalEvents(t *testing.T, j journal.Journal, key messages.SessionID, payloads ...messages.Payload) []*messages.Envelope {
	t.Helper()
	return journalEventsLater(t, j, key, 0, payloads...)
}

// journalEventsLater is journalEvents with timestamps later by shift.
func journalEventsLater(t *testing.T, j journal.Journal, key messages.SessionID, shift time.Duration, payloads ...messages.Payload) []*messages.Envelope {
	t.Helper()
	ctx := context.Background()
	head, err := j.Head(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	envs := events(head+1, payloads...)
	for _, env := range envs {
		env.Timestamp = env.Timestamp.Add(shift)
	}
	encs := make([]*messages.Encoded, len(envs))
	for i, env := range envs {
		if encs[i], err = messages.Encode(env); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Append(ctx, key, encs); err != nil {
		t.Fatal(err)
	}
	return envs
}

func abortPayload() messages.Payload {
	return &messages.RunErrorPayload{Code: messages.ErrCodeAborted, Message: "aborted by the client"}
}

// TestLog_CatchUp: the first CatchUp derives the log from what the journal
// holds (a decision journaled before the log existed is recorded); after
// that, events journaled but never given to Record (a crash between the
// two fsyncs) are recorded by the next CatchUp, once, in order, after what
// Record had recorded.
func TestLog_CatchUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pk, sk := serverKey(t)
	dir := filepath.Join(t.TempDir(), "audit")
	j := journal.NewMemory()
	defer j.Close()
	journalEvents(t, j, "acme/old", abortPayload()) // before the log existed
	l := openLog(t, dir, sk)
	if n, err := l.CatchUp(ctx, j); err != nil || n != 1 || l.Head("acme") != 1 {
		t.Fatalf("first catch-up: %d sessions, head %d, %v", n, l.Head("acme"), err)
	}

	// Recorded as it happened.
	envs := journalEvents(t, j, "acme/s1", &messages.TextDeltaPayload{Delta: "x"}, abortPayload())
	if err := l.Record(ctx, "acme", "acme/s1", envs); err != nil {
		t.Fatal(err)
	}
	// Journaled, then the process died: neither batch reached the log.
	journalEvents(t, j, "acme/s1", &messages.TextDeltaPayload{Delta: "y"},
		&messages.SteeringRejectedPayload{SteeringID: "st1", Error: "bad diff"})
	journalEvents(t, j, "globex/s2", abortPayload()) // a session born in the crashed batch
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openLog(t, dir, sk)
	if n, err := l.CatchUp(ctx, j); err != nil || n != 2 {
		t.Fatalf("catch-up: %d sessions, %v", n, err)
	}
	if n, err := l.CatchUp(ctx, j); err != nil || n != 0 { // nothing twice
		t.Fatalf("second catch-up: %d sessions, %v", n, err)
	}
	page, err := l.Read(ctx, "acme", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 3 || page.Records[0].Kind != messages.AuditAbort || page.Records[0].Seq != 1 ||
		page.Records[1].Kind != messages.AuditAbort || page.Records[1].Seq != 2 ||
		page.Records[2].Kind != messages.AuditSteeringRejected || page.Records[2].Seq != 4 {
		t.Fatalf("acme's records: %v", kindsAndSeqs(page.Records))
	}
	if g, err := l.Read(ctx, "globex", 0, 10); err != nil || len(g.Records) != 1 || g.Records[0].Kind != messages.AuditAbort || g.Records[0].Seq != 1 {
		t.Fatalf("globex's records: %+v %v", g.Records, err)
	}
	if rep, err := l.VerifyStore(ctx, pk); err != nil || rep.Records["acme"] != 3 || rep.Records["globex"] != 1 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// TestLog_CatchUpRebuildsLostLog: the audit log's files are lost after a
// kill -9 (its write-ahead log deleted: the store opens empty) while the
// journal holds every decision. The next CatchUp must not start an empty
// log at the journal's heads: it derives the same records again.
func TestLog_CatchUpRebuildsLostLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pk, sk := serverKey(t)
	dir := filepath.Join(t.TempDir(), "audit")
	j := journal.NewMemory()
	defer j.Close()
	l := openLog(t, dir, sk)
	if _, err := l.CatchUp(ctx, j); err != nil {
		t.Fatal(err)
	}
	for i, key := range []messages.SessionID{"acme/s2", "acme/s1", "globex/s3"} { // s2 decides first
		envs := journalEventsLater(t, j, key, time.Duration(i)*time.Hour, &messages.TextDeltaPayload{Delta: "x"}, abortPayload(),
			&messages.SteeringRejectedPayload{SteeringID: "st", Error: "bad diff"})
		if err := l.Record(ctx, tenantOf(key), key, envs); err != nil {
			t.Fatal(err)
		}
	}
	want, err := l.Read(ctx, "acme", 0, 10)
	if err != nil || len(want.Records) != 4 {
		t.Fatalf("acme's records before: %v %v", kindsAndSeqs(want.Records), err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wals, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(wals) == 0 {
		t.Fatalf("no write-ahead log in %s: %v", dir, err)
	}
	for _, w := range wals {
		if err := os.Remove(w); err != nil {
			t.Fatal(err)
		}
	}

	l = openLog(t, dir, sk)
	if l.Head("acme") != 0 {
		t.Fatalf("the store kept head %d: the loss was not simulated", l.Head("acme"))
	}
	if _, err := l.CatchUp(ctx, j); err != nil {
		t.Fatal(err)
	}
	got, err := l.Read(ctx, "acme", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Records) != len(want.Records) {
		t.Fatalf("after the loss: %d records of acme, want %d (the journal holds every decision)", len(got.Records), len(want.Records))
	}
	for i, r := range got.Records {
		w := want.Records[i]
		if r.Index != w.Index || r.Kind != w.Kind || r.SessionID != w.SessionID || r.Seq != w.Seq || !r.Time.Equal(w.Time) {
			t.Fatalf("record %d: %v, want %v", i+1, kindsAndSeqs(got.Records), kindsAndSeqs(want.Records))
		}
	}
	if rep, err := l.VerifyStore(ctx, pk); err != nil || rep.Records["acme"] != 4 || rep.Records["globex"] != 2 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	if n, err := l.CatchUp(ctx, j); err != nil || n != 0 || l.Head("acme") != 4 { // nothing twice
		t.Fatalf("second catch-up: %d sessions, head %d, %v", n, l.Head("acme"), err)
	}
}

func tenantOf(key messages.SessionID) messages.TenantID {
	t, _, _ := strings.Cut(string(key), "/")
	return messages.TenantID(t)
}

func kindsAndSeqs(recs []messages.AuditRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%d:%s@%s/%d", r.Index, r.Kind, r.SessionID, r.Seq)
	}
	return out
}
