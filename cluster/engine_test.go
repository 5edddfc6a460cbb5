package cluster_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/cluster"
	"github.com/conclave-ai/conclave/internal/natstest"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// clusterNode is an engine on the shared journal, as `serve --cluster` runs it.
type clusterNode struct {
	nc        *nats.Conn
	node      *cluster.Node
	followers *cluster.Followers
	engine    *actors.Engine
}

func startNode(t *testing.T, nc *nats.Conn, id string, opts ...func(*actors.Config)) *clusterNode {
	t.Helper()
	return startNodeWith(t, nc, id, journal.JetStreamOptions{}, opts...)
}

// startNodeWith is startNode with the journal's options.
func startNodeWith(t *testing.T, nc *nats.Conn, id string, jopts journal.JetStreamOptions, opts ...func(*actors.Config)) *clusterNode {
	t.Helper()
	ctx := context.Background()
	j, err := journal.OpenJetStream(ctx, nc, jopts)
	if err != nil {
		t.Fatal(err)
	}
	n, err := cluster.Join(ctx, nc, j, cluster.Options{NodeID: id, Lease: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return runNode(t, nc, j, n, opts...)
}

// runNode starts the engine of node n on journal j (opts adjust its
// config) and shuts it, its followers and n down when the test ends.
func runNode(t *testing.T, nc *nats.Conn, j *journal.JetStream, n *cluster.Node, opts ...func(*actors.Config)) *clusterNode {
	t.Helper()
	f := cluster.NewFollowers(j, nil, time.Now)
	cfg := actors.Config{Journal: j, Placement: n, Followers: f, KeepRunsOnShutdown: true, SleepAfter: -1}
	for _, o := range opts {
		o(&cfg)
	}
	e, err := actors.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.OnAdopt(e.Adopt)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Shutdown(ctx)
		_ = f.Shutdown(ctx)
		_ = n.Shutdown(ctx)
	})
	return &clusterNode{nc: nc, node: n, followers: f, engine: e}
}

// A run starts on node a, parks on two tool approvals, and is watched from
// node b. a is cut off from JetStream (as good as dead): b takes the
// session over, the run comes back parked on the same interrupts, is
// resumed on b and finishes; b's stream, which never reconnected, is one
// gapless, duplicate-free sequence across the takeover.
func TestEngines_TakeoverKeepsRunsAndStreams(t *testing.T) {
	srv := natstest.Start(t)
	ncA := natstest.Connect(t, srv)
	a := startNode(t, ncA, "a")
	b := startNode(t, natstest.Connect(t, srv), "b")
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()

	ref, err := a.engine.StartRun(ctx, messages.StartRun{Question: "q", HITL: messages.HITLTools, SessionID: "s1",
		Scenario: &messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4, Approvals: 2}})
	if err != nil {
		t.Fatal(err)
	}
	var noe *cluster.NotOwnerError
	if _, err := b.engine.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "s1"}); !errors.As(err, &noe) || noe.Owner != "a" {
		t.Fatalf("StartRun on b in a's session = %v, want NotOwnerError naming a", err)
	}
	probe, err := testkit.NewProbe(ctx, b.engine, "", "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	ids := toolApprovals(ctx, t, probe, a.engine, 2)
	if _, err := b.engine.Resume(messages.Resume{InterruptID: ids[0], Decision: messages.DecisionApprove}); err == nil {
		t.Fatal("b resumed an interrupt of a run a owns")
	}

	ncA.Close() // a dies, as far as the cluster can tell

	var pending []messages.Interrupt
	until(t, 10*time.Second, "b adopts the parked run", func() bool {
		pending, _, _ = b.engine.PendingInterrupts(ctx, "", "s1", "", 10)
		return len(pending) == 2
	})
	var got []string
	for _, in := range pending {
		got = append(got, in.InterruptID)
	}
	slices.Sort(ids)
	slices.Sort(got)
	if !slices.Equal(ids, got) {
		t.Fatalf("interrupts after the takeover %v, want the same as before %v", got, ids)
	}
	for _, id := range ids {
		if _, err := b.engine.Resume(messages.Resume{InterruptID: id, Decision: messages.DecisionApprove}); err != nil {
			t.Fatalf("resume %s on b: %v", id, err)
		}
	}
	if _, err := probe.Until(ctx, testkit.TerminalOf(ref.RunID)); err != nil {
		t.Fatal(err)
	}
	events := probe.Seen()
	for i, env := range events {
		if env.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: the stream has a gap or a duplicate", i, env.Seq)
		}
	}
	testkit.AssertInvariants(t, events)
	if last := events[len(events)-1]; last.Type != messages.RunFinished {
		t.Fatalf("run ended with %s", last.Type)
	}
	// A new run in the session now starts on b.
	if _, err := b.engine.StartRun(ctx, messages.StartRun{Question: "again", SessionID: "s1"}); err != nil {
		t.Fatalf("StartRun on the new owner: %v", err)
	}
}

