package sim_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/testkit/sim"
	"github.com/conclave-ai/conclave/tool"
)

// forecaster is a program's own model: the director plans one node, whose
// worker calls the weather tool and answers from its result. With careless
// set it has the bug the simulation must find: a failed tool call makes the
// worker give up with a model error, so the node fails and so does the run.
type forecaster struct{ careless bool }

func (forecaster) Name() string { return "forecaster" }

func (f forecaster) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	var out []model.Chunk
	switch req.Role {
	case model.RoleDirector:
		out = []model.Chunk{&model.Text{Text: `{"nodes": [{"id": "forecast", "goal": "Say what to wear"}]}`}}
	case model.RoleWorker:
		switch {
		case len(req.ToolResults) == 0:
			out = []model.Chunk{&model.Call{Call: model.ToolCall{ID: "c1", Name: "weather", Args: []byte(`{"city":"Paris"}`)}}}
		case req.ToolResults[0].IsError && f.careless:
			return nil, fmt.Errorf("%w: forecaster: no weather, no forecast", model.ErrModel)
		case req.ToolResults[0].IsError:
			out = []model.Chunk{&model.Text{Text: "Bring a coat, just in case."}}
		default:
			out = []model.Chunk{&model.Text{Text: "Wear what suits " + req.ToolResults[0].Content + "."}}
		}
	case model.RoleSynthesizer:
		out = []model.Chunk{&model.Text{Text: strings.Join(req.Context, " ")}}
	default:
		return nil, fmt.Errorf("%w: no %s turns", model.ErrModel, req.Role)
	}
	return &list{ctx: ctx, next: out}, nil
}

type list struct {
	ctx  context.Context
	next []model.Chunk
}

func (l *list) Recv() (model.Chunk, error) {
	if err := l.ctx.Err(); err != nil {
		return nil, err
	}
	if len(l.next) == 0 {
		return nil, io.EOF
	}
	c := l.next[0]
	l.next = l.next[1:]
	return c, nil
}

func (l *list) Close() error { return nil }

// everyRunFinishes is the program's own invariant: no run fails.
func everyRunFinishes(events []*messages.Envelope) error {
	var errs []error
	for _, e := range events {
		if p, ok := e.Payload.(*messages.RunErrorPayload); ok {
			errs = append(errs, fmt.Errorf("run %s failed: %s", e.RunID, p.Message))
		}
	}
	return errors.Join(errs...)
}

// TestSim_YourOwnModel: a program's own model and tool, in seeded
// simulations with tool faults, transient model errors and a crash, checked against the program's
// own invariant (Options.Check). The careless model fails at some seed;
// that seed fails again the same way, journal byte for byte; the careful
// model passes every seed the careless one was run on.
func TestSim_YourOwnModel(t *testing.T) {
	weather, err := tool.Func("weather", "The weather in a city.", func(_ context.Context, a struct {
		City string `json:"city"`
	}) (string, error) {
		return "sunny in " + a.City, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	scenario := func(seed uint64) sim.Scenario {
		return sim.Scenario{Seed: seed, Clients: 1, Crashes: []int{6},
			Tool:  sim.ToolFaults{ErrorRate: 0.3, SlowRate: 0.3, Slow: 1e9},
			Model: sim.ModelFaults{GateRate: 0.5, TransientRate: 0.1},
			Runs:  []sim.RunPlan{{At: 1, Start: messages.StartRun{Question: "what to wear"}}, {At: 5, Start: messages.StartRun{Question: "and tomorrow"}}}}
	}
	opts := func(careless bool) sim.Options {
		return sim.Options{Model: forecaster{careless: careless}, Tools: []tool.Tool{weather}, Check: everyRunFinishes, KeepJournal: true}
	}
	var failing uint64
	var first sim.Result
	for seed := uint64(1); seed <= 20 && failing == 0; seed++ {
		if res := sim.Run(t, scenario(seed), opts(true)); res.Failed() {
			failing, first = seed, res
		}
	}
	if failing == 0 {
		t.Fatal("the careless model passed 20 seeds with a 30% tool error rate")
	}
	if !slices.ContainsFunc(first.Failures, func(f string) bool { return strings.Contains(f, "check: run") && strings.Contains(f, "no weather") }) {
		t.Fatalf("seed %d failed, but not the program's check: %v", failing, first.Failures)
	}
	if first.Crashes != 1 {
		t.Fatalf("seed %d crashed %d times, want the scenario's one crash", failing, first.Crashes)
	}
	again := sim.Run(t, scenario(failing), opts(true))
	if !slices.Equal(again.Failures, first.Failures) || again.Digest != first.Digest {
		t.Fatalf("seed %d does not reproduce: %v (digest %s), then %v (digest %s)", failing, first.Failures, first.Digest, again.Failures, again.Digest)
	}
	small, res := sim.Shrink(t, scenario(failing), opts(true), 40)
	if !res.Failed() || !strings.HasPrefix(res.Failures[0], "check: ") || small.Tool.ErrorRate == 0 {
		t.Fatalf("shrunk to %+v failing with %v, want the program's check and the tool faults kept", small, res.Failures)
	}
	if r0, _, a0 := scenario(failing).Size(); len(small.Runs)+len(small.Crashes)+small.Clients >= r0+a0 {
		t.Fatalf("shrinking kept %+v", small)
	}
	for seed := uint64(1); seed <= max(failing, 10); seed++ {
		if res := sim.Run(t, scenario(seed), opts(false)); res.Failed() {
			t.Fatalf("the careful model fails seed %d: %v", seed, res.Failures)
		}
	}
	restarts := 0
	for _, line := range first.Journal {
		restarts += strings.Count(line, `"type":"agent_restarted"`)
	}
	t.Logf("the careless model fails at seed %d (%d crashes, %d agent restarts, %d steps): %s", failing, first.Crashes, restarts, first.Steps, first.Failures[0])
}

func TestSim_ModelAndModelsBoth(t *testing.T) {
	res := sim.Run(t, sim.Scenario{Seed: 1}, sim.Options{Model: forecaster{}, Models: func(messages.Scenario) (model.Model, error) { return forecaster{}, nil }})
	if !res.Failed() || !strings.Contains(res.Failures[0], "not both") {
		t.Fatalf("Failures = %v, want the setup refused", res.Failures)
	}
}
