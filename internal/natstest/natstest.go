// Package natstest runs an embedded NATS server with JetStream for tests
// (the same server `nats-server` runs; github.com/nats-io/nats-server/v2).
package natstest

import (
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
