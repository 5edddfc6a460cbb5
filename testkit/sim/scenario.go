package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// Scenario is everything a simulation does besides the choices of its
// driver: the runs it starts and when, its clients, and the faults it
// injects at given steps. Generate draws one from a seed; Shrink makes a
// failing one smaller. The driver's own choices (which gate goes on, which
// client acts, how the clock moves) come from Seed.
type Scenario struct {
	Seed uint64    `json:"seed"`
	Runs []RunPlan `json:"runs"`
	// Clients follow the session (some from its start, some from a
	// cursor), disconnect, resume and read slowly, at the driver's choice.
	Clients int `json:"clients"`
	// HTTPClients of the Clients (the first ones) go through the real
	// transport handlers over an in-memory connection instead of
	// subscribing on the engine: SSE, or WebSocket for the first
	// WSClients of them. They resume with Last-Event-ID or ?after=, and
	// see the server's crashes as their streams end.
	HTTPClients int `json:"http_clients,omitempty"`
	WSClients   int `json:"ws_clients,omitempty"`
	// Crashes are the steps at which the server is killed (kill -9: what
	// was not fsynced may be lost, part of it kept) and restarted on what
	// its disk kept.
	Crashes []int `json:"crashes,omitempty"`
	// DamageWAL makes the first crash also cut the newest write-ahead log
	// in the middle, losing acknowledged events: the restart must report
	// the damage; the driver then repairs the journal as an operator would
	// (--repair) and goes on. The events lost are those of the log record
	// cut, so for the same seed to lose the same events the journal's
	// batches must be the same: a simulation with DamageWAL gates every
	// chunk (Model.GateRate 1), so that no model stream runs alongside the
	// hub and batches its events differently from one run to the next.
	DamageWAL bool `json:"damage_wal,omitempty"`
	// DamageHWM adds a second fault to DamageWAL's crash (issue 27's
	// double faults): HWMFlipped stops the server gracefully instead, then
	// flips a bit in the journal's high-water mark log (its snapshot) and
	// deletes every write-ahead log; HWMDeleted deletes the high-water mark
	// log besides cutting the write-ahead log. The restart must refuse,
	// and the repair must not hand out a seq acknowledged before.
	DamageHWM HWMDamage `json:"damage_hwm,omitempty"`
	// DiskFaults are the steps at which the disk fails, as on a failed
	// fsync: the next append fails (its batch written or not, drawn from
	// the seed), every later one fails too, and the server is restarted at
	// the next step.
	DiskFaults []int `json:"disk_faults,omitempty"`
	// CommitCrashes are the steps at which the machine loses power inside
	// a group commit: the next write-ahead log fsync is held, and the
	// crash comes while it is, so the disk keeps only what was synced
	// before that group. Nothing of the group was acknowledged, so nothing
	// a client got may be lost.
	CommitCrashes []int `json:"commit_crashes,omitempty"`
	// Aborts are the steps at which a live run is aborted, while a gate
	// goes on: the abort and what the gate set off are both queued before
	// either is handled.
	Aborts []int `json:"aborts,omitempty"`
	// Steers are the steps at which a live run gets a steering note.
	Steers []int `json:"steers,omitempty"`
	// Rewinds are the steps at which an ended run is rewound.
	Rewinds []int `json:"rewinds,omitempty"`
	// Stalls are the steps at which the actors are held while a model
	// stream runs freely: the journal falls behind the model, and
	// backpressure must hold the stream.
	Stalls []int `json:"stalls,omitempty"`
	// Retention keeps at most this many events per session, applied every
	// few steps (0: no retention).
	Retention int `json:"retention,omitempty"`
	// Nodes, when above 1, simulates a cluster of that many nodes on one
	// shared journal with JetStream's fencing (cluster.go): a crash then
	// kills the node that owns the session, and another takes it over.
	// The durable journal's faults (DamageWAL, DiskFaults, CommitCrashes)
	// do not apply.
	Nodes int `json:"nodes,omitempty"`
	// Pauses are the steps at which, in cluster mode, the owner pauses
	// (its actors held while one of its streams goes on), loses the
	// session to another node, and resumes as a stale owner whose appends
	// must be refused.
	Pauses []int       `json:"pauses,omitempty"`
	Model  ModelFaults `json:"model"`
	Tool   ToolFaults  `json:"tool"`
}

// HWMDamage is a fault of the journal's high-water mark log.
type HWMDamage string

const (
	HWMFlipped HWMDamage = "flipped"
	HWMDeleted HWMDamage = "deleted"
)

