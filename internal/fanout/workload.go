package fanout

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/conclave-ai/conclave/messages"
)

// Workload names what produces the session's events.
type Workload string

// Workloads.
const (
	// WorkloadSynthetic is a publisher injecting stamped text events at a
	// fixed rate (Engine.Publish); latency runs from its stamp.
	WorkloadSynthetic Workload = "synthetic"
	// WorkloadCouncil is one real council run (actors.Engine with the
	// scripted model): its agents produce the events, at whatever rate
	// they do; latency runs from each envelope's timestamp.
	WorkloadCouncil Workload = "council"
)

// ParseWorkload validates s.
func ParseWorkload(s string) (Workload, error) {
	switch w := Workload(s); w {
	case WorkloadSynthetic, WorkloadCouncil:
		return w, nil
	}
	return "", fmt.Errorf("fanout: workload %q is not one of synthetic, council", s)
}

// stampOf returns how a client finds an event's send time (unix ns) in
// its envelope: the payload stamp of a synthetic event, the envelope's
// timestamp of a council's.
func (w Workload) stampOf() func([]byte) (int64, bool) {
	if w == WorkloadCouncil {
		return FindTimestamp
	}
	return FindStamp
}

// CouncilConfig shapes the council run of WorkloadCouncil. Zero Nodes,
// Waves, Tokens and Concurrency take DefaultCouncil's values; zero Subagents
// and TokenDelay mean none (the flags default to DefaultCouncil's).
type CouncilConfig struct {
	// Nodes, Waves, Tokens and Subagents are the scenario's nodes, waves,
	// tokens per worker and sub-agents per worker (messages.Scenario).
	Nodes     int `json:"nodes"`
	Waves     int `json:"waves"`
	Tokens    int `json:"tokens"`
	Subagents int `json:"subagents_per_node"`
	// Concurrency caps the nodes of one wave running at once.
	Concurrency int `json:"concurrency"`
	// TokenDelay is the scripted model's delay before each streamed token
	// (a millisecond resolution: messages.Scenario.TokenDelayMS).
	TokenDelay time.Duration `json:"token_delay_ns"`
}

// DefaultCouncil is the council of issue 19's comparison: 200 nodes × 100
// tokens, 16 nodes at once, 10 ms per token, so about 16 × 100 = 1,600
// text deltas per second while a wave runs.
func DefaultCouncil() CouncilConfig {
	return CouncilConfig{Nodes: 200, Waves: 4, Tokens: 100, Subagents: 1, Concurrency: 16, TokenDelay: 10 * time.Millisecond}
}

func (c CouncilConfig) withDefaults() CouncilConfig {
	d := DefaultCouncil()
	if c.Nodes == 0 {
		c.Nodes = d.Nodes
	}
	if c.Waves == 0 {
		c.Waves = min(d.Waves, c.Nodes)
	}
	if c.Tokens == 0 {
		c.Tokens = d.Tokens
	}
	if c.Concurrency == 0 {
		c.Concurrency = d.Concurrency
	}
	return c
}

// validate checks c (after withDefaults) as the engine will.
func (c CouncilConfig) validate() error {
	if c.Subagents < 0 || c.TokenDelay < 0 {
		return errors.New("fanout: council sub-agents and token delay must not be negative")
	}
	if c.TokenDelay%time.Millisecond != 0 {
		return fmt.Errorf("fanout: council token delay must be whole milliseconds, got %v", c.TokenDelay)
	}
	if c.Concurrency < 1 || c.Concurrency > messages.MaxConcurrency {
		return fmt.Errorf("fanout: council concurrency must be in 1..%d, got %d", messages.MaxConcurrency, c.Concurrency)
	}
	s := c.scenario()
	if err := s.Validate(); err != nil {
		return fmt.Errorf("fanout: council: %w", err)
	}
	return nil
}

// scenario is the scripted model's scenario of the run.
func (c CouncilConfig) scenario() messages.Scenario {
	return messages.Scenario{Nodes: c.Nodes, Waves: c.Waves, Tokens: c.Tokens, SubagentsPerNode: c.Subagents,
		TokenDelayMS: int(c.TokenDelay / time.Millisecond)}.WithDefaults()
}

// startRun is the command that starts the run in the benchmark's session.
func (c CouncilConfig) startRun() messages.StartRun {
	s := c.scenario()
	return messages.StartRun{SessionID: sessionID, Question: "fan-out benchmark: council workload", Scenario: &s,
		Concurrency: c.Concurrency}
}

// bindFlags defines c's fields as flags on fs, prefixed "council-"
// (ServerConfig.BindFlags); args produces the matching command line.
func (c *CouncilConfig) bindFlags(fs *pflag.FlagSet) {
	d := DefaultCouncil()
	fs.IntVar(&c.Nodes, "council-nodes", d.Nodes, "council: worker nodes")
	fs.IntVar(&c.Waves, "council-waves", d.Waves, "council: waves the nodes are spread over")
	fs.IntVar(&c.Tokens, "council-tokens", d.Tokens, "council: tokens each worker streams")
	fs.IntVar(&c.Subagents, "council-subagents", d.Subagents, "council: sub-agents each worker delegates to")
	fs.IntVar(&c.Concurrency, "council-concurrency", d.Concurrency, "council: nodes of a wave running at once")
	fs.DurationVar(&c.TokenDelay, "council-token-delay", d.TokenDelay, "council: delay before each streamed token (whole ms)")
}

func (c CouncilConfig) args() []string {
	return []string{
		"--council-nodes", strconv.Itoa(c.Nodes),
		"--council-waves", strconv.Itoa(c.Waves),
		"--council-tokens", strconv.Itoa(c.Tokens),
		"--council-subagents", strconv.Itoa(c.Subagents),
		"--council-concurrency", strconv.Itoa(c.Concurrency),
		"--council-token-delay", c.TokenDelay.String(),
	}
}
