package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/conclave-ai/conclave/cluster"
	"github.com/conclave-ai/conclave/internal/retry"
	"github.com/conclave-ai/conclave/journal"
)

// clusterFlags are serve's cluster mode (docs/cluster.md): --cluster
// names the NATS JetStream servers that hold the shared journal and the
// membership.
type clusterFlags struct {
	urls      string
	advertise string
	nodeID    string
	lease     time.Duration
	replicas  int
	prefix    string
	// tailBytes is how much of each followed session's latest events the
	// node keeps in memory (cluster.FollowersOptions.TailBytes).
	tailBytes int
	// startTimeout bounds the start: connecting, and creating the stream
	// and buckets, retried with backoff while JetStream is not ready.
	startTimeout time.Duration
}

func (f *clusterFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.urls, "cluster", "", "run as one node of a cluster: the NATS JetStream `urls` (comma-separated) of the shared journal and membership; --data keeps only the audit log and the server key (docs/cluster.md)")
	fs.StringVar(&f.nodeID, "node-id", "", "this node's id in the cluster (default: a new UUID each start)")
	fs.DurationVar(&f.lease, "cluster-lease", 10*time.Second, "how long a node that stopped renewing its membership stays a member; its sessions move within 1.5 leases")
	fs.IntVar(&f.replicas, "cluster-replicas", 1, "JetStream replicas of the journal and the buckets (3 on a 3-server JetStream cluster)")
	fs.StringVar(&f.advertise, "cluster-advertise", "", "the base `url` at which the other nodes reach this node's API, for AG-UI and A2A requests they proxy here (default: http:// and the listen address, with this host's name when it listens on every interface)")
	fs.DurationVar(&f.startTimeout, "cluster-start-timeout", 60*time.Second, "how long a starting node waits for NATS JetStream (connecting, creating the stream and buckets, joining), retrying with backoff, before it gives up: servers starting or restarting, a leader being elected, several nodes starting at once")
	fs.IntVar(&f.tailBytes, "cluster-tail-bytes", cluster.DefaultTailBytes, "how many `bytes` of each followed session's latest events a node keeps in memory, for clients that fell behind to catch up from; beyond them they read JetStream")
	fs.StringVar(&f.prefix, "cluster-prefix", "conclave", "prefix of the cluster's subjects, stream and buckets (clusters sharing one JetStream need different prefixes)")
}

func (f *clusterFlags) enabled() bool { return f.urls != "" }

// clusterMember is this node's part of the cluster.
type clusterMember struct {
	nc        *nats.Conn
	journal   *journal.JetStream
	node      *cluster.Node
	followers *cluster.Followers
	forwarder *cluster.Forwarder
}

// join connects to JetStream, opens the shared journal and joins.
func (f *clusterFlags) join(ctx context.Context, logger *slog.Logger) (*clusterMember, error) {
	if f.lease < time.Second {
		return nil, usageError(fmt.Errorf("--cluster-lease must be at least 1s, got %v", f.lease))
	}
	if f.tailBytes <= 0 {
		return nil, usageError(fmt.Errorf("--cluster-tail-bytes must be positive, got %d", f.tailBytes))
	}
	id := f.nodeID
	if id == "" {
		id = uuid.NewString()
	}
	// One deadline for the whole start: a coordinated rollout starts its
	// nodes together, and servers that just restarted answer only once
	// JetStream has its leaders.
	until := time.Now().Add(f.startTimeout)
	var nc *nats.Conn
	err := retry.Until(ctx, until, logger, "the NATS servers "+f.urls, func(context.Context) error {
		var err error
		nc, err = nats.Connect(f.urls, nats.Name("conclave "+id), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
			nats.Timeout(5*time.Second), nats.RetryOnFailedConnect(false),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { logger.Warn("cluster: disconnected from NATS", "err", err) }),
			nats.ReconnectHandler(func(nc *nats.Conn) { logger.Info("cluster: reconnected to NATS", "url", nc.ConnectedUrl()) }))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("--cluster %s: %w", f.urls, err)
	}
	if err := cluster.CheckServerVersion(nc); err != nil {
		nc.Close()
		return nil, err
	}
	upper := upperPrefix(f.prefix)
	j, err := journal.OpenJetStream(ctx, nc, journal.JetStreamOptions{Stream: upper, Prefix: f.prefix, Replicas: f.replicas,
		StartTimeout: time.Until(until), Logger: logger})
	if err != nil {
		nc.Close()
		return nil, err
	}
	node, err := cluster.Join(ctx, nc, j, cluster.Options{NodeID: id, Lease: f.lease, Prefix: upper, Replicas: f.replicas, Logger: logger,
		StartTimeout: time.Until(until)})
	if err != nil {
		nc.Close()
		return nil, err
	}
	logger.Info("cluster: joined", "node", id, "nats", nc.ConnectedUrl(), "lease", f.lease, "replicas", f.replicas)
	return &clusterMember{
		nc: nc, journal: j, node: node,
		followers: cluster.NewFollowersWith(j, cluster.FollowersOptions{NewID: uuid.New, Now: time.Now, TailBytes: f.tailBytes}),
		forwarder: cluster.NewForwarder(nc, node, cluster.ForwardOptions{Prefix: f.prefix, Logger: logger}),
	}, nil
}

// publishURL tells the other nodes where this node's API listens.
func (m *clusterMember) publishURL(ctx context.Context, advertise string, l net.Addr) error {
	u := advertise
	if u == "" {
		host, port, err := net.SplitHostPort(l.String())
		if err != nil {
			return err
		}
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			if host, err = os.Hostname(); err != nil {
				return fmt.Errorf("--cluster-advertise: this host's name: %w", err)
			}
		}
		u = "http://" + net.JoinHostPort(host, port)
	}
	var err error
	for range 5 { // a renewal may update the key at the same moment
		if err = m.node.SetURL(ctx, u); err == nil {
			return nil
		}
	}
	return err
}

// upperPrefix is the stream and bucket name of a subject prefix
// ("conclave" → "CONCLAVE"; dots and dashes become underscores).
func upperPrefix(p string) string {
	b := []byte(p)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c == '.' || c == '-':
			b[i] = '_'
		}
	}
	return string(b)
}

// lost is closed when the node lost its membership (nil member: never).
func (m *clusterMember) lost() <-chan struct{} {
	if m == nil {
		return nil
	}
	return m.node.Lost()
}

// close leaves the cluster and closes the connection.
func (m *clusterMember) close(logger *slog.Logger, err *error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if lerr := m.node.Shutdown(ctx); lerr != nil && !errors.Is(lerr, nats.ErrConnectionClosed) {
		logger.Error("cluster: leave", "err", lerr)
		if *err == nil {
			*err = failure(fmt.Errorf("leave the cluster: %w", lerr))
		}
	}
	m.nc.Close()
}
