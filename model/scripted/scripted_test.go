package scripted_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
)

func newModel(t testing.TB, s messages.Scenario) *scripted.Model {
	t.Helper()
	m, err := scripted.New(s)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// result is what a whole turn streamed.
type result struct {
	chunks []model.Chunk
	err    error // the error that ended the turn (io.EOF on success)
	panic  any
}

func (r result) text() string {
	var b strings.Builder
	for _, c := range r.chunks {
		if t, ok := c.(*model.Text); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

func (r result) count(kind string) int {
	n := 0
	for _, c := range r.chunks {
		if chunkKind(c) == kind {
			n++
		}
	}
	return n
}

// shape returns the kinds of the chunks, run-length encoded ("reasoning*4 text*12 call*3 usage*1").
func (r result) shape() string {
	var parts []string
	for i := 0; i < len(r.chunks); {
		k := chunkKind(r.chunks[i])
		j := i
		for j < len(r.chunks) && chunkKind(r.chunks[j]) == k {
			j++
		}
		parts = append(parts, fmt.Sprintf("%s*%d", k, j-i))
		i = j
	}
	return strings.Join(parts, " ")
}

func (r result) usage(t *testing.T) messages.Usage {
	t.Helper()
	if len(r.chunks) == 0 {
		t.Fatal("no chunks")
	}
	u, ok := r.chunks[len(r.chunks)-1].(*model.Usage)
	if !ok {
		t.Fatalf("last chunk is %T, want *model.Usage", r.chunks[len(r.chunks)-1])
	}
	if u.Model != "scripted" {
		t.Errorf("usage model = %q, want scripted", u.Model)
	}
	return u.Usage
}

func chunkKind(c model.Chunk) string {
	switch c.(type) {
	case *model.Text:
		return "text"
	case *model.Reasoning:
		return "reasoning"
	case *model.Call:
		return "call"
	case *model.Usage:
		return "usage"
	default:
		return fmt.Sprintf("%T", c)
	}
}

// run streams one turn to its end, recovering a panic.
func run(t testing.TB, m *scripted.Model, ctx context.Context, req model.Request) (r result) {
	t.Helper()
	st, err := m.Stream(ctx, req)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}()
	defer func() { r.panic = recover() }()
	for {
		c, err := st.Recv()
		if err != nil {
			r.err = err
			return r
		}
		r.chunks = append(r.chunks, c)
	}
}

func worker(id string, turn, attempt int) model.Request {
	return model.Request{Role: model.RoleWorker, AgentID: id, Goal: "Aspect 1 of 6: key facts", Question: "Why is the sky blue?", Turn: turn, Attempt: attempt}
}

func TestPlanFor_Shape(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		s          messages.Scenario
		wantSizes  []int
		wantWidth  int
		wantTools  []string
		wantFanIns int
	}{
		{"defaults", messages.Scenario{}, []int{2, 2, 2}, 3, nil, 2},
		{"uneven", messages.Scenario{Nodes: 20, Waves: 6, FanIn: 3, ToolsPerNode: 1}, []int{4, 4, 3, 3, 3, 3}, 3, []string{"search"}, 3},
		{"one wave", messages.Scenario{Nodes: 5, Waves: 1, SubagentsPerNode: 2}, []int{5}, 3, []string{"delegate"}, 2},
		{"chain", messages.Scenario{Nodes: 4, Waves: 4, FanIn: 5, ToolsPerNode: 2, SubagentsPerNode: 1}, []int{1, 1, 1, 1}, 3, []string{"search", "delegate"}, 5},
		{"fan-in above level size", messages.Scenario{Nodes: 7, Waves: 3, FanIn: 64}, []int{3, 2, 2}, 3, nil, 64},
		{"wide ids", messages.Scenario{Nodes: 1200, Waves: 7, FanIn: 4}, []int{172, 172, 172, 171, 171, 171, 171}, 4, nil, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := tt.s.WithDefaults()
			p := scripted.PlanFor(s)
			total := 0
			for _, n := range tt.wantSizes {
				total += n
			}
			if len(p.Nodes) != total || total != s.Nodes {
				t.Fatalf("len(nodes) = %d, want %d", len(p.Nodes), total)
			}
			level := make(map[string]int, len(p.Nodes))
			i := 0
			for l, size := range tt.wantSizes {
				prevSize := 0
				if l > 0 {
					prevSize = tt.wantSizes[l-1]
				}
				for range size {
					n := p.Nodes[i]
					i++
					if want := fmt.Sprintf("n%0*d", tt.wantWidth, i); n.ID != want {
						t.Fatalf("node %d id = %q, want %q", i, n.ID, want)
					}
					if want := fmt.Sprintf("Aspect %d of %d: ", i, s.Nodes); !strings.HasPrefix(n.Goal, want) {
						t.Errorf("%s goal = %q, want prefix %q", n.ID, n.Goal, want)
					}
					if !slices.Equal(n.Tools, tt.wantTools) {
						t.Errorf("%s tools = %v, want %v", n.ID, n.Tools, tt.wantTools)
					}
					level[n.ID] = l
					if want := min(tt.wantFanIns, prevSize); len(n.Deps) != want {
						t.Errorf("%s has %d deps, want %d", n.ID, len(n.Deps), want)
					}
					if !slices.IsSorted(n.Deps) || len(slices.Compact(slices.Clone(n.Deps))) != len(n.Deps) {
						t.Errorf("%s deps %v are not sorted and distinct", n.ID, n.Deps)
					}
					for _, d := range n.Deps {
						if dl, ok := level[d]; !ok || dl != l-1 {
							t.Errorf("%s (level %d) depends on %s, not of level %d", n.ID, l, d, l-1)
						}
					}
				}
			}
		})
	}
}