// A node that lost its membership but still reaches the journal (a long
// pause, a partition from the membership bucket alone) and goes on writing
// is refused: its run's next events never reach the session, whose new
// owner resolves each interrupt exactly once.
func TestEngines_StaleOwnerIsFenced(t *testing.T) {
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	// a's membership and a's journal on separate connections: only the
	// membership is cut.
	ncMember := natstest.Connect(t, srv)
	j, err := journal.OpenJetStream(ctx, natstest.Connect(t, srv), journal.JetStreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := cluster.Join(ctx, ncMember, j, cluster.Options{NodeID: "a", Lease: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	logA := &testkit.LockedBuffer{}
	fa := cluster.NewFollowers(j, nil, time.Now)
	ea, err := actors.New(actors.Config{Journal: j, Placement: n, Followers: fa, KeepRunsOnShutdown: true, SleepAfter: -1,
		Logger: slog.New(slog.NewTextHandler(logA, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ea.Shutdown(context.Background())
		_ = fa.Shutdown(context.Background())
		_ = n.Shutdown(context.Background())
	})
	b := startNode(t, natstest.Connect(t, srv), "b")

	ref, err := ea.StartRun(ctx, messages.StartRun{Question: "q", HITL: messages.HITLTools, SessionID: "s",
		Scenario: &messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4, Approvals: 2}})
	if err != nil {
		t.Fatal(err)
	}
	probe, err := testkit.NewProbe(ctx, b.engine, "", "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	ids := toolApprovals(ctx, t, probe, ea, 2)

	ncMember.Close() // a can no longer renew; b takes the session over
	until(t, 10*time.Second, "b adopts the run", func() bool {
		pending, _, _ := b.engine.PendingInterrupts(ctx, "", "s", "", 10)
		return len(pending) == 2
	})
	// a still holds the run and answers the interrupt: its agent goes on
	// and a's hub appends, from its stale view, and is refused.
	if _, err := ea.Resume(messages.Resume{InterruptID: ids[0], Decision: messages.DecisionReject, Feedback: "stale"}); err != nil {
		t.Fatalf("resume on the stale node: %v", err)
	}
	until(t, 10*time.Second, "a's append is refused", func() bool {
		return strings.Contains(logA.String(), "written by another owner")
	})
	for _, id := range ids {
		if _, err := b.engine.Resume(messages.Resume{InterruptID: id, Decision: messages.DecisionApprove}); err != nil {
			t.Fatalf("resume %s on b: %v", id, err)
		}
	}
	if _, err := probe.Until(ctx, testkit.TerminalOf(ref.RunID)); err != nil {
		t.Fatal(err)
	}
	events := probe.Seen()
	testkit.AssertInvariants(t, events)
	for _, env := range events {
		if pl, ok := env.Payload.(*messages.InterruptResolvedPayload); ok && pl.InterruptID == ids[0] && pl.Decision != messages.DecisionApprove {
			t.Fatalf("the stale node's decision reached the session: %+v", pl)
		}
	}
	if last := events[len(events)-1]; last.Type != messages.RunFinished {
		t.Fatalf("run ended with %s", last.Type)
	}
	// a's stale run ends too (its last interrupt answered there), its
	// terminal event refused: a no longer lists the run from its own run
	// index (before, it said running for good) but as the catalogue has it,
	// finished on b.
	if _, err := ea.Resume(messages.Resume{InterruptID: ids[1], Decision: messages.DecisionReject, Feedback: "stale"}); err != nil {
		t.Fatalf("resume on the stale node: %v", err)
	}
	until(t, 10*time.Second, "a lists the run finished", func() bool {
		sum, err := ea.Run("", ref.RunID)
		return err == nil && sum.Status == messages.StatusFinished
	})
}

// toolApprovals follows probe until the run has raised n tool approvals,
// approving its plan and node gates on owner, and returns their ids.
func toolApprovals(ctx context.Context, t *testing.T, probe *testkit.Probe, owner *actors.Engine, n int) []string {
	t.Helper()
	var ids []string
	if _, err := probe.Until(ctx, func(env *messages.Envelope) bool {
		pl, ok := env.Payload.(*messages.InterruptRaisedPayload)
		switch {
		case !ok:
		case pl.Kind == messages.InterruptToolApproval:
			ids = append(ids, pl.InterruptID)
		default: // the plan and node gates
			if _, err := owner.Resume(messages.Resume{InterruptID: pl.InterruptID, Decision: messages.DecisionApprove}); err != nil {
				t.Fatal(err)
			}
		}
		return len(ids) == n
	}); err != nil {
		for _, env := range probe.Seen() {
			t.Logf("seen %d %s", env.Seq, env.Type)
		}
		t.Fatal(err)
	}
	return ids
}

// A session whose runs ended and whose hub went idle is given up: its
// owner key is gone, and its next run starts on whichever node is asked,
// continuing its seq, and that node gives it up once idle in turn.
func TestEngines_IdleSessionIsGivenUp(t *testing.T) {
	srv := natstest.Start(t)
	idle := func(c *actors.Config) { c.HubIdleAfter = 100 * time.Millisecond }
	a := startNode(t, natstest.Connect(t, srv), "a", idle)
	b := startNode(t, natstest.Connect(t, srv), "b", idle)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	key := actors.JournalKey("", "s1")

	_, first := testkit.RunCouncil(t, a.engine, messages.StartRun{Question: "q", SessionID: "s1", Scenario: &messages.Scenario{Nodes: 2, Tokens: 2}})
	until(t, 10*time.Second, "a gives the idle session up", func() bool { return !a.node.Holds(key) })
	// The owners bucket forgets it once the release's purge lands, which a
	// loaded machine may take a moment after a stops holding it.
	until(t, 10*time.Second, "the owners bucket forgets the idle session", func() bool {
		owner, _, err := a.node.Owner(ctx, key)
		return err == nil && owner == ""
	})
	if n := metric(t, a.node.Collector(nil), "conclave_cluster_sessions_released_total", ""); n != 1 {
		t.Fatalf("conclave_cluster_sessions_released_total = %v, want 1", n)
	}

	ref, second := testkit.RunCouncil(t, b.engine, messages.StartRun{Question: "again", SessionID: "s1", Scenario: &messages.Scenario{Nodes: 1, Tokens: 1}})
	if second[len(first)].RunID != ref.RunID || second[len(first)].Seq != uint64(len(first)+1) {
		t.Fatalf("b's run starts at seq %d, want %d", second[len(first)].Seq, len(first)+1)
	}
	for i, env := range second {
		if env.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: a gap or a duplicate", i, env.Seq)
		}
	}
	testkit.AssertInvariants(t, second)
	until(t, 10*time.Second, "b gives the session up in turn", func() bool { return !b.node.Holds(key) })
}

// A session taken over from a dead node with no run live in it is given up
// once idle too, so that it does not stay the taker's for good.
func TestEngines_TakenOverIdleSessionIsGivenUp(t *testing.T) {
	srv := natstest.Start(t)
	ncA := natstest.Connect(t, srv)
	a := startNode(t, ncA, "a") // its hubs stay a minute
	b := startNode(t, natstest.Connect(t, srv), "b", func(c *actors.Config) { c.HubIdleAfter = 100 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	key := actors.JournalKey("", "s1")
	testkit.RunCouncil(t, a.engine, messages.StartRun{Question: "q", SessionID: "s1", Scenario: &messages.Scenario{Nodes: 1, Tokens: 1}})
	if owner, _, err := b.node.Owner(ctx, key); err != nil || owner != "a" {
		t.Fatalf("owner = %q, %v; want a", owner, err)
	}
	ncA.Close() // a dies holding the idle session
	until(t, 10*time.Second, "b takes the session over", func() bool {
		return metric(t, b.node.Collector(nil), "conclave_cluster_takeovers_total", "") == 1
	})
	until(t, 10*time.Second, "b gives it up once idle", func() bool {
		owner, _, err := b.node.Owner(ctx, key)
		return err == nil && owner == "" && !b.node.Holds(key)
	})
}
