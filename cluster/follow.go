package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/conclave-ai/conclave/actors/feed"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// Followers serves a node's subscriptions (SSE, WebSocket, AG-UI, A2A
// streams) from the shared journal's tail, whichever node owns the
// session: one JetStream ordered consumer per followed session and node,
// fanned out to the node's subscribers through the same feed as a hub's
// (actors/feed). A stream therefore does not notice its session's owner
// changing: the new owner appends to the same journal, seqs go on, and
// a gap (an overflowing subscriber) is read back from the journal.
// It implements actors.Followers.
type Followers struct {
	journal   TailJournal
	newID     func() uuid.UUID
	now       func() time.Time
	tailBytes int

	mu       sync.Mutex
	sessions map[messages.SessionID]*follower
	closed   bool
}

// TailJournal is the journal Followers read: journal.JetStream, or the
// shared journal of testkit/sim's cluster mode.
type TailJournal interface {
	journal.Journal
	// Tail calls fn with each batch of events appended to session s after
	// the call, in seq order, and returns the session's head at the start;
	// stop ends it (fn is not called after stop returns). See
	// journal.JetStream.Tail.
	Tail(ctx context.Context, s messages.SessionID, fn func([]*messages.Encoded)) (head uint64, stop func(), err error)
}

var _ TailJournal = (*journal.JetStream)(nil)

// NewFollowers returns the followers of j. newID and now make the
// replay_truncated events of readers that fell behind retention. Each
// followed session keeps DefaultTailBytes of its latest events
// (NewFollowersWith sets it).
func NewFollowers(j TailJournal, newID func() uuid.UUID, now func() time.Time) *Followers {
	return NewFollowersWith(j, FollowersOptions{NewID: newID, Now: now})
}

// FollowersOptions configures NewFollowersWith; the zero value is valid.
type FollowersOptions struct {
	// NewID and Now make the replay_truncated events of readers that fell
	// behind retention; default uuid.New and time.Now.
	NewID func() uuid.UUID
	Now   func() time.Time
	// TailBytes is how much of a followed session's latest events the
	// node keeps in memory (per session), for subscribers that fell
	// behind to catch up from; beyond it they read the journal. Default
	// DefaultTailBytes.
	TailBytes int
}

// NewFollowersWith returns the followers of j, configured by opts.
func NewFollowersWith(j TailJournal, opts FollowersOptions) *Followers {
	if opts.NewID == nil {
		opts.NewID = uuid.New
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.TailBytes <= 0 {
		opts.TailBytes = DefaultTailBytes
	}
	return &Followers{journal: j, newID: opts.NewID, now: opts.Now, tailBytes: opts.TailBytes, sessions: map[messages.SessionID]*follower{}}
}

// follower is one followed session: the feed.Source of its subscriptions.
type follower struct {
	replay feed.Replay
	recent *tail    // the latest events: catch-up reads from memory
	behind *catchup // reads of the journal beyond recent, shared
	head   atomic.Uint64
	ready  chan struct{} // closed once the tail started (or failed: err)
	err    error
	stop   func()

	mu   sync.Mutex
	subs map[*feed.Subscription]struct{}
}

// Head implements feed.Source.
func (f *follower) Head() uint64 { return f.head.Load() }

// ReadAfter implements feed.Source: from the latest events when it has
// them, from the journal otherwise.
func (f *follower) ReadAfter(ctx context.Context, after uint64, limit int) ([]*messages.Encoded, error) {
	if evs, ok := f.recent.readAfter(after, limit); ok {
		return evs, nil
	}
	return f.behind.read(ctx, after, limit, func(ctx context.Context, after uint64, limit int) ([]*messages.Encoded, error) {
		return f.replay.ReadAfter(ctx, f.Head(), after, limit)
	})
}

// deliver publishes a batch the journal stored: the new head first, then
// the offer (feed's order), never blocking on a subscriber.
func (f *follower) deliver(evs []*messages.Encoded) {
	if len(evs) == 0 {
		return
	}
	f.recent.add(evs)
	if last := evs[len(evs)-1].Seq; last > f.head.Load() {
		f.head.Store(last)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for sub := range f.subs {
		sub.Offer(evs)
	}
}

// Follow attaches a subscription after cursor `after` to the events of the
// session stored under key (session is its id as clients know it). head
// is the session's head when it attached; unfollow detaches it.
func (fs *Followers) Follow(ctx context.Context, key, session messages.SessionID, after uint64, queue int) (*feed.Subscription, uint64, func(), error) {
	fs.mu.Lock()
	if fs.closed {
		fs.mu.Unlock()
		return nil, 0, nil, ErrClosed
	}
	f, ok := fs.sessions[key]
	if !ok {
		f = &follower{
			replay: feed.Replay{Journal: fs.journal, Key: key, Session: session, NewID: fs.newID, Now: fs.now},
			recent: newTail(fs.tailBytes), behind: newCatchup(fs.tailBytes), ready: make(chan struct{}), subs: map[*feed.Subscription]struct{}{},
		}
		fs.sessions[key] = f
	}
	fs.mu.Unlock()
	if !ok {
		head, stop, err := fs.journal.Tail(context.WithoutCancel(ctx), key, f.deliver)
		if err != nil {
			fs.mu.Lock()
			delete(fs.sessions, key)
			fs.mu.Unlock()
		}
		f.head.Store(head)
		f.stop, f.err = stop, err
		close(f.ready)
	}
	select {
	case <-f.ready:
	case <-ctx.Done():
		return nil, 0, nil, ctx.Err()
	}
	if f.err != nil {
		return nil, 0, nil, f.err
	}
	sub := feed.New(f, after, queue)
	f.mu.Lock()
	f.subs[sub] = struct{}{}
	f.mu.Unlock()
	sub.Attached()
	return sub, f.Head(), func() { fs.unfollow(key, f, sub) }, nil
}

// unfollow detaches sub, and stops following the session when it was the
// last subscription.
func (fs *Followers) unfollow(key messages.SessionID, f *follower, sub *feed.Subscription) {
	sub.Close(nil)
	fs.mu.Lock()
	f.mu.Lock()
	delete(f.subs, sub)
	last := len(f.subs) == 0 && fs.sessions[key] == f
	if last {
		delete(fs.sessions, key)
	}
	f.mu.Unlock()
	fs.mu.Unlock()
	if last {
		f.stop()
	}
}

// ErrClosed is returned by Follow after Shutdown.
var ErrClosed = errors.New("cluster: followers shut down")

// Shutdown closes every subscription (each delivers what it has up to its
// head, then ends) and stops every tail.
func (fs *Followers) Shutdown(ctx context.Context) error {
	fs.mu.Lock()
	fs.closed = true
	all := fs.sessions
	fs.sessions = map[messages.SessionID]*follower{}
	fs.mu.Unlock()
	for _, f := range all {
		<-f.ready
		f.mu.Lock()
		for sub := range f.subs {
			sub.Close(nil)
		}
		f.mu.Unlock()
		if f.stop != nil {
			f.stop()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}
