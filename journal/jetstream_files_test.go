package journal_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/internal/natstest"
	"github.com/conclave-ai/conclave/messages"
)

// TestJetStream_RunStartedWithFiles: a run_started carrying as many bytes
// of files as a run may have (messages.MaxRunFilesBytes, incompressible)
// and a long question is one event the cluster journal stores and reads
// back, at NATS's default max payload (1 MiB): the files' cap is what
// keeps it so (at 1 MiB of files the server refused the message).
func TestJetStream_RunStartedWithFiles(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, natstest.Start(t))
	j := openJetStream(t, nc, "")
	var files []messages.RunFile
	for left := messages.MaxRunFilesBytes; left > 0; {
		n := min(left, messages.MaxFileBytes)
		data := make([]byte, n)
		_, _ = rand.Read(data)
		files = append(files, messages.RunFile{Name: "f.bin.png", MediaType: "image/png", Size: int64(n), SHA256: strings.Repeat("0", 64), Data: data})
		left -= n
	}
	p := &messages.RunStartedPayload{Question: strings.Repeat("why is the sky blue? ", 16<<10/21), HITL: messages.HITLNone, Files: files}
	b, err := json.Marshal(map[string]any{"type": messages.RunStarted, "payload": p})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := j.Append(ctx, "s", []*messages.Encoded{messages.NewEncoded(1, messages.RunStarted, "r", b)}); err != nil {
		t.Fatalf("append a %d-byte run_started: %v", len(b), err)
	}
	got, err := j.ReadAfter(ctx, "s", 0, 10)
	if err != nil || len(got) != 1 || string(got[0].JSON) != string(b) {
		t.Fatalf("read back: %d events, %v", len(got), err)
	}
}