func TestPlanFor_Seed(t *testing.T) {
	t.Parallel()
	s := messages.Scenario{Nodes: 20, Waves: 4, FanIn: 2, Seed: 7}.WithDefaults()
	a, b := scripted.PlanFor(s), scripted.PlanFor(s)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different plans")
	}
	s.Seed = 8
	if c := scripted.PlanFor(s); reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 gave the same plan")
	}
	if m := newModel(t, s); !reflect.DeepEqual(m.Plan(), scripted.PlanFor(s)) {
		t.Fatal("Model.Plan differs from PlanFor")
	}
}

func TestNew_FractionSelection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		nodes     int
		fraction  float64
		wantCount int
	}{
		{"5% of 200", 200, 0.05, 10},
		{"rounds", 30, 0.05, 2},
		{"at least one", 6, 0.01, 1},
		{"all", 6, 1, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sel := messages.NodeSelector{Fraction: tt.fraction}
			fail := newModel(t, messages.Scenario{Nodes: tt.nodes, FailNodes: sel}).FailNodes()
			panics := newModel(t, messages.Scenario{Nodes: tt.nodes, PanicNodes: sel}).PanicNodes()
			for _, ids := range [][]string{fail, panics} {
				if len(ids) != tt.wantCount || !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
					t.Errorf("selected %v, want %d sorted distinct ids", ids, tt.wantCount)
				}
			}
			again := newModel(t, messages.Scenario{Nodes: tt.nodes, FailNodes: sel}).FailNodes()
			if !slices.Equal(fail, again) {
				t.Errorf("selection is not deterministic: %v then %v", fail, again)
			}
		})
	}

	// Fail and panic selections are salted differently, and fail wins.
	s := messages.Scenario{Nodes: 200, Waves: 5, FailNodes: messages.NodeSelector{Fraction: 0.1}, PanicNodes: messages.NodeSelector{Fraction: 0.1}}
	m := newModel(t, s)
	panicsAlone := newModel(t, messages.Scenario{Nodes: 200, Waves: 5, PanicNodes: s.PanicNodes}).PanicNodes()
	if slices.Equal(m.FailNodes(), panicsAlone) {
		t.Error("fail and panic fractions selected the same nodes")
	}
	want := slices.DeleteFunc(panicsAlone, func(id string) bool { return slices.Contains(m.FailNodes(), id) })
	if got := m.PanicNodes(); !slices.Equal(got, want) {
		t.Errorf("PanicNodes = %v, want %v (the panic selection minus fail nodes)", got, want)
	}
}

