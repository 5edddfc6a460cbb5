package journal_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/conclave-ai/conclave/internal/natstest"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

var jsStreams atomic.Int64

// openJetStream opens a journal on a stream of its own on nc's server.
func openJetStream(t *testing.T, nc *nats.Conn, name string) *journal.JetStream {
	t.Helper()
	if name == "" {
		name = fmt.Sprintf("T%d", jsStreams.Add(1))
	}
	j, err := journal.OpenJetStream(context.Background(), nc, journal.JetStreamOptions{Stream: name, Prefix: "t." + name})
	if err != nil {
		t.Fatalf("OpenJetStream: %v", err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j
}

func TestJetStream_Conformance(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, natstest.Start(t))
	testkit.RunJournalSuite(t, func(t *testing.T) journal.Journal { return openJetStream(t, nc, "") })
}

func TestJetStream_ReopenConformance(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, natstest.Start(t))
	// A "directory" is a stream: reopening it is opening the same stream again.
	testkit.RunDurableJournalSuite(t, func(t *testing.T, dir string) journal.Journal {
		name := fmt.Sprintf("D%x", dir)
		if len(name) > 200 {
			name = name[len(name)-200:]
		}
		j, err := journal.OpenJetStream(context.Background(), nc, journal.JetStreamOptions{Stream: name, Prefix: "d." + name})
		if err != nil {
			t.Fatalf("OpenJetStream: %v", err)
		}
		return j
	})
}

// Two processes think they own a session: the one that appends second,
// from a stale view, is fenced off and stores nothing.
func TestJetStream_FencesAStaleWriter(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ctx := context.Background()
	a := openJetStream(t, natstest.Connect(t, srv), "F")
	b := openJetStream(t, natstest.Connect(t, srv), "F")
	ev := func(seq uint64) []*messages.Encoded {
		return []*messages.Encoded{messages.NewEncoded(seq, messages.TextDelta, "r", fmt.Appendf(nil, `{"n":%d}`, seq))}
	}
	if err := a.Append(ctx, "s", ev(1)); err != nil {
		t.Fatal(err)
	}
	// b takes the session over: it reads the head and appends.
	if h, err := b.Head(ctx, "s"); err != nil || h != 1 {
		t.Fatalf("b.Head = %d, %v", h, err)
	}
	if err := b.Append(ctx, "s", ev(2)); err != nil {
		t.Fatal(err)
	}
	// a still believes the head is 1.
	if err := a.Append(ctx, "s", ev(2)); !errors.Is(err, journal.ErrFenced) {
		t.Fatalf("stale Append = %v, want ErrFenced", err)
	}
	// Even with the right seq, a's view is stale until it reads again.
	if err := b.Append(ctx, "s", ev(3)); err != nil {
		t.Fatal(err)
	}
	evs, err := a.ReadAfter(ctx, "s", 0, 10)
	if err != nil || len(evs) != 3 || string(evs[1].JSON) != `{"n":2}` {
		t.Fatalf("ReadAfter = %v, %v", evs, err)
	}
	// A new owner fences before it takes over: b, which appended last,
	// is refused from then on, and readers skip the fence.
	if h, err := a.Fence(ctx, "s"); err != nil || h != 3 {
		t.Fatalf("Fence = %d, %v; want 3", h, err)
	}
	if err := b.Append(ctx, "s", ev(4)); !errors.Is(err, journal.ErrFenced) {
		t.Fatalf("Append after a fence = %v, want ErrFenced", err)
	}
	if err := a.Append(ctx, "s", ev(4)); err != nil {
		t.Fatal(err)
	}
	if evs, err := b.ReadAfter(ctx, "s", 2, 10); err != nil || len(evs) != 2 || evs[0].Seq != 3 || evs[1].Seq != 4 {
		t.Fatalf("ReadAfter across the fence = %v, %v", evs, err)
	}
	if h, _ := b.Head(ctx, "s"); h != 4 {
		t.Fatalf("Head = %d, want 4", h)
	}
	// Two fresh writers racing for the same empty session: one wins.
	errs := make(chan error, 2)
	for _, j := range []*journal.JetStream{a, b} {
		go func() { errs <- j.Append(ctx, "fresh", ev(1)) }()
	}
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("racing first appends: %v, %v; want exactly one nil", e1, e2)
	}
	if h, _ := a.Head(ctx, "fresh"); h != 1 {
		t.Fatalf("head after the race = %d", h)
	}
}

