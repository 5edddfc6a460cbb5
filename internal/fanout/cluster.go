package fanout

// Cluster mode (Options.ClusterNodes): the servers under test are N
// `conclave serve --cluster`-like nodes on one JetStream server, all
// following the one session; node 0 owns it and publishes, and the clients
// are spread over the nodes, so that each event crosses JetStream once per
// node and each node fans it out to its own clients.

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/cluster"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// jetStream is the JetStream server of a cluster-mode run. It runs in the
// measuring process, so its CPU time is in the clients' figure (and the
// report's "other" CPU is the rest of the machine).
type jetStream struct {
	srv *natsserver.Server
	dir string
}

func startJetStream() (*jetStream, error) {
	dir, err := os.MkdirTemp("", "conclave-fanout-js-")
	if err != nil {
		return nil, err
	}
	s, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("fanout: jetstream: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("fanout: jetstream: not ready in 10 s")
	}
	return &jetStream{srv: s, dir: dir}, nil
}

func (j *jetStream) url() string { return j.srv.ClientURL() }

func (j *jetStream) close() {
	j.srv.Shutdown()
	j.srv.WaitForShutdown()
	_ = os.RemoveAll(j.dir)
}

// clusterParts are what a cluster-mode conclaveTarget owns besides the engine.
type clusterParts struct {
	nc        *nats.Conn
	node      *cluster.Node
	followers *cluster.Followers
}

// joinCluster builds the engine config of one node on cfg.Cluster.
func joinCluster(ctx context.Context, cfg ServerConfig, ecfg *actors.Config) (*clusterParts, error) {
	nc, err := nats.Connect(cfg.Cluster, nats.Name("conclave bench fanout"))
	if err != nil {
		return nil, fmt.Errorf("fanout: cluster: %w", err)
	}
	j, err := journal.OpenJetStream(ctx, nc, journal.JetStreamOptions{})
	if err != nil {
		nc.Close()
		return nil, err
	}
	node, err := cluster.Join(ctx, nc, j, cluster.Options{Logger: cfg.Logger})
	if err != nil {
		nc.Close()
		return nil, err
	}
	p := &clusterParts{nc: nc, node: node, followers: cluster.NewFollowers(j, uuid.New, cfg.Now)}
	ecfg.Journal, ecfg.Placement, ecfg.Followers, ecfg.KeepRunsOnShutdown = j, node, p.followers, true
	return p, nil
}

// followerAfter is a follower node's Ready.After: the session's head, once
// the publishing node created it.
func followerAfter(ctx context.Context, j journal.Journal) (uint64, error) {
	key := messages.SessionID(string(messages.LocalTenant) + "/" + string(sessionID))
	for {
		h, err := j.Head(ctx, key)
		if err != nil || h > 0 {
			return h, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond): // polling the journal until node 0 made the session
		}
	}
}

func (p *clusterParts) shutdown(ctx context.Context) error {
	err := p.followers.Shutdown(ctx)
	if lerr := p.node.Shutdown(ctx); err == nil {
		err = lerr
	}
	p.nc.Close()
	return err
}