func TestNew_IDSelection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                string
		s                   messages.Scenario
		wantFail, wantPanic []string
	}{
		{
			name:     "unknown ids ignored",
			s:        messages.Scenario{Nodes: 12, FailNodes: messages.NodeSelector{IDs: []string{"n012", "n002", "n013", "x", "n02", "n0002", "n+02", "n002"}}},
			wantFail: []string{"n002", "n012"},
		},
		{
			name:      "fail wins",
			s:         messages.Scenario{Nodes: 6, FailNodes: messages.NodeSelector{IDs: []string{"n001", "n003"}}, PanicNodes: messages.NodeSelector{IDs: []string{"n003", "n004"}}},
			wantFail:  []string{"n001", "n003"},
			wantPanic: []string{"n004"},
		},
		{
			name:      "ids win over fraction",
			s:         messages.Scenario{Nodes: 6, PanicNodes: messages.NodeSelector{IDs: []string{"n005"}, Fraction: 1}},
			wantPanic: []string{"n005"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newModel(t, tt.s)
			if got := m.FailNodes(); !slices.Equal(got, tt.wantFail) {
				t.Errorf("FailNodes = %v, want %v", got, tt.wantFail)
			}
			if got := m.PanicNodes(); !slices.Equal(got, tt.wantPanic) {
				t.Errorf("PanicNodes = %v, want %v", got, tt.wantPanic)
			}
		})
	}
}

func TestNew_Invalid(t *testing.T) {
	t.Parallel()
	for _, s := range []messages.Scenario{
		{Nodes: 3, Waves: 4},
		{Tokens: -1},
		{FailNodes: messages.NodeSelector{Fraction: 1.5}},
	} {
		if _, err := scripted.New(s); err == nil {
			t.Errorf("New(%+v) succeeded", s)
		}
	}
	if m, err := scripted.NewFactory().Model(messages.Scenario{}); err != nil || m.Name() != "scripted" {
		t.Errorf("Factory = %v, %v", m, err)
	}
}

func TestModel_WorkerWithTools(t *testing.T) {
	t.Parallel()
	m := newModel(t, messages.Scenario{Tokens: 9, ReasoningTokens: 3, ToolsPerNode: 2, SubagentsPerNode: 1})
	ctx := t.Context()

	req := worker("n004", 1, 1)
	req.Context = []string{"first input here", "second"}
	r := run(t, m, ctx, req)
	if r.err != io.EOF {
		t.Fatalf("turn 1 ended with %v", r.err)
	}
	if got, want := r.shape(), "reasoning*3 text*4 call*3 usage*1"; got != want {
		t.Fatalf("turn 1 = %s, want %s", got, want)
	}
	wantCalls := []model.ToolCall{
		{ID: "n004-t1-c1", Name: "search", Args: json.RawMessage(`{"query":"Aspect 1 of 6: key facts 1"}`)},
		{ID: "n004-t1-c2", Name: "search", Args: json.RawMessage(`{"query":"Aspect 1 of 6: key facts 2"}`)},
		{ID: "n004-t1-c3", Name: "delegate", Args: json.RawMessage(`{"task":"Sub-task 1 of n004"}`)},
	}
	var calls []model.ToolCall
	for _, c := range r.chunks {
		if c, ok := c.(*model.Call); ok {
			calls = append(calls, c.Call)
		}
	}
	if !reflect.DeepEqual(calls, wantCalls) {
		t.Errorf("calls = %+v, want %+v", calls, wantCalls)
	}
	// Goal 6 words + question 5 + context 4.
	if got, want := r.usage(t), (messages.Usage{InputTokens: 15, OutputTokens: 7}); got != want {
		t.Errorf("turn 1 usage = %+v, want %+v", got, want)
	}
	if strings.Contains(r.text(), "Building on") {
		t.Errorf("turn 1 mentions the context: %q", r.text())
	}

	req.Turn = 2
	for _, c := range calls {
		req.ToolResults = append(req.ToolResults, model.ToolResult{CallID: c.ID, Name: c.Name, Content: "one two three"})
	}
	r = run(t, m, ctx, req)
	if got, want := r.shape(), "text*5 usage*1"; got != want {
		t.Fatalf("turn 2 = %s, want %s", got, want)
	}
	if first := r.chunks[0].(*model.Text).Text; first != "Building on 2 inputs. " {
		t.Errorf("first text of turn 2 = %q", first)
	}
	if got, want := r.usage(t), (messages.Usage{InputTokens: 24, OutputTokens: 5}); got != want {
		t.Errorf("turn 2 usage = %+v, want %+v", got, want)
	}

	req.Turn = 3
	if _, err := m.Stream(ctx, req); !errors.Is(err, model.ErrModel) {
		t.Errorf("turn 3: err = %v, want ErrModel", err)
	}
}

