package scripted_test

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
)

// argsSchemas are schemas of the kinds MCP servers publish, each with
// what ArgsFor must give: every required property, and no optional one.
var argsSchemas = []struct {
	name, schema string
	keys         []string // the keys of the arguments, sorted
}{
	{"echo", `{"type":"object","properties":{"message":{"type":"string","description":"Message to echo"}},"required":["message"],"additionalProperties":false}`, []string{"message"}},
	{"get-sum", `{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`, []string{"a", "b"}},
	{"optional only", `{"type":"object","properties":{"count":{"type":"number","minimum":1,"maximum":10,"default":3}}}`, nil},
	{"bounds", `{"type":"object","properties":{
		"n":{"type":"integer","minimum":5,"maximum":7},
		"x":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":2},
		"m":{"type":"integer","minimum":1,"maximum":30,"multipleOf":7},
		"neg":{"type":"integer","maximum":-50},
		"s":{"type":"string","minLength":40,"maxLength":41},
		"short":{"type":"string","maxLength":3},
		"e":{"enum":["red","green",3]},
		"c":{"const":"fixed"},
		"b":{"type":"boolean"},
		"d":{"type":"string","default":"dflt"},
		"when":{"type":"string","format":"date-time"},
		"uri":{"type":"string","format":"uri"},
		"mail":{"type":"string","format":"email"},
		"id":{"type":"string","format":"uuid"},
		"opt":{"type":"string"}},
		"required":["n","x","m","neg","s","short","e","c","b","d","when","uri","mail","id"]}`,
		[]string{"b", "c", "d", "e", "id", "m", "mail", "n", "neg", "s", "short", "uri", "when", "x"}},
	{"nested", `{"type":"object","properties":{
		"filter":{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","enum":["a","b"]},"minItems":2},"deep":{"type":"object"}},"required":["tags","deep"]},
		"pair":{"type":"array","prefixItems":[{"type":"integer"},{"type":"boolean"}],"minItems":2},
		"either":{"anyOf":[{"type":"integer","minimum":3,"maximum":3},{"type":"string"}]},
		"maybe":{"type":["null","string"],"minLength":2}},
		"required":["filter","pair","either","maybe"]}`, []string{"either", "filter", "maybe", "pair"}},
	{"empty", `{"type":"object"}`, nil},
}

// TestArgsFor: the arguments satisfy their schema, hold exactly the
// required properties, and depend only on the PRNG's seed.
func TestArgsFor(t *testing.T) {
	t.Parallel()
	for _, tc := range argsSchemas {
		var sc jsonschema.Schema
		if err := json.Unmarshal([]byte(tc.schema), &sc); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		rs, err := sc.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		differ := false
		var first json.RawMessage
		for seed := range uint64(20) {
			args := scripted.ArgsFor(json.RawMessage(tc.schema), rand.New(rand.NewPCG(seed, 1)))
			again := scripted.ArgsFor(json.RawMessage(tc.schema), rand.New(rand.NewPCG(seed, 1)))
			if string(args) != string(again) {
				t.Errorf("%s seed %d: %s, then %s", tc.name, seed, args, again)
			}
			if first == nil {
				first = args
			} else if string(first) != string(args) {
				differ = true
			}
			var v map[string]any
			if err := json.Unmarshal(args, &v); err != nil {
				t.Fatalf("%s: %s: %v", tc.name, args, err)
			}
			if err := rs.Validate(v); err != nil {
				t.Errorf("%s seed %d: %s does not satisfy the schema: %v", tc.name, seed, args, err)
			}
			var keys []string
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, tc.keys) {
				t.Errorf("%s: keys %q, want %q", tc.name, keys, tc.keys)
			}
		}
		if len(tc.keys) > 0 && tc.name != "nested" && !differ {
			t.Errorf("%s: 20 seeds gave the same arguments %s", tc.name, first)
		}
	}
	for _, bad := range []string{"", "nope", `[1]`, `{"type":"string"}`} {
		if got := scripted.ArgsFor(json.RawMessage(bad), rand.New(rand.NewPCG(1, 1))); string(got) != "{}" {
			t.Errorf("ArgsFor(%q) = %s, want {}", bad, got)
		}
	}
}

