package cluster_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/conclave-ai/conclave/cluster"
	"github.com/conclave-ai/conclave/internal/natstest"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type member struct {
	node    *cluster.Node
	journal *journal.JetStream
	mu      sync.Mutex
	adopted []messages.SessionID
}

func join(t *testing.T, nc *nats.Conn, id string, lease time.Duration) *member {
	t.Helper()
	ctx := context.Background()
	j, err := journal.OpenJetStream(ctx, nc, journal.JetStreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := cluster.Join(ctx, nc, j, cluster.Options{NodeID: id, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	m := &member{node: n, journal: j}
	n.OnAdopt(func(_ context.Context, s messages.SessionID) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.adopted = append(m.adopted, s)
		return nil
	})
	t.Cleanup(func() { _ = n.Shutdown(context.Background()) })
	return m
}

func (m *member) adoptedSessions() []messages.SessionID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]messages.SessionID(nil), m.adopted...)
}

// until polls cond until it holds or d passes (the server's TTLs run on
// its own clock: synctest cannot drive them).
func until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		<-tick.C
	}
}

func TestNode_ClaimOwnerAndTakeover(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()
	a := join(t, natstest.Connect(t, srv), "a", time.Second)
	b := join(t, natstest.Connect(t, srv), "b", time.Second)
	ev := func(seq uint64) []*messages.Encoded {
		return []*messages.Encoded{messages.NewEncoded(seq, messages.TextDelta, "r", []byte(`{}`))}
	}

	// Exactly one of two racing claims wins.
	errs := make(chan error, 2)
	for _, m := range []*member{a, b} {
		go func() { errs <- m.node.Claim(ctx, "t/s1") }()
	}
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("racing claims: %v, %v; want exactly one nil", e1, e2)
	}
	owner, loser := a, b
	if o, alive, err := a.node.Owner(ctx, "t/s1"); err != nil || !alive {
		t.Fatalf("Owner = %q, %v, %v", o, alive, err)
	} else if o == "b" {
		owner, loser = b, a
	}
	var noe *cluster.NotOwnerError
	if err := loser.node.Claim(ctx, "t/s1"); !errors.As(err, &noe) || noe.Owner != owner.node.ID() {
		t.Fatalf("loser's Claim = %v, want NotOwnerError naming %s", err, owner.node.ID())
	}
	if err := owner.journal.Append(ctx, "t/s1", ev(1)); err != nil {
		t.Fatal(err)
	}

	// The owner dies without leaving (its key expires): the other node
	// takes the session over at a sweep, fences it and adopts it.
	dead := owner.node
	if err := dead.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_ = dead // Shutdown deleted its key: that is a clean leave; a crash is below.
	until(t, 5*time.Second, "takeover after a leave", func() bool { return len(loser.adoptedSessions()) == 1 })
	if err := owner.journal.Append(ctx, "t/s1", ev(2)); !errors.Is(err, journal.ErrFenced) {
		t.Fatalf("old owner's Append after the takeover = %v, want ErrFenced", err)
	}
	if err := loser.journal.Append(ctx, "t/s1", ev(2)); err != nil {
		t.Fatalf("new owner's Append: %v", err)
	}
	// The takeover is counted, and the session held, once the adoption
	// returned: a moment after the test's adopt hook ran.
	until(t, 5*time.Second, "the takeover is counted", func() bool {
		return metric(t, loser.node.Collector(nil), "conclave_cluster_takeovers_total", "") == 1 &&
			metric(t, loser.node.Collector(nil), "conclave_cluster_sessions_owned", "") == 1
	})
}

// A node that cannot renew its key for a whole lease is lost: Lost closes,
// and a node that crashed (no leave) loses its sessions after its lease.
func TestNode_CrashAndLoss(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()
	ncA := natstest.Connect(t, srv)
	a := join(t, ncA, "a", time.Second)
	b := join(t, natstest.Connect(t, srv), "b", time.Second)
	if err := a.node.Claim(ctx, "t/s"); err != nil {
		t.Fatal(err)
	}
	// a is cut off from JetStream: it cannot renew.
	ncA.Close()
	until(t, 5*time.Second, "a lost", func() bool {
		select {
		case <-a.node.Lost():
			return true
		default:
			return false
		}
	})
	if err := a.node.Claim(ctx, "t/other"); !errors.Is(err, cluster.ErrLost) {
		t.Fatalf("Claim on a lost node = %v", err)
	}
	until(t, 5*time.Second, "b takes t/s over", func() bool { return len(b.adoptedSessions()) == 1 })
	if o, alive, err := b.node.Owner(ctx, "t/s"); o != "b" || !alive || err != nil {
		t.Fatalf("Owner = %q, %v, %v", o, alive, err)
	}
}

var quiet = slog.New(slog.DiscardHandler)

// A node that comes back under the same id (a fixed --node-id) after its
// membership lapsed adopts the sessions its former life owned.
func TestNode_SameIDAdoptsItsFormerSessions(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()
	nc := natstest.Connect(t, srv)
	first := join(t, nc, "a", time.Second)
	if err := first.node.Claim(ctx, "t/s"); err != nil {
		t.Fatal(err)
	}
	nc.Close() // dies without leaving
	until(t, 5*time.Second, "the first life is lost", func() bool {
		select {
		case <-first.node.Lost():
			return true
		default:
			return false
		}
	})
	// Its key expires on the server's clock: until then the id is taken.
	js, err := jetstream.New(natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := js.KeyValue(ctx, "CONCLAVE_NODES")
	if err != nil {
		t.Fatal(err)
	}
	until(t, 5*time.Second, "the first life's key expires", func() bool {
		_, err := nodes.Get(ctx, "a")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
	again := join(t, natstest.Connect(t, srv), "a", time.Second)
	until(t, 5*time.Second, "the second life adopts t/s", func() bool { return slices.Contains(again.adoptedSessions(), "t/s") })
	if err := again.node.Claim(ctx, "t/s"); err != nil {
		t.Fatalf("Claim after adoption: %v", err)
	}
}