func TestModel_WorkerWithoutTools(t *testing.T) {
	t.Parallel()
	m := newModel(t, messages.Scenario{Tokens: 10, ReasoningTokens: 2})
	ctx := t.Context()
	tests := []struct {
		name      string
		context   []string
		wantFirst string
	}{
		{"no context", nil, ""},
		{"context", []string{"a", "b", "c"}, "Building on 3 inputs. "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := worker("n001", 1, 1)
			req.Context = tt.context
			r := run(t, m, ctx, req)
			if got, want := r.shape(), "reasoning*2 text*10 usage*1"; got != want || r.err != io.EOF {
				t.Fatalf("turn = %s (%v), want %s", got, r.err, want)
			}
			if got := r.usage(t).OutputTokens; got != 12 {
				t.Errorf("output tokens = %d, want 12", got)
			}
			first := r.chunks[2].(*model.Text).Text
			if tt.wantFirst != "" && first != tt.wantFirst {
				t.Errorf("first text = %q, want %q", first, tt.wantFirst)
			}
			if tt.wantFirst == "" && (strings.Count(first, " ") != 1 || !strings.HasSuffix(first, " ")) {
				t.Errorf("first text = %q, want one word and a space", first)
			}
		})
	}
	if _, err := m.Stream(ctx, worker("n001", 2, 1)); !errors.Is(err, model.ErrModel) {
		t.Errorf("turn 2: err = %v, want ErrModel", err)
	}
}

func TestModel_FailNode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		s         messages.Scenario
		wantShape string
	}{
		{"no tools", messages.Scenario{Tokens: 9, ReasoningTokens: 2}, "reasoning*2 text*4"},
		{"tools", messages.Scenario{Tokens: 8, ReasoningTokens: 1, ToolsPerNode: 1}, "reasoning*1 text*4"},
		{"one token", messages.Scenario{Tokens: 1, ReasoningTokens: 2}, "reasoning*2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.s.FailNodes = messages.NodeSelector{IDs: []string{"n002"}}
			m := newModel(t, tt.s)
			for attempt := 1; attempt <= 2; attempt++ {
				r := run(t, m, t.Context(), worker("n002", 1, attempt))
				if !errors.Is(r.err, model.ErrModel) || r.panic != nil {
					t.Fatalf("attempt %d: err = %v, panic = %v; want ErrModel", attempt, r.err, r.panic)
				}
				if want := "scripted failure of node n002"; !strings.Contains(r.err.Error(), want) {
					t.Errorf("err = %q, want it to contain %q", r.err, want)
				}
				if got := r.shape(); got != tt.wantShape {
					t.Errorf("attempt %d streamed %s, want %s", attempt, got, tt.wantShape)
				}
			}
			if r := run(t, m, t.Context(), worker("n001", 1, 1)); r.err != io.EOF {
				t.Errorf("n001 ended with %v", r.err)
			}
		})
	}
}

