package actors_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/runstate"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// TestFold_JournalEqualsLiveState is the reducer's property test. Seeded
// runs with random council features (teams, debates, sub-team spawns,
// steering, sub-agents, async delegation, the advisor, panics, failures)
// are cut at a random event by a restart, recovered and finished. Then:
//
//   - folding the session's journal from scratch through runstate gives
//     exactly the graph each live supervisor (the run's, each team's) had
//     at every event that changes its graph's shape or progress as a
//     whole: plan_approved, run_rewound, team_started, wave_started,
//     wave_completed, subteam_spawned, steering_applied and the terminal
//     event. After the cut, exactly; before it, for the events the
//     journal got (a supervisor may have applied a few more that the
//     freeze dropped: they are lost, as in a crash, and decided again);
//   - the whole stream, across the restart, passes testkit.Check.
//
// Not parallel: it sets the supervisors' apply hook.
func TestFold_JournalEqualsLiveState(t *testing.T) {
	var mu sync.Mutex
	gen := 0                         // the engine: 0 before the cut, 1 after
	live := [2]map[string][]string{} // by engine: run + graph lane → graph views at checkpoints
	live[0], live[1] = map[string][]string{}, map[string][]string{}
	defer actors.SetApplyHook(func(run messages.RunID, graph messages.StreamID, p messages.Payload, g *runstate.Graph) {
		if !checkpoint(p.EventType()) {
			return
		}
		v := graphView(g)
		mu.Lock()
		defer mu.Unlock()
		k := string(run) + " " + string(graph)
		live[gen][k] = append(live[gen][k], string(p.EventType())+" "+v)
	})()

	seeds := 24
	if testing.Short() {
		seeds = 6
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		rng := rand.New(rand.NewSource(seed))
		sc, adv := randomScenario(rng, seed)
		cut := 5 + rng.Intn(400)
		name := fmt.Sprintf("seed%d", seed)
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			live[0], live[1], gen = map[string][]string{}, map[string][]string{}, 0
			mu.Unlock()
			r := newRestartable(t)
			ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
			defer cancel()
			session := messages.SessionID("fold-" + name)
			ref, err := r.e.StartRun(ctx, messages.StartRun{Question: "q", SessionID: session, Scenario: &sc, Advisor: adv, Concurrency: 1 + rng.Intn(3)})
			if err != nil {
				t.Fatal(err)
			}
			p, err := testkit.NewProbe(ctx, r.e, "", session, 0)
			if err != nil {
				t.Fatal(err)
			}
			seen, ended := 0, false
			if _, err := p.Until(ctx, func(env *messages.Envelope) bool {
				seen++
				ended = env.RunID == ref.RunID && env.Type.Terminal()
				return ended || seen == cut
			}); err != nil {
				t.Fatal(err)
			}
			p.Close()
			cutSeq := uint64(1 << 62)
			if !ended {
				// The cut: the engine freezes; what it had not journaled is lost.
				if err := r.e.Shutdown(ctx); err != nil {
					t.Fatal(err)
				}
				before := r.all(session)
				cutSeq = before[len(before)-1].Seq
				mu.Lock()
				gen = 1
				mu.Unlock()
				r.start()
				p, err = testkit.NewProbe(ctx, r.e, "", session, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := p.Until(ctx, testkit.TerminalOf(ref.RunID)); err != nil {
					t.Fatal(err)
				}
				p.Close()
			}
			if err := r.e.Shutdown(ctx); err != nil { // every supervisor has applied its last event
				t.Fatal(err)
			}
			events := r.all(session)
			testkit.AssertInvariants(t, events)

			folded := [2]map[string][]string{{}, {}}
			st := runstate.New(ref.RunID)
			for _, env := range events {
				st.Apply(env)
				if !checkpoint(env.Type) {
					continue
				}
				graph := env.Lane.StreamID
				if env.Type == messages.SteeringApplied { // on the note's lane; it changes the run's graph
					graph = messages.RunStream
				}
				k, g := string(env.RunID)+" "+string(graph), 0
				if env.Seq > cutSeq {
					g = 1
				}
				folded[g][k] = append(folded[g][k], string(env.Type)+" "+graphView(st.GraphOf(graph)))
			}
			mu.Lock()
			defer mu.Unlock()
			for g := range 2 {
				for k, want := range folded[g] {
					got := live[g][k]
					if g == 0 && len(got) > len(want) {
						got = got[:len(want)] // applied, then dropped by the freeze
					}
					if i := firstDiff(got, want); i >= 0 {
						t.Fatalf("scenario %+v cut at %d: graph %s differs at checkpoint %d of %d (engine %d):\nlive:   %s\nfolded: %s",
							sc, cut, k, i, len(want), g, at(got, i), at(want, i))
					}
				}
				for k := range live[g] {
					if strings.HasPrefix(k, string(ref.RunID)+" ") && folded[g][k] == nil && g == 1 {
						t.Fatalf("graph %s: live checkpoints %v, none journaled", k, live[g][k])
					}
				}
			}
			t.Logf("cut at event %d (restarted: %v); checkpoints compared: %d before, %d after", cut, !ended, count(folded[0]), count(folded[1]))
			if len(folded[0])+len(folded[1]) == 0 {
				t.Fatal("no checkpoint in the journal")
			}
		})
	}
}