// RunPlan is one run the simulation starts, at step At.
type RunPlan struct {
	At    int               `json:"at"`
	Start messages.StartRun `json:"start"`
}

// Size bounds what Generate draws.
type Size struct {
	Runs     int // at most this many runs (at least 1)
	Nodes    int // at most this many nodes per run
	Tokens   int // at most this many tokens per node
	Clients  int
	Crashes  int // at most this many crashes
	Horizon  int // the steps over which faults and actions are spread
	Features bool
	// NoHTTP: every client subscribes on the engine (none goes through
	// the transport server), as before the HTTP clients.
	NoHTTP bool
	// Cluster simulates clusters of 2 or 3 nodes (Scenario.Nodes) with
	// one or two stale owners (Scenario.Pauses) besides the crashes.
	Cluster bool
}

// SmallSize is what CI runs: councils of a few nodes with every feature.
var SmallSize = Size{Runs: 3, Nodes: 6, Tokens: 12, Clients: 3, Crashes: 2, Horizon: 400, Features: true}

// Generate draws a scenario from seed.
func Generate(seed uint64, size Size) Scenario {
	rng := rand.New(rand.NewPCG(seed, 0x5ca1ab1e))
	sc := Scenario{Seed: seed, Clients: rng.IntN(size.Clients + 1)}
	runs := 1 + rng.IntN(max(size.Runs, 1))
	for i := range runs {
		at := 1
		if i > 0 {
			at = 1 + rng.IntN(size.Horizon/2)
		}
		sc.Runs = append(sc.Runs, RunPlan{At: at, Start: randomRun(rng, size, int64(seed)+int64(i))})
	}
	steps := func(n int) []int {
		var out []int
		for range n {
			out = append(out, 2+rng.IntN(size.Horizon))
		}
		return out
	}
	sc.Crashes = steps(rng.IntN(size.Crashes + 1))
	// Which clients go over HTTP draws from a generator of its own: the
	// draws of every seed's scenario stay what they were.
	web := rand.New(rand.NewPCG(seed, 0x5e5e))
	if sc.Clients > 0 && !size.NoHTTP {
		sc.HTTPClients = web.IntN(sc.Clients + 1)
		sc.WSClients = web.IntN(sc.HTTPClients + 1)
	}
	if !size.Features {
		return sc
	}
	sc.DamageWAL = len(sc.Crashes) > 0 && rng.IntN(8) == 0
	sc.DiskFaults = steps(b2i(rng.IntN(8) == 0))
	sc.Aborts = steps(rng.IntN(2) * (1 + rng.IntN(3)))
	sc.Steers = steps(rng.IntN(2))
	sc.Rewinds = steps(b2i(rng.IntN(4) == 0))
	sc.Stalls = steps(rng.IntN(2) * (1 + rng.IntN(3)))
	if rng.IntN(4) == 0 {
		sc.Retention = 20 + rng.IntN(200)
	}
	sc.Model = ModelFaults{GateRate: []float64{0, 0.1, 0.5, 1}[rng.IntN(4)]}
	if sc.DamageWAL {
		sc.Model.GateRate = 1
		// From the seed, not rng: the draws of every other scenario stay
		// what they were.
		sc.DamageHWM = []HWMDamage{"", HWMFlipped, HWMDeleted}[seed%3]
	}
	if rng.IntN(4) == 0 {
		sc.Model.ErrorRate = 0.002
	}
	if rng.IntN(4) == 0 {
		sc.Model.TransientRate = 0.01
	}
	if rng.IntN(3) == 0 {
		sc.Tool = ToolFaults{ErrorRate: 0.1, SlowRate: 0.3, Slow: 2 * time.Second, HangRate: 0.1 * float64(rng.IntN(2))}
	}
	// Faults added later draw from a generator of their own: the draws
	// above, and so every earlier seed's scenario, stay what they were.
	later := rand.New(rand.NewPCG(seed, 0xc0ffee))
	if later.IntN(4) == 0 {
		sc.CommitCrashes = []int{2 + later.IntN(size.Horizon/2)}
	}
	if size.Cluster {
		clusterize(&sc, seed, size)
	}
	return sc
}