func TestModel_PanicNode(t *testing.T) {
	t.Parallel()
	m := newModel(t, messages.Scenario{Tokens: 6, ReasoningTokens: 1, PanicAttempts: 1, PanicNodes: messages.NodeSelector{IDs: []string{"n003"}}})
	ctx := t.Context()

	r := run(t, m, ctx, worker("n003", 1, 1))
	p, ok := r.panic.(*scripted.Panic)
	if !ok {
		t.Fatalf("attempt 1: panic = %#v (err %v), want *scripted.Panic", r.panic, r.err)
	}
	if *p != (scripted.Panic{NodeID: "n003", Attempt: 1}) || p.Error() == "" {
		t.Errorf("panic = %+v", *p)
	}
	if got, want := r.shape(), "reasoning*1 text*3"; got != want {
		t.Errorf("attempt 1 streamed %s, want %s", got, want)
	}

	ok2 := run(t, m, ctx, worker("n003", 1, 2))
	if ok2.panic != nil || ok2.err != io.EOF {
		t.Fatalf("attempt 2: panic %v, err %v", ok2.panic, ok2.err)
	}
	if got, want := ok2.shape(), "reasoning*1 text*6 usage*1"; got != want {
		t.Errorf("attempt 2 streamed %s, want %s", got, want)
	}
	// A restarted attempt reproduces the text of the attempt before it.
	if !reflect.DeepEqual(ok2.chunks[:4], r.chunks) {
		t.Errorf("attempt 2 began with %v, attempt 1 streamed %v", ok2.chunks[:4], r.chunks)
	}
}

// TestModel_PanicMembers: a team member of PanicMembers panics after its
// first token on its first PanicAttempts attempts, and a debate agent of
// it in its round-1 turn; members not named, and later attempts, run
// normally.
func TestModel_PanicMembers(t *testing.T) {
	t.Parallel()
	m := newModel(t, messages.Scenario{Tokens: 6, PanicAttempts: 1, PanicMembers: []string{"n001/m2", "n004:a2"}})
	ctx := t.Context()
	r := run(t, m, ctx, worker("n001/m2", 1, 1))
	if p, ok := r.panic.(*scripted.Panic); !ok || *p != (scripted.Panic{NodeID: "n001/m2", Attempt: 1}) || r.shape() != "text*1" {
		t.Fatalf("member attempt 1: panic %#v, streamed %s", r.panic, r.shape())
	}
	for _, req := range []model.Request{worker("n001/m2", 1, 2), worker("n001/m1", 1, 1)} {
		if r := run(t, m, ctx, req); r.panic != nil || r.err != io.EOF {
			t.Fatalf("%s attempt %d: panic %v, err %v", req.AgentID, req.Attempt, r.panic, r.err)
		}
	}
	debater := func(id string, round, attempt int) model.Request {
		return model.Request{Role: model.RoleDebater, AgentID: id, Turn: 1, Round: round, Attempt: attempt}
	}
	if r := run(t, m, ctx, debater("n004:a2", 1, 1)); r.panic == nil {
		t.Fatalf("debater round 1: no panic (err %v)", r.err)
	}
	for _, req := range []model.Request{debater("n004:a2", 2, 1), debater("n004:a2", 1, 2), debater("n004:a1", 1, 1)} {
		if r := run(t, m, ctx, req); r.panic != nil || r.err != io.EOF {
			t.Fatalf("%s round %d attempt %d: panic %v, err %v", req.AgentID, req.Round, req.Attempt, r.panic, r.err)
		}
	}
}

func TestModel_Deterministic(t *testing.T) {
	t.Parallel()
	s := messages.Scenario{Tokens: 40, ReasoningTokens: 5, Seed: 42}
	a := run(t, newModel(t, s), t.Context(), worker("n001", 1, 1))
	b := run(t, newModel(t, s), t.Context(), worker("n001", 1, 1))
	if !reflect.DeepEqual(a.chunks, b.chunks) {
		t.Fatal("two streams of one request differ")
	}
	if c := run(t, newModel(t, s), t.Context(), worker("n002", 1, 1)); c.text() == a.text() {
		t.Error("n001 and n002 streamed the same text")
	}
	s.Seed = 43
	if c := run(t, newModel(t, s), t.Context(), worker("n001", 1, 1)); c.text() == a.text() {
		t.Error("seeds 42 and 43 streamed the same text")
	}
}