// randomScenario draws a council run with a random mix of features.
func randomScenario(rng *rand.Rand, seed int64) (messages.Scenario, *messages.AdvisorOptions) {
	sc := messages.Scenario{Nodes: 2 + rng.Intn(5), Tokens: 4 + rng.Intn(12), TokenDelayMS: rng.Intn(2), Seed: seed}
	sc.Waves = 1 + rng.Intn(min(3, sc.Nodes))
	special := 0
	if rng.Intn(3) == 0 {
		sc.Teams, sc.TeamSize = 1, 2+rng.Intn(2)
		special++
	}
	if rng.Intn(3) == 0 && special < sc.Nodes {
		sc.Debate = &messages.DebateScenario{Agents: 2, Rounds: 1 + rng.Intn(3), Judge: rng.Intn(2) == 0}
		sc.Debate.PanicRound = rng.Intn(sc.Debate.Rounds + 1) // 0: no round restarts
	}
	if rng.Intn(3) == 0 {
		sc.Spawn = messages.NodeSelector{Fraction: 0.5}
	}
	if rng.Intn(3) == 0 {
		sc.PanicNodes = messages.NodeSelector{Fraction: 0.3}
	}
	if rng.Intn(6) == 0 {
		sc.FailNodes = messages.NodeSelector{IDs: []string{fmt.Sprintf("n%03d", 1+rng.Intn(sc.Nodes))}}
	}
	if rng.Intn(3) == 0 {
		sc.SubagentsPerNode = 1
	}
	if rng.Intn(4) == 0 {
		sc.Delegations = &messages.DelegationScenario{Async: 1}
	}
	if rng.Intn(3) == 0 {
		sc.Steering = []messages.SteeringScript{{AtWave: 0, Note: "add a risk review"}}
	}
	var adv *messages.AdvisorOptions
	if rng.Intn(4) == 0 {
		sc.Advisor = &messages.AdvisorScenario{Redirects: 1}
		adv = &messages.AdvisorOptions{}
	}
	return sc, adv
}

// checkpoint reports whether a supervisor's graph is settled right after
// an event of type t: no agent of the graph is between its start and its
// closing event, so the live state and the fold agree exactly.
func checkpoint(t messages.EventType) bool {
	switch t {
	case messages.PlanApproved, messages.RunRewound, messages.TeamStarted, messages.WaveStarted, messages.WaveCompleted,
		messages.SubteamSpawned, messages.SteeringApplied, messages.RunFinished, messages.RunError:
		return true
	}
	return false
}

// graphView is what the property compares of a graph: its plan and
// waves, where it is, and every plan node's state, output, citations and
// pending spawn request.
func graphView(g *runstate.Graph) string {
	if g == nil {
		return "<no plan>"
	}
	type node struct {
		State  runstate.NodeState
		Output string
		Cites  []messages.Citation
		Spawn  *messages.SpawnRequest
	}
	v := struct {
		Plan     messages.Plan
		Waves    [][]string
		Wave     int
		WaveDone bool
		Nodes    map[string]node
		Answer   *string
	}{g.Plan, g.Waves, g.Wave, g.WaveDone, map[string]node{}, g.Synthesis.Answer}
	for _, n := range g.Plan.Nodes {
		if x := g.Nodes[n.ID]; x != nil {
			v.Nodes[n.ID] = node{x.State, x.Output, x.Cites, x.Spawn}
		} else {
			v.Nodes[n.ID] = node{}
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func firstDiff(got, want []string) int {
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			return i
		}
	}
	return -1
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "<none>"
}

func count(m map[string][]string) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}