// clusterize makes sc a cluster's, from a generator of its own (the draws
// above stay what they are): 2 or 3 nodes, one or two pauses and at least
// one crash in the first half of the horizon (while runs are live), and
// none of the durable journal's faults.
func clusterize(sc *Scenario, seed uint64, size Size) {
	rng := rand.New(rand.NewPCG(seed, 0xc1a5))
	sc.Nodes = 2 + rng.IntN(2)
	early := func() int { return 2 + rng.IntN(max(size.Horizon/2, 1)) }
	for range 1 + rng.IntN(2) {
		sc.Pauses = append(sc.Pauses, early())
	}
	if len(sc.Crashes) == 0 {
		sc.Crashes = []int{early()}
	}
	sc.DamageWAL, sc.DamageHWM, sc.DiskFaults, sc.CommitCrashes = false, "", nil, nil
}

// cluster reports whether sc simulates a cluster.
func (sc Scenario) cluster() bool { return sc.Nodes > 1 }

// httpClients is how many clients go over HTTP (HTTPClients, at most
// Clients: Shrink drops clients from the end).
func (sc Scenario) httpClients() int { return min(max(sc.HTTPClients, 0), sc.Clients) }

// clientKind is how client i reaches the session.
func (sc Scenario) clientKind(i int) clientKind {
	switch {
	case i >= sc.httpClients():
		return direct
	case i < min(sc.WSClients, sc.httpClients()):
		return ws
	}
	return sse
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// randomRun draws one council run with a random mix of features.
func randomRun(rng *rand.Rand, size Size, seed int64) messages.StartRun {
	sc := messages.Scenario{Nodes: 1 + rng.IntN(size.Nodes), Tokens: 1 + rng.IntN(size.Tokens), Seed: seed}
	sc.Waves = 1 + rng.IntN(min(3, sc.Nodes))
	sc.ReasoningTokens = rng.IntN(3)
	st := messages.StartRun{Question: fmt.Sprintf("simulated question %d", seed), Scenario: &sc, Concurrency: 1 + rng.IntN(4)}
	if !size.Features {
		return st
	}
	sc.ToolsPerNode = rng.IntN(3)
	if rng.IntN(5) == 0 {
		sc.SynthesisTokens = 1500 // a long answer: more than the outbox window in one stream
	}
	special := 0
	if rng.IntN(4) == 0 && sc.Nodes > 1 {
		sc.Teams, sc.TeamSize = 1, 2+rng.IntN(2)
		special++
	}
	if rng.IntN(4) == 0 && special < sc.Nodes {
		sc.Debate = &messages.DebateScenario{Agents: 2, Rounds: 1 + rng.IntN(3), Judge: rng.IntN(2) == 0}
		sc.Debate.PanicRound = rng.IntN(sc.Debate.Rounds + 1)
	}
	if rng.IntN(4) == 0 {
		sc.Spawn = messages.NodeSelector{Fraction: 0.5}
	}
	if rng.IntN(4) == 0 {
		sc.PanicNodes = messages.NodeSelector{Fraction: 0.3}
	}
	if rng.IntN(6) == 0 {
		sc.FailNodes = messages.NodeSelector{IDs: []string{fmt.Sprintf("n%03d", 1+rng.IntN(sc.Nodes))}}
	}
	if rng.IntN(6) == 0 {
		sc.TransientNodes = messages.NodeSelector{Fraction: 0.3}
	}
	if rng.IntN(3) == 0 {
		sc.SubagentsPerNode = 1
	}
	if rng.IntN(5) == 0 {
		sc.Delegations = &messages.DelegationScenario{Async: 1}
	}
	if rng.IntN(4) == 0 {
		sc.Steering = []messages.SteeringScript{{AtWave: 0, Note: "add a risk review"}}
	}
	if rng.IntN(5) == 0 {
		sc.Advisor = &messages.AdvisorScenario{Redirects: 1}
		st.Advisor = &messages.AdvisorOptions{}
	}
	switch rng.IntN(6) {
	case 0:
		st.HITL = messages.HITLPlan
	case 1:
		st.HITL = messages.HITLNode
	case 2:
		st.HITL = messages.HITLTools
		sc.Approvals, sc.InfoRequests = rng.IntN(3), rng.IntN(2)
	}
	return st
}

// BigCouncil is one council of the given number of nodes (in 10 waves, 2
// tokens a node, 64 at a time), followed by one client, without faults:
// what the simulator's speed is measured on.
func BigCouncil(seed uint64, nodes int) Scenario {
	return Scenario{Seed: seed, Clients: 1, Runs: []RunPlan{{At: 1, Start: messages.StartRun{
		Question: "a big council", Concurrency: 64,
		Scenario: &messages.Scenario{Nodes: nodes, Waves: min(10, nodes), Tokens: 2, Seed: int64(seed)},
	}}}}
}
