package feed_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors/feed"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

const session = messages.SessionID("s1")

// source is a journal plus a head published after each append, as the hub does.
type source struct {
	j    *journal.Memory
	head atomic.Uint64
}

func (s *source) Head() uint64 { return s.head.Load() }
func (s *source) ReadAfter(ctx context.Context, after uint64, limit int) ([]*messages.Encoded, error) {
	return s.j.ReadAfter(ctx, session, after, limit)
}

// publish appends seqs from..to, publishes the head, then offers to subs (hub order).
func (s *source) publish(t testing.TB, subs []*feed.Subscription, from, to uint64) {
	batch := make([]*messages.Encoded, 0, to-from+1)
	for q := from; q <= to; q++ {
		batch = append(batch, messages.NewEncoded(q, messages.TextDelta, "r", []byte(`{}`)))
	}
	if err := s.j.Append(context.Background(), session, batch); err != nil {
		t.Fatal(err)
	}
	s.head.Store(to)
	for _, sub := range subs {
		sub.Offer(batch)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func drain(ctx context.Context, t *testing.T, sub *feed.Subscription, until uint64) []uint64 {
	t.Helper()
	var got []uint64
	var buf []*messages.Encoded
	for sub.Cursor() < until {
		var err error
		buf, err = sub.Next(ctx, buf, 7)
		if err != nil {
			t.Fatalf("Next at cursor %d: %v", sub.Cursor(), err)
		}
		for _, e := range buf {
			got = append(got, e.Seq)
		}
	}
	return got
}

func checkExactly(t *testing.T, got []uint64, after, until uint64) {
	t.Helper()
	if uint64(len(got)) != until-after {
		t.Fatalf("got %d events, want %d", len(got), until-after)
	}
	for i, q := range got {
		if q != after+uint64(i)+1 {
			t.Fatalf("event %d has seq %d, want %d", i, q, after+uint64(i)+1)
		}
	}
}

func TestSubscription_ReplayThenLive(t *testing.T) {
	t.Parallel()
	src := &source{j: journal.NewMemory()}
	src.publish(t, nil, 1, 10) // before the subscriber exists
	sub := feed.New(src, 3, 4)
	src.publish(t, []*feed.Subscription{sub}, 11, 12)
	checkExactly(t, drain(ctxT(t), t, sub, 12), 3, 12)
}

func TestSubscription_OverflowCatchesUpFromJournal(t *testing.T) {
	t.Parallel()
	src := &source{j: journal.NewMemory()}
	sub := feed.New(src, 0, 2)
	for q := uint64(1); q <= 50; q++ {
		src.publish(t, []*feed.Subscription{sub}, q, q) // the consumer reads nothing meanwhile
	}
	if sub.Dropped() == 0 {
		t.Fatal("expected the small queue to overflow")
	}
	checkExactly(t, drain(ctxT(t), t, sub, 50), 0, 50)
}

func TestSubscription_CloseDrainsThenReports(t *testing.T) {
	t.Parallel()
	src := &source{j: journal.NewMemory()}
	sub := feed.New(src, 0, 8)
	src.publish(t, []*feed.Subscription{sub}, 1, 5)
	boom := errors.New("hub stopped")
	sub.Close(boom)
	ctx := ctxT(t)
	checkExactly(t, drain(ctx, t, sub, 5), 0, 5)
	if _, err := sub.Next(ctx, nil, 0); !errors.Is(err, boom) {
		t.Fatalf("Next after drain = %v, want %v", err, boom)
	}
}

func TestSubscription_NextHonoursContext(t *testing.T) {
	t.Parallel()
	sub := feed.New(&source{j: journal.NewMemory()}, 0, 8)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sub.Next(ctx, nil, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next = %v, want context.Canceled", err)
	}
}

// TestSubscription_ConcurrentPublish races one publisher against many
// subscribers that attach at random cursors and random moments, with queues
// small enough to overflow: each must see every seq after its cursor exactly
// once, in order.
func TestSubscription_ConcurrentPublish(t *testing.T) {
	t.Parallel()
	const total, subscribers = 3000, 40
	src := &source{j: journal.NewMemory()}
	var mu sync.Mutex
	var live []*feed.Subscription
	ctx := ctxT(t)

	var wg sync.WaitGroup
	for i := range subscribers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			after := rng.Uint64N(src.Head() + 1)
			sub := feed.New(src, after, 1+rng.IntN(16))
			mu.Lock()
			live = append(live, sub)
			mu.Unlock()
			checkExactly(t, drain(ctx, t, sub, total), after, total)
		}()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for q := uint64(1); q <= total; {
		to := min(total, q+rng.Uint64N(5))
		mu.Lock()
		subs := append([]*feed.Subscription(nil), live...)
		mu.Unlock()
		src.publish(t, subs, q, to)
		q = to + 1
	}
	wg.Wait()
}

// TestSubscription_AttachedWakesCaughtUpConsumer: a consumer that caught up
// from the journal before the hub registered it waits for an offer; events
// published before the registration must still reach it, via Attached.
func TestSubscription_AttachedWakesCaughtUpConsumer(t *testing.T) {
	t.Parallel()
	src := &source{j: journal.NewMemory()}
	src.publish(t, nil, 1, 5)
	sub := feed.New(src, 0, 8)
	ctx := ctxT(t)
	checkExactly(t, drain(ctx, t, sub, 5), 0, 5)
	got := make(chan []uint64)
	go func() {
		evs, err := sub.Next(ctx, nil, 0) // waits: queue empty, head == cursor
		if err != nil {
			t.Error(err)
		}
		var seqs []uint64
		for _, e := range evs {
			seqs = append(seqs, e.Seq)
		}
		got <- seqs
	}()
	src.publish(t, nil, 6, 7) // the hub has not registered sub yet: no offer
	sub.Attached()
	if seqs := <-got; len(seqs) != 2 || seqs[0] != 6 {
		t.Fatalf("after Attached got %v, want [6 7]", seqs)
	}
}

func TestSubscription_PollAndOnReady(t *testing.T) {
	t.Parallel()
	src := &source{j: journal.NewMemory()}
	sub := feed.New(src, 0, 4)
	var ready atomic.Int32
	sub.OnReady(func() { ready.Add(1) })
	ctx := ctxT(t)
	if evs, err := sub.Poll(ctx, nil, 0); err != nil || len(evs) != 0 {
		t.Fatalf("Poll on empty = %v, %v", evs, err)
	}
	src.publish(t, []*feed.Subscription{sub}, 1, 10) // overflows the queue of 4
	if ready.Load() == 0 {
		t.Fatal("OnReady not called on offer")
	}
	var got []uint64
	for len(got) < 10 {
		evs, err := sub.Poll(ctx, nil, 3)
		if err != nil || len(evs) == 0 {
			t.Fatalf("Poll = %d events, %v", len(evs), err)
		}
		for _, e := range evs {
			got = append(got, e.Seq)
		}
	}
	checkExactly(t, got, 0, 10)
	n := ready.Load()
	sub.Close(nil)
	if ready.Load() == n {
		t.Fatal("OnReady not called on close")
	}
	if _, err := sub.Poll(ctx, nil, 0); !errors.Is(err, feed.ErrClosed) {
		t.Fatalf("Poll after close = %v", err)
	}
}
