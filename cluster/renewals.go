package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrOwnerLate is the cause of a forwarded call given up because the node
// it went to stopped renewing its membership (it is stopped, paused or cut
// off): its lease lapses soon and another node takes its sessions over.
// The Forwarder answers 503 with Retry-After rather than wait for its
// timeout. The call may still be served if the node comes back in time.
var ErrOwnerLate = errors.New("cluster: the node stopped renewing its membership")

// renewals judges whether a member still renews its membership key from
// the key's revisions, read now and then (observe): a member renews every
// Lease/4, so a member whose key has shown no new revision for late (3/4
// of a Lease: about three renewals missed) is late, and one whose key is
// gone has lost its lease. Revisions, not the key's timestamps, so that the
// judgement runs on this node's clock alone (the server's and the
// member's may differ). The first observation starts the count: a member
// is never judged late before late has passed since then.
type renewals struct {
	late  time.Duration
	rev   uint64
	since time.Time // when rev was first seen
}

func newRenewals(lease time.Duration) *renewals { return &renewals{late: lease * 3 / 4} }

// observe records a read of the key at now (present false: the key is
// gone) and reports why the member must be given up on, or nil.
func (r *renewals) observe(now time.Time, rev uint64, present bool) error {
	if !present {
		return fmt.Errorf("%w: its lease lapsed", ErrOwnerLate)
	}
	if rev != r.rev || r.since.IsZero() {
		r.rev, r.since = rev, now
		return nil
	}
	if d := now.Sub(r.since); d >= r.late {
		return fmt.Errorf("%w: no renewal seen for %v", ErrOwnerLate, d.Round(time.Millisecond))
	}
	return nil
}

// retryAfter is the Retry-After, in whole seconds, of a call given up on
// a late member: by then its lease has lapsed (it is at most Lease/4 from
// lapsing when it is judged late) and its sessions are being taken over.
func retryAfter(lease time.Duration) int {
	return max(1, int(math.Ceil(lease.Seconds()/2)))
}

// watchRenewals returns a context that is cancelled, with a cause matching
// ErrOwnerLate, when member id stops renewing its membership (renewals),
// read every Lease/8; stop ends the watch and waits for it. A read that
// fails (JetStream busy or electing) judges nothing.
func (n *Node) watchRenewals(ctx context.Context, id string) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := newRenewals(n.opts.Lease)
		tick := time.NewTicker(max(n.opts.Lease/8, 10*time.Millisecond))
		defer tick.Stop()
		for {
			e, err := n.nodes.Get(ctx, id)
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, jetstream.ErrKeyNotFound):
				cancel(r.observe(time.Now(), 0, false))
				return
			case err == nil:
				if why := r.observe(time.Now(), e.Revision(), true); why != nil {
					cancel(why)
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return ctx, func() { cancel(nil); <-done }
}
