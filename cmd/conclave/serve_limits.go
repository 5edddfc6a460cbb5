package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/conclave-ai/conclave/transport"
)

// serveLimits are the flags of conclave serve that bound connections and
// streams (transport.Config documents each; docs/api.md "Limits").
type serveLimits struct {
	maxConns, maxStreams, maxStreamsPerTenant int
	idleTimeout, readTimeout                  time.Duration
	maxLagEvents, maxLagBytes                 uint64
}

func (l *serveLimits) flags(fs *pflag.FlagSet) {
	fs.IntVar(&l.maxConns, "max-connections", 0, "cap on open client connections; at the cap the oldest idle or header-reading one is closed, else 503 (0: 3/4 of the open-files limit; -1: no cap)")
	fs.IntVar(&l.maxStreams, "max-streams", 0, "cap on open event streams in total, over it 429 too_many_streams (0: 3/4 of --max-connections; -1: no cap)")
	fs.IntVar(&l.maxStreamsPerTenant, "max-streams-per-tenant", 0, "cap on one tenant's open event streams (0: only --max-streams)")
	fs.DurationVar(&l.idleTimeout, "idle-timeout", transport.DefaultIdleTimeout, "close a keep-alive connection idle this long")
	fs.DurationVar(&l.readTimeout, "read-timeout", transport.DefaultReadTimeout, "bound on reading a request's headers and body (streams are exempt once open)")
	fs.Uint64Var(&l.maxLagEvents, "max-lag-events", 0, "end a stream whose client has this many events not received, with close reason lagging (0: never)")
	fs.Uint64Var(&l.maxLagBytes, "max-lag-bytes", 0, "end a stream whose client has this many bytes written and not received, with close reason lagging (0: never)")
}

func (l *serveLimits) check() error {
	switch {
	case l.idleTimeout != 0 && l.idleTimeout < 100*time.Millisecond: // 0: the default (a serveCmd built without flags)
		return fmt.Errorf("--idle-timeout must be at least 100ms, got %v", l.idleTimeout)
	case l.readTimeout != 0 && l.readTimeout < 100*time.Millisecond:
		return fmt.Errorf("--read-timeout must be at least 100ms, got %v", l.readTimeout)
	case l.maxConns < -1 || l.maxStreams < -1 || l.maxStreamsPerTenant < 0:
		return fmt.Errorf("--max-connections and --max-streams must be >= -1, --max-streams-per-tenant >= 0")
	}
	return nil
}

// apply sets the limits on cfg.
func (l *serveLimits) apply(cfg *transport.Config) {
	cfg.MaxConnections, cfg.MaxStreams, cfg.MaxStreamsPerTenant = l.maxConns, l.maxStreams, l.maxStreamsPerTenant
	cfg.IdleTimeout, cfg.ReadTimeout = l.idleTimeout, l.readTimeout
	cfg.MaxLagEvents, cfg.MaxLagBytes = l.maxLagEvents, l.maxLagBytes
	// The header timeout stays below the read timeout it is part of.
	if l.readTimeout != 0 {
		cfg.ReadHeaderTimeout = min(transport.DefaultReadHeaderTimeout, l.readTimeout)
	}
}
