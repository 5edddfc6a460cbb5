// Package natstest runs an embedded NATS server with JetStream for tests
// (the same server `nats-server` runs; github.com/nats-io/nats-server/v2).
package natstest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Start runs a JetStream server on a free loopback port, storing in a
// temporary directory, until the test ends.
func Start(t testing.TB) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server: not ready in 10 s")
	}
	return s
}

// Connect connects to s until the test ends.
func Connect(t testing.TB, s *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.Name(t.Name()))
	if err != nil {
		t.Fatalf("nats connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// StartCluster runs n JetStream servers routed into one cluster, each
// storing in a temporary directory, until the test ends; it returns once
// JetStream has a meta leader. Shut one down to lose a member.
func StartCluster(t testing.TB, n int) []*server.Server {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	servers := make([]*server.Server, n)
	for i := range n {
		s, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("js%d", i+1), Host: "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "conclave-test", Host: "127.0.0.1", Port: ports[i]},
			Routes:  routes,
		})
		if err != nil {
			t.Fatalf("nats server %d: %v", i+1, err)
		}
		s.Start()
		servers[i] = s
		t.Cleanup(func() {
			s.Shutdown()
			s.WaitForShutdown()
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range servers {
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats cluster: a server is not ready in 10 s")
		}
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		leader, current := false, true
		for _, s := range servers {
			leader = leader || s.JetStreamIsLeader()
			current = current && s.JetStreamIsCurrent()
		}
		if leader && current {
			return servers
		}
		if time.Now().After(deadline) {
			t.Fatal("nats cluster: no JetStream meta leader in 30 s")
		}
		<-tick.C
	}
}

// URLs are the client URLs of servers, comma-separated (nats.Connect's form).
func URLs(servers []*server.Server) string {
	var out []string
	for _, s := range servers {
		out = append(out, s.ClientURL())
	}
	return strings.Join(out, ",")
}
