package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/conclave-ai/conclave/messages"
)

// Ten subscribers that fell behind together, each reading 1,000 events in
// chunks of 100, read the journal ten times between them (once per chunk),
// not a hundred times, and each gets every event in order.
func TestCatchup_SharesReads(t *testing.T) {
	t.Parallel()
	journal := seqs(1, 1000)
	var reads atomic.Int32
	read := func(_ context.Context, after uint64, limit int) ([]*messages.Encoded, error) {
		reads.Add(1)
		end := min(int(after)+limit, len(journal))
		return journal[after:end], nil
	}
	c := newCatchup(2000 * tailCost(journal[0]))
	var wg sync.WaitGroup
	errs := make([]string, 10)
	for i := range 10 {
		wg.Go(func() {
			var after uint64
			for after < 1000 {
				evs, err := c.read(context.Background(), after, 100, read)
				if err != nil || len(evs) == 0 || evs[0].Seq != after+1 {
					errs[i] = fmt.Sprintf("read after %d: %v, %d events", after, err, len(evs))
					return
				}
				for k, e := range evs {
					if e.Seq != after+uint64(k)+1 {
						errs[i] = "events out of order"
						return
					}
				}
				after = evs[len(evs)-1].Seq
			}
		})
	}
	wg.Wait()
	for i, e := range errs {
		if e != "" {
			t.Fatalf("subscriber %d: %s", i, e)
		}
	}
	if n := reads.Load(); n != 10 {
		t.Fatalf("%d journal reads, want 10 (one per chunk)", n)
	}
}

// A replay_truncated notice (the cursor fell behind retention) is handed
// out but not kept: the next reader reads the journal itself.
func TestCatchup_DoesNotKeepNotices(t *testing.T) {
	t.Parallel()
	var reads atomic.Int32
	read := func(_ context.Context, after uint64, limit int) ([]*messages.Encoded, error) {
		reads.Add(1)
		return []*messages.Encoded{messages.NewEncoded(after+1, messages.ReplayTruncated, "", []byte(`{}`))}, nil
	}
	c := newCatchup(1 << 20)
	for range 2 {
		if evs, err := c.read(context.Background(), 0, 10, read); err != nil || len(evs) != 1 {
			t.Fatalf("read: %v %d", err, len(evs))
		}
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("%d journal reads, want 2", n)
	}
}