func TestModel_Director(t *testing.T) {
	t.Parallel()
	for _, s := range []messages.Scenario{
		{},
		{Nodes: 5, Waves: 1},
		{Nodes: 300, Waves: 12, FanIn: 5, ToolsPerNode: 1, SubagentsPerNode: 1, Seed: 3},
	} {
		s = s.WithDefaults()
		m := newModel(t, s)
		r := run(t, m, t.Context(), model.Request{Role: model.RoleDirector, AgentID: "director", Question: "Why?", Turn: 1, Attempt: 1})
		if r.err != io.EOF || r.count("reasoning") != 3 {
			t.Fatalf("director: %s, %v", r.shape(), r.err)
		}
		for _, c := range r.chunks {
			if c, ok := c.(*model.Text); ok && len(c.Text) > 64 {
				t.Errorf("text chunk of %d bytes", len(c.Text))
			}
		}
		var p messages.Plan
		if err := json.Unmarshal([]byte(r.text()), &p); err != nil {
			t.Fatalf("plan JSON: %v", err)
		}
		if !reflect.DeepEqual(p, scripted.PlanFor(s)) {
			t.Error("decoded plan differs from PlanFor")
		}
		if got, want := r.usage(t).OutputTokens, int64(len(r.chunks)-1); got != want {
			t.Errorf("output tokens = %d, want %d", got, want)
		}
		if _, err := m.Stream(t.Context(), model.Request{Role: model.RoleDirector, Turn: 2}); !errors.Is(err, model.ErrModel) {
			t.Errorf("director turn 2: err = %v", err)
		}
	}
}

func TestModel_SubagentAndSynthesizer(t *testing.T) {
	t.Parallel()
	m := newModel(t, messages.Scenario{Tokens: 3, SynthesisTokens: 5, FailNodes: messages.NodeSelector{Fraction: 1}})
	tests := []struct {
		name      string
		req       model.Request
		wantShape string
		wantText  string
	}{
		{"subagent", model.Request{Role: model.RoleSubagent, AgentID: "n001.sub1", Goal: "Sub-task 1 of n001", Turn: 1}, "text*1 usage*1", ""},
		{"synthesizer", model.Request{Role: model.RoleSynthesizer, AgentID: "synthesizer", Question: "Why is it so?", Context: []string{"x y"}, Turn: 1}, "text*6 usage*1", "Answer to: Why is it so? — "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, m, t.Context(), tt.req)
			if got := r.shape(); got != tt.wantShape || r.err != io.EOF {
				t.Fatalf("streamed %s (%v), want %s", got, r.err, tt.wantShape)
			}
			if !strings.HasPrefix(r.text(), tt.wantText) {
				t.Errorf("text = %q, want prefix %q", r.text(), tt.wantText)
			}
			tt.req.Turn = 2
			if _, err := m.Stream(t.Context(), tt.req); !errors.Is(err, model.ErrModel) {
				t.Errorf("turn 2: err = %v, want ErrModel", err)
			}
		})
	}
	if _, err := m.Stream(t.Context(), model.Request{Role: 0, Turn: 1}); !errors.Is(err, model.ErrModel) {
		t.Errorf("unknown role: err = %v, want ErrModel", err)
	}
}

func TestModel_TokenDelay(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newModel(t, messages.Scenario{Tokens: 10, ReasoningTokens: 3, TokenDelayMS: 100})
		start := time.Now()
		r := run(t, m, context.Background(), worker("n001", 1, 1))
		if r.err != io.EOF {
			t.Fatalf("ended with %v", r.err)
		}
		if got, want := time.Since(start), 13*100*time.Millisecond; got != want {
			t.Errorf("turn took %v, want %v", got, want)
		}
	})
}

