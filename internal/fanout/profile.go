package fanout

import (
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
)

// cpuProfile is the server's own CPU profile (ServerConfig.CPUProfile):
// started once, by the first start with a path, and stopped once.
type cpuProfile struct {
	mu      sync.Mutex // guards f and done
	f       *os.File
	done    bool
	started bool
}

// start begins profiling into path; a no-op when path is empty or a
// profile was started before.
func (p *cpuProfile) start(path string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if path == "" || p.started {
		return nil
	}
	p.started = true
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("fanout: server CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("fanout: server CPU profile: %w", err)
	}
	p.f = f
	return nil
}

// stop ends the profile and closes its file. Idempotent.
func (p *cpuProfile) stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f == nil || p.done {
		return nil
	}
	p.done = true
	pprof.StopCPUProfile()
	return p.f.Close()
}