// A batch larger than the server's max payload spans several messages,
// stored atomically, and reads back whole; a garbled message is reported,
// never returned.
func TestJetStream_LargeBatchAndChecksum(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	ctx := context.Background()
	j := openJetStream(t, nc, "L")
	big := make([]byte, 200<<10)
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	var batch []*messages.Encoded
	for seq := uint64(1); seq <= 20; seq++ { // 4 MB: at least 4 messages
		typ := messages.TextDelta
		if seq == 1 {
			typ = messages.RunStarted
		}
		batch = append(batch, messages.NewEncoded(seq, typ, "r1", fmt.Appendf(nil, `{"n":%d,"s":"%s"}`, seq, big)))
	}
	if err := j.Append(ctx, "s", batch); err != nil {
		t.Fatal(err)
	}
	var got []*messages.Encoded
	for cursor := uint64(0); cursor < 20; {
		evs, err := j.ReadAfter(ctx, "s", cursor, 7)
		if err != nil || len(evs) == 0 {
			t.Fatalf("ReadAfter(%d) = %d events, %v", cursor, len(evs), err)
		}
		got = append(got, evs...)
		cursor = evs[len(evs)-1].Seq
	}
	for i, e := range got {
		if e.Seq != uint64(i+1) || string(e.JSON) != string(batch[i].JSON) || e.Type != batch[i].Type || e.RunID != "r1" {
			t.Fatalf("event %d read back as seq %d type %s", i+1, e.Seq, e.Type)
		}
	}
	if info, ok, err := j.Run(ctx, "r1"); !ok || err != nil || info.FirstSeq != 1 {
		t.Fatalf("Run(r1) = %+v, %v, %v", info, ok, err)
	}

	// A message with a wrong checksum, published around the journal.
	m := nats.NewMsg("t.L.ev." + "cw") // token of "s" is "cw"
	m.Header.Set("Conclave-First", "21")
	m.Header.Set("Conclave-Last", "21")
	m.Header.Set("Conclave-Crc", "0")
	m.Data = []byte("\x0atext_delta\x02r1\x02{}")
	if _, err := nc.RequestMsg(m, 5e9); err != nil {
		t.Fatal(err)
	}
	_, err := j.ReadAfter(ctx, "s", 20, 10)
	var ce *journal.CorruptError
	if !errors.As(err, &ce) || ce.Seq != 21 {
		t.Fatalf("ReadAfter over a garbled message = %v, want a *CorruptError at seq 21", err)
	}
}

// Tail delivers every batch appended after it started, in order, and
// skips fences.
func TestJetStream_Tail(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ctx := context.Background()
	j := openJetStream(t, natstest.Connect(t, srv), "")
	w := openJetStream(t, natstest.Connect(t, srv), "")
	_ = w
	ev := func(seq uint64) []*messages.Encoded {
		return []*messages.Encoded{messages.NewEncoded(seq, messages.TextDelta, "r", fmt.Appendf(nil, `{"n":%d}`, seq))}
	}
	if err := j.Append(ctx, "s", ev(1)); err != nil {
		t.Fatal(err)
	}
	got := make(chan uint64, 100)
	head, stop, err := j.Tail(ctx, "s", func(evs []*messages.Encoded) {
		for _, e := range evs {
			got <- e.Seq
		}
	})
	if err != nil || head != 1 {
		t.Fatalf("Tail = %d, %v", head, err)
	}
	if err := j.Append(ctx, "s", ev(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Fence(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(ctx, "s", ev(3)); err != nil {
		t.Fatal(err)
	}
	for want := uint64(2); want <= 3; want++ {
		if seq := <-got; seq != want {
			t.Fatalf("tail delivered seq %d, want %d", seq, want)
		}
	}
	stop()
}

// SessionLiveRuns reads one session's live runs, as LiveRuns lists them.
func TestJetStream_SessionLiveRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openJetStream(t, natstest.Connect(t, natstest.Start(t)), "")
	start := func(s messages.SessionID, seq uint64, run messages.RunID) {
		t.Helper()
		if err := j.Append(ctx, s, []*messages.Encoded{messages.NewEncoded(seq, messages.RunStarted, run, []byte(`{}`))}); err != nil {
			t.Fatal(err)
		}
	}
	start("t/a", 1, "a1")
	start("t/b", 1, "b1")
	start("t/a", 2, "a2")
	if err := j.Append(ctx, "t/a", []*messages.Encoded{messages.NewEncoded(3, messages.RunFinished, "a1", []byte(`{}`))}); err != nil {
		t.Fatal(err)
	}
	runs, err := j.SessionLiveRuns(ctx, "t/a")
	if err != nil || len(runs) != 1 || runs[0].Run != "a2" || runs[0].FirstSeq != 2 {
		t.Fatalf("SessionLiveRuns(t/a) = %+v, %v; want a2 from seq 2", runs, err)
	}
	if all, err := j.LiveRuns(ctx); err != nil || len(all) != 2 {
		t.Fatalf("LiveRuns = %+v, %v; want a2 and b1", all, err)
	}
}