func TestStream_Cancel(t *testing.T) {
	t.Parallel()
	t.Run("during a delay", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			m := newModel(t, messages.Scenario{Tokens: 10, TokenDelayMS: 100})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(250*time.Millisecond, cancel)
			start := time.Now()
			r := run(t, m, ctx, worker("n001", 1, 1))
			if r.err != context.Canceled || len(r.chunks) != 2 {
				t.Errorf("got %d chunks and %v, want 2 and context.Canceled", len(r.chunks), r.err)
			}
			if got := time.Since(start); got != 250*time.Millisecond {
				t.Errorf("cancelled after %v, want 250ms", got)
			}
		})
	})
	t.Run("without delay", func(t *testing.T) {
		t.Parallel()
		m := newModel(t, messages.Scenario{})
		ctx, cancel := context.WithCancel(t.Context())
		st, err := m.Stream(ctx, worker("n001", 1, 1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		cancel()
		for range 2 {
			if _, err := st.Recv(); err != context.Canceled {
				t.Errorf("Recv after cancel: %v", err)
			}
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); !errors.Is(err, scripted.ErrClosed) {
			t.Errorf("Recv after Close: %v", err)
		}
		if _, err := m.Stream(ctx, worker("n001", 1, 1)); err != context.Canceled {
			t.Errorf("Stream with a cancelled context: %v", err)
		}
	})
}

func TestSearchResult(t *testing.T) {
	t.Parallel()
	a, b := scripted.SearchResult("blue sky 1"), scripted.SearchResult("blue sky 1")
	if a != b || a == "" || !strings.Contains(a, `"blue sky 1"`) {
		t.Errorf("SearchResult = %q, %q", a, b)
	}
	if scripted.SearchResult("blue sky 2") == a {
		t.Error("two queries gave the same result")
	}
}

func TestModel_Concurrent(t *testing.T) {
	t.Parallel()
	m := newModel(t, messages.Scenario{Nodes: 16, Waves: 4, ToolsPerNode: 1})
	want := make([]string, len(m.Plan().Nodes))
	got := make([]string, len(want))
	done := make(chan struct{})
	for i, n := range m.Plan().Nodes {
		want[i] = run(t, m, t.Context(), worker(n.ID, 1, 1)).text()
		go func() {
			defer func() { done <- struct{}{} }()
			st, err := m.Stream(t.Context(), worker(n.ID, 1, 1))
			if err != nil {
				t.Error(err)
				return
			}
			defer st.Close()
			var b strings.Builder
			for {
				c, err := st.Recv()
				if err != nil {
					break
				}
				if c, ok := c.(*model.Text); ok {
					b.WriteString(c.Text)
				}
			}
			got[i] = b.String()
		}()
	}
	for range want {
		<-done
	}
	if !slices.Equal(got, want) {
		t.Error("concurrent streams differ from sequential ones")
	}
}

func BenchmarkWorkerTurn(b *testing.B) {
	m := newModel(b, messages.Scenario{Tokens: 100})
	ctx := context.Background()
	req := worker("n001", 1, 1)
	b.ReportAllocs()
	for b.Loop() {
		st, err := m.Stream(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := st.Recv(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
		_ = st.Close()
	}
}

// TestModel_SynthesizerNamesFiles: the synthesiser's answer names the
// run's attached files (what shows that agents were given them), and a
// turn's input tokens count them; without files nothing changes.
func TestModel_SynthesizerNamesFiles(t *testing.T) {
	t.Parallel()
	m := newModel(t, messages.Scenario{SynthesisTokens: 2})
	req := model.Request{Role: model.RoleSynthesizer, AgentID: "synthesizer", Question: "why", Turn: 1, Attempt: 1}
	plain := run(t, m, t.Context(), req)
	req.Files = []messages.RunFile{{Name: "brief.md", MediaType: "text/markdown", Size: 11, Data: []byte("three words here")},
		{Name: "chart.png", MediaType: "image/png", Size: 40}}
	with := run(t, m, t.Context(), req)
	if got := with.chunks[0].(*model.Text).Text; got != "Answer to: why (with the attached files brief.md, chart.png) — " {
		t.Errorf("first text %q", got)
	}
	if got := plain.chunks[0].(*model.Text).Text; got != "Answer to: why — " {
		t.Errorf("without files: first text %q", got)
	}
	if d := with.usage(t).InputTokens - plain.usage(t).InputTokens; d != 3+10 {
		t.Errorf("the files add %d input tokens, want 13 (3 words, 40 bytes / 4)", d)
	}
}