// TestModel_WorkerCalls: Scenario.Calls makes every worker call the named
// tools once each, after its other calls, with arguments from the tools'
// schemas in the request; the plan gives the leaves those tools.
func TestModel_WorkerCalls(t *testing.T) {
	t.Parallel()
	sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4, ToolsPerNode: 1, Calls: []string{"everything.echo", "everything.get-sum", "search"}, Seed: 3}
	m := newModel(t, sc)
	for _, n := range m.Plan().Nodes {
		if want := []string{"search", "everything.echo", "everything.get-sum"}; !slices.Equal(n.Tools, want) {
			t.Errorf("node %s tools %q, want %q", n.ID, n.Tools, want)
		}
	}
	req := worker("n001", 1, 1)
	req.Tools = []model.ToolDef{
		{Name: "everything.echo", Schema: json.RawMessage(argsSchemas[0].schema)},
		{Name: "everything.get-sum", Schema: json.RawMessage(argsSchemas[1].schema)},
	}
	r := run(t, m, t.Context(), req)
	if r.err != io.EOF {
		t.Fatalf("turn 1: %v", r.err)
	}
	var calls []model.ToolCall
	for _, c := range r.chunks {
		if c, ok := c.(*model.Call); ok {
			calls = append(calls, c.Call)
		}
	}
	if len(calls) != 4 {
		t.Fatalf("calls %+v, want 4", calls)
	}
	names := []string{calls[0].Name, calls[1].Name, calls[2].Name, calls[3].Name}
	if want := []string{"search", "everything.echo", "everything.get-sum", "search"}; !slices.Equal(names, want) {
		t.Errorf("calls %q, want %q", names, want)
	}
	var echo struct{ Message string }
	var sum struct{ A, B *float64 }
	if json.Unmarshal(calls[1].Args, &echo) != nil || echo.Message == "" || json.Unmarshal(calls[2].Args, &sum) != nil || sum.A == nil || sum.B == nil {
		t.Errorf("arguments %s, %s", calls[1].Args, calls[2].Args)
	}
	// search is not in req.Tools here: {} (a real engine gives its schema).
	if string(calls[3].Args) != "{}" {
		t.Errorf("search args %s, want {}", calls[3].Args)
	}
	if again := run(t, m, t.Context(), req); !slices.EqualFunc(again.chunks, r.chunks, func(a, b model.Chunk) bool {
		ca, okA := a.(*model.Call)
		cb, okB := b.(*model.Call)
		return okA == okB && (!okA || string(ca.Call.Args) == string(cb.Call.Args))
	}) {
		t.Error("the same turn made other arguments")
	}
	// Turn 2 ends the worker, as with any calls.
	req.Turn = 2
	if r := run(t, m, t.Context(), req); r.count("call") != 0 || r.err != io.EOF {
		t.Errorf("turn 2: %s, %v", r.shape(), r.err)
	}
}

// TestScenario_CallsValidated: Calls must be tool names, at most
// MaxScenarioCalls of them.
func TestScenario_CallsValidated(t *testing.T) {
	t.Parallel()
	for _, calls := range [][]string{{""}, {"bad name"}, {string(make([]byte, 65))}, make([]string, messages.MaxScenarioCalls+1)} {
		for i := range calls {
			if calls[i] == "" && len(calls) > 1 {
				calls[i] = "x"
			}
		}
		sc := messages.Scenario{Calls: calls}.WithDefaults()
		if err := sc.Validate(); err == nil {
			t.Errorf("calls %q: valid", calls)
		}
	}
	if err := (messages.Scenario{Calls: []string{"everything.get-sum", "search"}}).WithDefaults().Validate(); err != nil {
		t.Error(err)
	}
}
