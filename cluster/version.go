package cluster

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// MinServerVersion is the oldest nats-server a cluster runs on: the
// owners bucket needs JetStream's limit marker TTLs (nats-server 2.11).
// Debian's nats-server 2.9 is older.
const MinServerVersion = "2.11.0"

// CheckServerVersion refuses a connection to a nats-server older than
// MinServerVersion, naming both versions (before anything is created on
// it, where the old server's error would be "limit marker TTLs not
// supported by server").
func CheckServerVersion(nc *nats.Conn) error {
	v := nc.ConnectedServerVersion()
	if !versionAtLeast(v, MinServerVersion) {
		return fmt.Errorf("cluster: the NATS server at %s is version %s; conclave needs nats-server %s or later (JetStream limit marker TTLs). "+
			"Debian's nats-server is too old: run a current one, or `conclave dev-nats` for one on this machine (docs/cluster.md)", nc.ConnectedUrlRedacted(), v, MinServerVersion)
	}
	return nil
}

// versionAtLeast compares dotted versions (a pre-release or build suffix
// is ignored); an unparsable version is not at least anything.
func versionAtLeast(v, min string) bool {
	a, ok1 := parseVersion(v)
	b, ok2 := parseVersion(min)
	if !ok1 || !ok2 {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return true
}

func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}
