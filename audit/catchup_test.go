package audit_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// journalEvents appends payloads to session key of j after its head, as a
// hub would, and returns their envelopes.
func journalEvents(t *testing.T, j journal.Journal, key messages.SessionID, payloads ...messages.Payload) []*messages.Envelope {
	t.Helper()
	ctx := context.Background()
	head, err := j.Head(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	envs := events(head+1, payloads...)
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

// TestLog_CatchUp: the first CatchUp starts the log at the journal's heads
// (nothing decided before the log existed is recorded); after that,
// events journaled but never given to Record (a crash between the two
// fsyncs) are recorded by the next CatchUp, once, in order, after what
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
	if n, err := l.CatchUp(ctx, j); err != nil || n != 0 || l.Head("acme") != 0 {
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
	if len(page.Records) != 2 || page.Records[0].Kind != messages.AuditAbort || page.Records[0].Seq != 2 ||
		page.Records[1].Kind != messages.AuditSteeringRejected || page.Records[1].Seq != 4 {
		t.Fatalf("acme's records: %+v", page.Records)
	}
	if g, err := l.Read(ctx, "globex", 0, 10); err != nil || len(g.Records) != 1 || g.Records[0].Kind != messages.AuditAbort || g.Records[0].Seq != 1 {
		t.Fatalf("globex's records: %+v %v", g.Records, err)
	}
	if rep, err := l.VerifyStore(ctx, pk); err != nil || rep.Records["acme"] != 2 || rep.Records["globex"] != 1 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}
