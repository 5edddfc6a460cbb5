package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/conclave-ai/conclave/cluster"
	"github.com/conclave-ai/conclave/internal/natstest"
	"github.com/conclave-ai/conclave/journal"
)

// startTimeout is the tests' start deadline (serve's default is 60 s).
const startTimeout = 20 * time.Second

// startMember opens the journal and joins as serve does, with replicas
// and a start deadline, and answers on res.
func startMember(nc *nats.Conn, id string, replicas int, res chan<- joined) {
	ctx := context.Background()
	j, err := journal.OpenJetStream(ctx, nc, journal.JetStreamOptions{Replicas: replicas, StartTimeout: startTimeout, Logger: quiet})
	if err != nil {
		res <- joined{id: id, err: err}
		return
	}
	n, err := cluster.Join(ctx, nc, j, cluster.Options{NodeID: id, Lease: time.Second, Replicas: replicas, StartTimeout: startTimeout, Logger: quiet})
	res <- joined{id: id, node: n, err: err}
}

type joined struct {
	id   string
	node *cluster.Node
	err  error
}

// collect waits for n starts, failing t on any error; the nodes leave at
// the test's end.
func collect(t *testing.T, res <-chan joined, n int) []*cluster.Node {
	t.Helper()
	var nodes []*cluster.Node
	var failed []error
	for range n {
		select {
		case r := <-res:
			if r.err != nil {
				failed = append(failed, fmt.Errorf("node %s: %w", r.id, r.err))
				continue
			}
			nodes = append(nodes, r.node)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = r.node.Shutdown(ctx)
			})
		case <-time.After(2 * startTimeout):
			t.Fatal("a start did not return")
		}
	}
	if len(failed) > 0 {
		t.Fatalf("starts failed: %v", failed)
	}
	return nodes
}

// Three nodes start at once on a fresh three-server JetStream cluster, as
// a coordinated rollout does: each creates the R3 stream and buckets (or
// finds them), and all three join the first time.
func TestJoin_ThreeNodesStartTogether(t *testing.T) {
	servers := natstest.StartCluster(t, 3)
	res := make(chan joined, 3)
	for i, s := range servers {
		nc := natstest.Connect(t, s)
		go startMember(nc, fmt.Sprintf("n%d", i+1), 3, res)
	}
	nodes := collect(t, res, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	members, err := nodes[0].Members(ctx)
	if err != nil || len(members) != 3 {
		t.Fatalf("Members = %+v, %v; want 3", members, err)
	}
}

// waitLog signals each record whose message starts with "waiting for".
type waitLog struct {
	slog.Handler
	waits chan string
}

func (h waitLog) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "waiting for") {
		select {
		case h.waits <- r.Message:
		default:
		}
	}
	return nil
}

func (h waitLog) Enabled(context.Context, slog.Level) bool { return true }

func (h waitLog) WithAttrs([]slog.Attr) slog.Handler { return h }

// A node starts before JetStream is available (the servers restarting,
// the meta leader not yet elected): it waits, saying what for, and opens
// the journal and joins once JetStream answers. Before, the start failed
// at once.
func TestJoin_StartsBeforeJetStreamIsAvailable(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server: not ready in 10 s")
	}
	nc := natstest.Connect(t, s)
	log := waitLog{Handler: slog.DiscardHandler, waits: make(chan string, 1)}
	res := make(chan joined, 1)
	go func() {
		ctx := context.Background()
		j, err := journal.OpenJetStream(ctx, nc, journal.JetStreamOptions{StartTimeout: startTimeout, Logger: slog.New(log)})
		if err != nil {
			res <- joined{id: "a", err: err}
			return
		}
		n, err := cluster.Join(ctx, nc, j, cluster.Options{NodeID: "a", Lease: time.Second, StartTimeout: startTimeout, Logger: quiet})
		res <- joined{id: "a", node: n, err: err}
	}()
	select {
	case what := <-log.waits:
		if !strings.Contains(what, "stream CONCLAVE") {
			t.Fatalf("logged %q, want it to name the stream", what)
		}
	case r := <-res:
		t.Fatalf("the start returned before JetStream was enabled: %v", r.err)
	case <-time.After(startTimeout):
		t.Fatal("the start logged no wait")
	}
	if err := s.EnableJetStream(&server.JetStreamConfig{StoreDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	collect(t, res, 1)
}

// A node starts while JetStream elects a new meta leader (the old one's
// server was just lost; the stream and buckets exist, with three
// replicas): it waits for the election and joins.
func TestJoin_StartsDuringALeaderElection(t *testing.T) {
	servers := natstest.StartCluster(t, 3)
	res := make(chan joined, 2)
	leader := 0
	for i, s := range servers {
		if s.JetStreamIsLeader() {
			leader = i
		}
	}
	survivor := servers[(leader+1)%3]
	go startMember(natstest.Connect(t, survivor), "first", 3, res)
	collect(t, res, 1)

	servers[leader].Shutdown() // the meta leader: the two others elect one
	go startMember(natstest.Connect(t, survivor), "second", 3, res)
	collect(t, res, 1)
}
