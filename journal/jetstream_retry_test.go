package journal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/conclave-ai/conclave/internal/natstest"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// pubAck matches JetStream's acknowledgement of a stored publish to
// stream, of an atomic batch or of a single message.
func pubAck(stream string, batch bool) func(string, []byte) bool {
	return func(_ string, data []byte) bool {
		var a struct {
			Stream string          `json:"stream"`
			Seq    uint64          `json:"seq"`
			Batch  string          `json:"batch"`
			Dup    bool            `json:"duplicate"`
			Error  json.RawMessage `json:"error"`
		}
		return json.Unmarshal(data, &a) == nil && a.Stream == stream && a.Seq > 0 && !a.Dup && a.Error == nil && (a.Batch != "") == batch
	}
}

// waitDropped fails the test if the proxy did not drop the acknowledgement
// (the append under test then proved nothing).
func waitDropped(t *testing.T, dropped <-chan struct{}) {
	t.Helper()
	select {
	case <-dropped:
	case <-time.After(5 * time.Second):
		t.Fatal("no acknowledgement was dropped")
	}
}

// openJetStreamVia opens stream name through the proxy, with a short
// request timeout: a lost acknowledgement is given up on, and the publish
// sent again, after it.
func openJetStreamVia(t *testing.T, p *natstest.Proxy, name string) *journal.JetStream {
	t.Helper()
	nc, err := nats.Connect(p.URL(), nats.Name(t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	j, err := journal.OpenJetStream(context.Background(), nc, journal.JetStreamOptions{Stream: name, Prefix: "t." + name, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j
}

// An append whose acknowledgement is lost after JetStream stored it is
// sent again and succeeds, stored once: a single message (whose repeat
// the server refuses as a wrong last sequence) and an atomic batch (whose
// repeat it refuses as a duplicate). Before the fix both failed, the first
// as ErrFenced, the second as "already stored".
func TestJetStream_AppendWhoseAckIsLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := natstest.Start(t)
	p := natstest.StartProxy(t, srv)
	j := openJetStreamVia(t, p, "A")
	ev := func(seq uint64, typ messages.EventType, run messages.RunID) *messages.Encoded {
		return messages.NewEncoded(seq, typ, run, fmt.Appendf(nil, `{"n":%d}`, seq))
	}
	if err := j.Append(ctx, "s", []*messages.Encoded{ev(1, messages.TextDelta, "r")}); err != nil {
		t.Fatal(err)
	}

	dropped := p.DropOnce(pubAck("A", false))
	if err := j.Append(ctx, "s", []*messages.Encoded{ev(2, messages.TextDelta, "r")}); err != nil {
		t.Fatalf("single message whose ack was lost: Append = %v, want nil", err)
	}
	waitDropped(t, dropped)

	dropped = p.DropOnce(pubAck("A", true))
	if err := j.Append(ctx, "s", []*messages.Encoded{ev(3, messages.RunStarted, "r2"), ev(4, messages.RunFinished, "r2")}); err != nil {
		t.Fatalf("batch whose ack was lost: Append = %v, want nil", err)
	}
	waitDropped(t, dropped)

	// The journal's view of the session is right: the next append follows.
	if err := j.Append(ctx, "s", []*messages.Encoded{ev(5, messages.TextDelta, "r")}); err != nil {
		t.Fatal(err)
	}
	evs, err := j.ReadAfter(ctx, "s", 0, 100)
	if err != nil || len(evs) != 5 {
		t.Fatalf("ReadAfter = %d events, %v; want 5", len(evs), err)
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	if info, ok, err := j.Run(ctx, "r2"); err != nil || !ok || info.FirstSeq != 3 || info.LastSeq != 4 {
		t.Fatalf("Run(r2) = %+v, %v, %v; want seqs 3..4", info, ok, err)
	}
}

// An append whose acknowledgement is lost, and whose session another
// process fences before the repeat, is ErrFenced: the batch is stored, but
// the session is not this process's any more (the repeat must not take
// the fence, which ends at the same seq, for its own message).
func TestJetStream_AppendWhoseAckIsLostThenFenced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := natstest.Start(t)
	p := natstest.StartProxy(t, srv)
	a := openJetStreamVia(t, p, "B")
	b := openJetStream(t, natstest.Connect(t, srv), "B")
	ev := func(seq uint64) []*messages.Encoded {
		return []*messages.Encoded{messages.NewEncoded(seq, messages.TextDelta, "r", fmt.Appendf(nil, `{"n":%d}`, seq))}
	}
	if err := a.Append(ctx, "s", ev(1)); err != nil {
		t.Fatal(err)
	}
	isAck := pubAck("B", false)
	dropped := p.DropOnce(func(subj string, data []byte) bool {
		if !isAck(subj, data) {
			return false
		}
		if _, err := b.Fence(ctx, "s"); err != nil { // the message is stored: b takes over now
			t.Errorf("Fence: %v", err)
		}
		return true
	})
	if err := a.Append(ctx, "s", ev(2)); !errors.Is(err, journal.ErrFenced) {
		t.Fatalf("Append = %v, want ErrFenced", err)
	}
	waitDropped(t, dropped)
	if h, err := b.Head(ctx, "s"); err != nil || h != 2 {
		t.Fatalf("Head = %d, %v; want 2", h, err)
	}
}
