package journal_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

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

// TestJetStream_TooLargeIsFinal: an event larger than the server's max
// payload is refused at once (nats.ErrMaxPayload, one attempt), not sent
// again for the 20 s retry budget as a lost answer would be; nothing is
// stored and the session still takes the next append.
func TestJetStream_TooLargeIsFinal(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, natstest.Start(t))
	j := openJetStream(t, nc, "")
	big := make([]byte, nc.MaxPayload()+1)
	for i := range big {
		big[i] = 'a'
	}
	b, err := json.Marshal(map[string]any{"type": messages.RunStarted, "payload": map[string]string{"question": string(big)}})
	if err != nil {
		t.Fatal(err)
	}
	// No deadline: sent again as transient, it would come back after the
	// 20 s budget saying how many attempts it took.
	err = j.Append(context.Background(), "s", []*messages.Encoded{messages.NewEncoded(1, messages.RunStarted, "r", b)})
	if !errors.Is(err, nats.ErrMaxPayload) || strings.Contains(err.Error(), "attempts") {
		t.Fatalf("append of %d bytes: %v, want nats.ErrMaxPayload after one attempt", len(b), err)
	}
	small, _ := json.Marshal(map[string]any{"type": messages.RunStarted, "payload": map[string]string{"question": "q"}})
	if err := j.Append(context.Background(), "s", []*messages.Encoded{messages.NewEncoded(1, messages.RunStarted, "r", small)}); err != nil {
		t.Fatalf("the next append: %v", err)
	}
}
