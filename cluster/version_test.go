package cluster

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/conclave-ai/conclave/internal/natstest"
)

func TestVersionAtLeast(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"2.9.10", false}, {"2.10.22", false}, {"2.11.0", true}, {"2.11.0-RC.1", true}, {"2.15.2", true},
		{"3.0", true}, {"v2.12.1", true}, {"", false}, {"garbage", false}, {"2.x.1", false},
	} {
		if got := versionAtLeast(tc.v, MinServerVersion); got != tc.want {
			t.Errorf("versionAtLeast(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

// TestCheckServerVersion: the embedded server (current) passes; a server
// that says it is 2.9.10 (Debian's) is refused, naming both versions and
// what to do.
func TestCheckServerVersion(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, natstest.Start(t))
	if err := CheckServerVersion(nc); err != nil {
		t.Fatal(err)
	}
	old := oldServer(t, "2.9.10")
	nc, err := nats.Connect(old, nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	err = CheckServerVersion(nc)
	if err == nil || !strings.Contains(err.Error(), "version 2.9.10") || !strings.Contains(err.Error(), MinServerVersion) || !strings.Contains(err.Error(), "dev-nats") {
		t.Fatalf("a 2.9.10 server: %v", err)
	}
}

// oldServer speaks as much of the NATS protocol as a client's connect
// needs (INFO, then PONG to each PING), announcing version; it returns
// its URL.
func oldServer(t *testing.T, version string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "INFO {\"server_id\":\"old\",\"version\":%q,\"go\":\"go1.19\",\"host\":\"127.0.0.1\",\"port\":4222,\"headers\":true,\"max_payload\":1048576,\"proto\":1}\r\n", version)
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if strings.HasPrefix(line, "PING") {
				if _, err := io.WriteString(c, "PONG\r\n"); err != nil {
					return
				}
			}
		}
	}()
	return "nats://" + l.Addr().String()
}
