package scripted_test

import (
	"encoding/json"
	"io"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
)

func (r result) calls() []model.ToolCall {
	var calls []model.ToolCall
	for _, c := range r.chunks {
		if c, ok := c.(*model.Call); ok {
			calls = append(calls, c.Call)
		}
	}
	return calls
}

func (r result) texts() []string {
	var texts []string
	for _, c := range r.chunks {
		if c, ok := c.(*model.Text); ok {
			texts = append(texts, c.Text)
		}
	}
	return texts
}

// runOK streams one turn and fails the test unless it ends with io.EOF
// after a Usage chunk.
func runOK(t *testing.T, m *scripted.Model, req model.Request) result {
	t.Helper()
	r := run(t, m, t.Context(), req)
	if r.err != io.EOF || r.panic != nil {
		t.Fatalf("%s %s turn %d: err %v, panic %v (%s)", req.Role, req.AgentID, req.Turn, r.err, r.panic, r.shape())
	}
	if got, want := r.usage(t).OutputTokens, int64(r.count("text")+r.count("reasoning")); got != want {
		t.Errorf("%s %s turn %d: output tokens = %d, want %d", req.Role, req.AgentID, req.Turn, got, want)
	}
	return r
}

func noTurn(t *testing.T, m *scripted.Model, req model.Request) {
	t.Helper()
	if _, err := m.Stream(t.Context(), req); err == nil {
		t.Errorf("%s %s turn %d: Stream succeeded, want an error", req.Role, req.AgentID, req.Turn)
	}
}

func jsonCall(id, name, args string) model.ToolCall {
	return model.ToolCall{ID: id, Name: name, Args: json.RawMessage(args)}
}

func TestPlanFor_TeamsAndDebates(t *testing.T) {
	t.Parallel()
	base := messages.Scenario{Nodes: 9, Waves: 3, FanIn: 2, ToolsPerNode: 1, Seed: 11}
	s := base
	s.Teams, s.TeamSize = 2, 5
	s.Debate = &messages.DebateScenario{Nodes: 2, Agents: 4, Rounds: 2, Judge: true, MinRounds: 2, CompactAfter: 1}
	s.Spawn = messages.NodeSelector{IDs: []string{"n001", "n003", "n007"}}
	s.Delegations = &messages.DelegationScenario{Async: 2}
	p := scripted.PlanFor(s)
	plain := scripted.PlanFor(base)
	if len(p.Nodes) != len(plain.Nodes) {
		t.Fatalf("%d nodes, want %d", len(p.Nodes), len(plain.Nodes))
	}
	wantDebate := &messages.DebateConfig{
		Agents: []messages.DebateAgent{{ID: "a1", Persona: "optimist"}, {ID: "a2", Persona: "skeptic"}, {ID: "a3", Persona: "pragmatist"}, {ID: "a4", Persona: "historian"}},
		Rounds: 2, Judge: true, MinRounds: 2, CompactAfter: 1,
	}
	async := []string{"start_async_task", "check_async_task", "update_async_task", "cancel_async_task", "list_async_tasks"}
	for i, n := range p.Nodes {
		q := plain.Nodes[i]
		if n.ID != q.ID || n.Goal != q.Goal || !slices.Equal(n.Deps, q.Deps) {
			t.Errorf("node %d = %s %q %v, want %s %q %v", i, n.ID, n.Goal, n.Deps, q.ID, q.Goal, q.Deps)
		}
		switch {
		case i < 2:
			if n.Kind != messages.KindTeam || n.Team == nil || n.Tools != nil || n.Debate != nil {
				t.Fatalf("%s = %+v, want a team node without tools", n.ID, n)
			}
			checkTeam(t, n, 5, 2)
		case i < 4:
			if n.Kind != messages.KindDebate || n.Team != nil || n.Tools != nil || !reflect.DeepEqual(n.Debate, wantDebate) {
				t.Errorf("%s = %+v, want a debate node %+v", n.ID, n, wantDebate)
			}
		default:
			want := []string{"search"}
			if n.ID == "n007" {
				want = append(want, "spawn_subteam")
			}
			want = append(want, async...)
			if n.Kind != "" || n.Team != nil || n.Debate != nil || !slices.Equal(n.Tools, want) {
				t.Errorf("%s = %+v, want a leaf with tools %v", n.ID, n, want)
			}
		}
	}

	// The plan is deterministic, the director streams it, Plan is a deep copy.
	if !reflect.DeepEqual(p, scripted.PlanFor(s)) {
		t.Fatal("PlanFor is not deterministic")
	}
	m := newModel(t, s)
	r := runOK(t, m, model.Request{Role: model.RoleDirector, AgentID: "director", Turn: 1})
	var got messages.Plan
	if err := json.Unmarshal([]byte(r.text()), &got); err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("director streamed %s (%v), want PlanFor", r.text(), err)
	}
	c := m.Plan()
	c.Nodes[0].Team.Nodes[4].Deps[0] = "x"
	c.Nodes[2].Debate.Agents[0].Persona = "x"
	if !reflect.DeepEqual(m.Plan(), p) {
		t.Error("Plan shares memory with the model")
	}
}

// checkTeam checks the nested plan of team node n: k members m1..mk with
// goals "Part j of <goal>", the first ceil(k/2) without deps, the others
// on min(fanIn, ceil(k/2)) members of the first wave.
func checkTeam(t *testing.T, n messages.PlanNode, k, fanIn int) {
	t.Helper()
	first := k
	if k >= 2 {
		first = (k + 1) / 2
	}
	if len(n.Team.Nodes) != k {
		t.Fatalf("team %s has %d members, want %d", n.ID, len(n.Team.Nodes), k)
	}
	for j, mb := range n.Team.Nodes {
		if want := "m" + strconv.Itoa(j+1); mb.ID != want {
			t.Errorf("team %s member %d id = %q, want %q", n.ID, j, mb.ID, want)
		}
		if want := "Part " + strconv.Itoa(j+1) + " of " + n.Goal; mb.Goal != want {
			t.Errorf("%s/%s goal = %q, want %q", n.ID, mb.ID, mb.Goal, want)
		}
		if mb.Kind != "" || mb.Tools != nil || mb.Team != nil || mb.Debate != nil {
			t.Errorf("%s/%s = %+v, want a plain leaf", n.ID, mb.ID, mb)
		}
		if j < first {
			if len(mb.Deps) != 0 {
				t.Errorf("%s/%s (first wave) deps = %v", n.ID, mb.ID, mb.Deps)
			}
			continue
		}
		if len(mb.Deps) != min(fanIn, first) || !slices.IsSorted(mb.Deps) || len(slices.Compact(slices.Clone(mb.Deps))) != len(mb.Deps) {
			t.Errorf("%s/%s deps = %v, want %d sorted distinct", n.ID, mb.ID, mb.Deps, min(fanIn, first))
		}
		for _, d := range mb.Deps {
			if i, err := strconv.Atoi(strings.TrimPrefix(d, "m")); err != nil || i < 1 || i > first {
				t.Errorf("%s/%s depends on %s, not a first-wave member", n.ID, mb.ID, d)
			}
		}
	}
}

func TestPlanFor_TeamSizes(t *testing.T) {
	t.Parallel()
	for _, k := range []int{1, 2, 3, 16} {
		s := messages.Scenario{Nodes: 4, Teams: 4, TeamSize: k, FanIn: 3}
		p := scripted.PlanFor(s)
		for _, n := range p.Nodes {
			checkTeam(t, n, k, 3)
		}
	}
	// TeamSize defaults to 3.
	checkTeam(t, scripted.PlanFor(messages.Scenario{Teams: 1}).Nodes[0], 3, 2)
}

func TestNew_SelectionsSkipTeamsAndDebates(t *testing.T) {
	t.Parallel()
	all := messages.NodeSelector{Fraction: 1}
	s := messages.Scenario{Nodes: 6, Teams: 2, Debate: &messages.DebateScenario{}, FailNodes: all, Spawn: all}
	m := newModel(t, s)
	want := []string{"n004", "n005", "n006"}
	if got := m.FailNodes(); !slices.Equal(got, want) {
		t.Errorf("FailNodes = %v, want %v", got, want)
	}
	if got := m.SpawnNodes(); !slices.Equal(got, want) {
		t.Errorf("SpawnNodes = %v, want %v", got, want)
	}
	s = messages.Scenario{Nodes: 6, Teams: 1, PanicNodes: messages.NodeSelector{IDs: []string{"n001", "n002"}}}
	if got := newModel(t, s).PanicNodes(); !slices.Equal(got, []string{"n002"}) {
		t.Errorf("PanicNodes = %v, want [n002]", got)
	}
	// A fraction selection is seeded, and differs from the fail one.
	s = messages.Scenario{Nodes: 200, Waves: 4, Spawn: messages.NodeSelector{Fraction: 0.1}, FailNodes: messages.NodeSelector{Fraction: 0.1}}
	a, b := newModel(t, s), newModel(t, s)
	if len(a.SpawnNodes()) != 20 || !slices.Equal(a.SpawnNodes(), b.SpawnNodes()) || slices.Equal(a.SpawnNodes(), a.FailNodes()) {
		t.Errorf("spawn selection %v (again %v, fail %v)", a.SpawnNodes(), b.SpawnNodes(), a.FailNodes())
	}
}

func TestModel_ApprovalsSkipTeamsAndDebates(t *testing.T) {
	t.Parallel()
	m := newModel(t, messages.Scenario{Nodes: 5, Waves: 1, Teams: 1, Debate: &messages.DebateScenario{}, Approvals: 4, InfoRequests: 1})
	total := 0
	for _, n := range m.Plan().Nodes[2:] {
		r := runOK(t, m, worker(n.ID, 1, 1))
		total += len(r.calls())
	}
	if total != 5 {
		t.Errorf("the leaves made %d calls, want 4 approvals + 1 info request", total)
	}
}

func TestModel_TeamMember(t *testing.T) {
	t.Parallel()
	all := messages.NodeSelector{Fraction: 1}
	m := newModel(t, messages.Scenario{Nodes: 3, Teams: 1, Tokens: 8, ReasoningTokens: 2, ToolsPerNode: 2, SubagentsPerNode: 1,
		Approvals: 9, InfoRequests: 9, FailNodes: all, Spawn: all, Delegations: &messages.DelegationScenario{Async: 2}})
	for _, id := range []string{"n001/m1", "n002/m2", "n002.sub1/x"} {
		req := worker(id, 1, 1)
		req.Context = []string{"a", "b"}
		r := runOK(t, m, req)
		if got, want := r.shape(), "reasoning*2 text*8 usage*1"; got != want {
			t.Errorf("%s streamed %s, want %s", id, got, want)
		}
		if got := r.texts()[0]; got != "Building on 2 inputs. " {
			t.Errorf("%s first text = %q", id, got)
		}
		noTurn(t, m, worker(id, 2, 1))
	}
}

func TestModel_Spawn(t *testing.T) {
	t.Parallel()
	m := newModel(t, messages.Scenario{Tokens: 6, Spawn: messages.NodeSelector{IDs: []string{"n002"}}})
	r := runOK(t, m, worker("n002", 1, 1))
	if got, want := r.shape(), "text*3 call*1 usage*1"; got != want {
		t.Fatalf("turn 1 = %s, want %s", got, want)
	}
	want := []model.ToolCall{jsonCall("n002-t1-c1", "spawn_subteam", `{"goal":"Deeper look at Aspect 1 of 6: key facts","roles":["researcher","critic"]}`)}
	if got := r.calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls = %+v, want %+v", got, want)
	}
	if got := runOK(t, m, worker("n002", 2, 1)).shape(); got != "text*3 usage*1" {
		t.Errorf("turn 2 = %s", got)
	}
	noTurn(t, m, worker("n002", 3, 1))
	if got := runOK(t, m, worker("n001", 1, 1)).shape(); got != "text*6 usage*1" {
		t.Errorf("n001 (not selected) = %s", got)
	}
}

func TestModel_Revision(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tokens, want int
	}{{24, 6}, {3, 1}, {1, 1}}
	for _, tt := range tests {
		m := newModel(t, messages.Scenario{Tokens: tt.tokens, ReasoningTokens: 4, ToolsPerNode: 1, FailNodes: messages.NodeSelector{Fraction: 1}})
		for _, req := range []model.Request{
			worker("n001", 1, 1), worker("n003", 2, 1), worker("n003", 9, 3), worker("n001/m1", 4, 1),
			{Role: model.RoleSubagent, AgentID: "n001.sub1", Turn: 3},
		} {
			req.Guidance = "Cover risks in more depth."
			r := runOK(t, m, req)
			if got, want := r.shape(), "text*"+strconv.Itoa(tt.want)+" usage*1"; got != want {
				t.Errorf("tokens %d, %s turn %d = %s, want %s", tt.tokens, req.AgentID, req.Turn, got, want)
			}
			if got := r.texts()[0]; got != "Revised per advice. " {
				t.Errorf("first text = %q", got)
			}
			if again := runOK(t, m, req); !reflect.DeepEqual(again.chunks, r.chunks) {
				t.Error("revision turn is not deterministic")
			}
		}
	}
}

func TestModel_AsyncWorker(t *testing.T) {
	t.Parallel()
	m := newModel(t, messages.Scenario{Tokens: 9, ReasoningTokens: 1, ToolsPerNode: 1, Delegations: &messages.DelegationScenario{Async: 3}})
	req := worker("n004", 1, 1)
	req.Context = []string{"x"}
	r := runOK(t, m, req)
	if got, want := r.shape(), "reasoning*1 text*4 call*4 usage*1"; got != want {
		t.Fatalf("turn 1 = %s, want %s", got, want)
	}
	wantCalls := []model.ToolCall{
		jsonCall("n004-t1-c1", "search", `{"query":"Aspect 1 of 6: key facts 1"}`),
		jsonCall("n004-t1-c2", "start_async_task", `{"task":"Async task 1 of n004"}`),
		jsonCall("n004-t1-c3", "start_async_task", `{"task":"Async task 2 of n004"}`),
		jsonCall("n004-t1-c4", "start_async_task", `{"task":"Async task 3 of n004"}`),
	}
	if got := r.calls(); !reflect.DeepEqual(got, wantCalls) {
		t.Fatalf("turn 1 calls = %+v, want %+v", got, wantCalls)
	}

	tests := []struct {
		name    string
		results []model.ToolResult
		want    []model.ToolCall
	}{
		{
			name: "all started",
			results: []model.ToolResult{
				{CallID: "n004-t1-c1", Name: "search", Content: `{"task_id":"nope"}`},
				{CallID: "n004-t1-c2", Name: "start_async_task", Content: `{"task_id":"t1"}`},
				{CallID: "n004-t1-c3", Name: "start_async_task", Content: `{"task_id":"t2"}`},
				{CallID: "n004-t1-c4", Name: "start_async_task", Content: `{"task_id":"t3"}`},
			},
			want: []model.ToolCall{
				jsonCall("n004-t2-c1", "update_async_task", `{"task_id":"t1","context":"Focus on Aspect 1 of 6: key facts"}`),
				jsonCall("n004-t2-c2", "check_async_task", `{"task_id":"t1"}`),
				jsonCall("n004-t2-c3", "check_async_task", `{"task_id":"t2"}`),
				jsonCall("n004-t2-c4", "check_async_task", `{"task_id":"t3"}`),
				jsonCall("n004-t2-c5", "list_async_tasks", `{}`),
				jsonCall("n004-t2-c6", "cancel_async_task", `{"task_id":"t3"}`),
			},
		},
		{
			name: "first and last failed",
			results: []model.ToolResult{
				{CallID: "n004-t1-c2", Name: "start_async_task", Content: "rejected by a human", IsError: true},
				{CallID: "n004-t1-c3", Name: "start_async_task", Content: `{"task_id":"t2"}`},
				{CallID: "n004-t1-c4", Name: "start_async_task", Content: `not json`},
			},
			want: []model.ToolCall{
				jsonCall("n004-t2-c1", "check_async_task", `{"task_id":"t2"}`),
				jsonCall("n004-t2-c2", "list_async_tasks", `{}`),
			},
		},
		{
			name:    "no results",
			results: nil,
			want:    []model.ToolCall{jsonCall("n004-t2-c1", "list_async_tasks", `{}`)},
		},
	}
	for _, tt := range tests {
		req := req
		req.Turn, req.ToolResults = 2, tt.results
		r := runOK(t, m, req)
		if got, want := r.shape(), "call*"+strconv.Itoa(len(tt.want))+" usage*1"; got != want {
			t.Errorf("%s: turn 2 = %s, want %s", tt.name, got, want)
		}
		if got := r.calls(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: turn 2 calls = %+v, want %+v", tt.name, got, tt.want)
		}
	}

	req.Turn, req.ToolResults = 3, []model.ToolResult{{Name: "check_async_task", Content: "done"}}
	r = runOK(t, m, req)
	if got, want := r.shape(), "text*5 usage*1"; got != want {
		t.Errorf("turn 3 = %s, want %s", got, want)
	}
	if got := r.texts()[0]; got != "Building on 1 inputs. " {
		t.Errorf("turn 3 first text = %q", got)
	}
	req.Turn = 4
	noTurn(t, m, req)

	// One task: no cancel; no other calls: still three turns.
	m = newModel(t, messages.Scenario{Tokens: 4, Delegations: &messages.DelegationScenario{Async: 1}})
	r = runOK(t, m, worker("n001", 1, 1))
	if got, want := r.shape(), "text*2 call*1 usage*1"; got != want {
		t.Errorf("async 1 turn 1 = %s, want %s", got, want)
	}
	req = worker("n001", 2, 1)
	req.ToolResults = []model.ToolResult{{CallID: "n001-t1-c1", Name: "start_async_task", Content: `{"task_id":"t9"}`}}
	want := []model.ToolCall{
		jsonCall("n001-t2-c1", "update_async_task", `{"task_id":"t9","context":"Focus on Aspect 1 of 6: key facts"}`),
		jsonCall("n001-t2-c2", "check_async_task", `{"task_id":"t9"}`),
		jsonCall("n001-t2-c3", "list_async_tasks", `{}`),
	}
	if got := runOK(t, m, req).calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("async 1 turn 2 calls = %+v, want %+v", got, want)
	}
	if got := runOK(t, m, worker("n001", 3, 1)).shape(); got != "text*2 usage*1" {
		t.Errorf("async 1 turn 3 = %s", got)
	}
	// A fail node still stops in turn 1 before any call.
	m = newModel(t, messages.Scenario{Tokens: 4, Delegations: &messages.DelegationScenario{Async: 1}, FailNodes: messages.NodeSelector{IDs: []string{"n001"}}})
	if r := run(t, m, t.Context(), worker("n001", 1, 1)); r.shape() != "text*2" || r.err == nil {
		t.Errorf("fail node streamed %s, %v", r.shape(), r.err)
	}
}

func TestModel_SubagentDelegationAndInjection(t *testing.T) {
	t.Parallel()
	m := newModel(t, messages.Scenario{Tokens: 16, Delegations: &messages.DelegationScenario{Depth: 2}})
	sub := func(id string, depth, turn int) model.Request {
		return model.Request{Role: model.RoleSubagent, AgentID: id, Goal: "g", Turn: turn, Depth: depth}
	}
	r := runOK(t, m, sub("n001.sub1", 1, 1))
	want := []model.ToolCall{jsonCall("n001.sub1-t1-c1", "delegate", `{"task":"Deeper task of n001.sub1"}`)}
	if got := r.calls(); r.shape() != "call*1 usage*1" || !reflect.DeepEqual(got, want) {
		t.Errorf("depth 1 turn 1 = %s %+v, want %+v", r.shape(), got, want)
	}
	if got := runOK(t, m, sub("n001.sub1", 1, 2)).shape(); got != "text*4 usage*1" {
		t.Errorf("depth 1 turn 2 = %s", got)
	}
	noTurn(t, m, sub("n001.sub1", 1, 3))
	if got := runOK(t, m, sub("n001.sub1.sub1", 2, 1)).shape(); got != "text*4 usage*1" {
		t.Errorf("depth 2 turn 1 = %s", got)
	}
	noTurn(t, m, sub("n001.sub1.sub1", 2, 2))

	for _, turn := range []int{1, 2, 7} {
		req := sub("n002.sub1", 1, turn)
		req.Injected = []string{"Focus on a", "Focus on b"}
		r := runOK(t, m, req)
		if got := r.shape(); got != "text*3 usage*1" {
			t.Errorf("injected turn %d = %s", turn, got)
		}
		if got := r.texts()[0]; got != "Noted 2 updates. " {
			t.Errorf("injected turn %d first text = %q", turn, got)
		}
	}
	// Without Delegations sub-agents never delegate.
	m = newModel(t, messages.Scenario{Tokens: 3})
	if got := runOK(t, m, sub("n001.sub1", 0, 1)).shape(); got != "text*1 usage*1" {
		t.Errorf("no delegations = %s", got)
	}
}

func TestModel_Debater(t *testing.T) {
	t.Parallel()
	m := newModel(t, messages.Scenario{Tokens: 10, Seed: 5, Debate: &messages.DebateScenario{Agents: 4}})
	debater := func(agent, round int, persona string, transcript []string) model.Request {
		return model.Request{Role: model.RoleDebater, AgentID: "n004:a" + strconv.Itoa(agent), Turn: 1, Round: round, Persona: persona, Transcript: transcript}
	}
	stances := map[int][]messages.Stance{ // agent → stance in rounds 1..3
		1: {"held", "held", "held"},
		2: {"held", "shifted", "shifted"},
		3: {"held", "conceded", "conceded"},
		4: {"held", "held", "held"},
		6: {"held", "shifted", "shifted"},
	}
	for agent, want := range stances {
		for round := 1; round <= 3; round++ {
			if got := scripted.DebateStance(agent, round); got != want[round-1] {
				t.Errorf("DebateStance(%d, %d) = %s, want %s", agent, round, got, want[round-1])
			}
			var transcript []string
			if round > 1 {
				transcript = []string{"one", "two", "three"}
			}
			r := runOK(t, m, debater(agent, round, "skeptic", transcript))
			texts := r.texts()
			if got, want := texts[0], "[skeptic] round "+strconv.Itoa(round)+": "; got != want {
				t.Errorf("a%d r%d first text = %q, want %q", agent, round, got, want)
			}
			words := 5
			if round > 1 {
				words++
				if texts[1] != "(answering 3 earlier lines) " {
					t.Errorf("a%d r%d second text = %q", agent, round, texts[1])
				}
			}
			if got, want := r.shape(), "text*"+strconv.Itoa(words+2)+" usage*1"; got != want {
				t.Errorf("a%d r%d = %s, want %s", agent, round, got, want)
			}
			if got, want := texts[len(texts)-1], "\nSTANCE: "+string(want[round-1]); got != want {
				t.Errorf("a%d r%d last text = %q, want %q", agent, round, got, want)
			}
			if !reflect.DeepEqual(runOK(t, m, debater(agent, round, "skeptic", transcript)).chunks, r.chunks) {
				t.Errorf("a%d r%d is not deterministic", agent, round)
			}
		}
	}
	// Rounds say different things; the persona defaults to the plan's.
	r1, r2 := runOK(t, m, debater(1, 2, "", nil)), runOK(t, m, debater(1, 3, "", nil))
	if r1.text()[len("[optimist] round 2: "):] == r2.text()[len("[optimist] round 3: "):] {
		t.Error("rounds 2 and 3 streamed the same words")
	}
	if !strings.HasPrefix(r1.text(), "[optimist] round 2: ") {
		t.Errorf("default persona text = %q", r1.text())
	}
	// At least three words.
	m = newModel(t, messages.Scenario{Tokens: 1})
	if got := runOK(t, m, debater(1, 1, "x", nil)).shape(); got != "text*5 usage*1" {
		t.Errorf("one token = %s", got)
	}
	noTurn(t, m, model.Request{Role: model.RoleDebater, AgentID: "n004:a1", Turn: 2, Round: 1})
}

func TestModel_Judge(t *testing.T) {
	t.Parallel()
	judge := func(round int) model.Request {
		return model.Request{Role: model.RoleJudge, AgentID: "n004:judge", Turn: 1, Round: round}
	}
	tests := []struct {
		name   string
		debate *messages.DebateScenario
		want   []bool // rounds 1..4
	}{
		{"consensus at 2", &messages.DebateScenario{Rounds: 4, ConsensusRound: 2}, []bool{false, true, true, true}},
		{"never", &messages.DebateScenario{Rounds: 4}, []bool{false, false, false, false}},
		{"no debate", nil, []bool{false, false, false, false}},
	}
	for _, tt := range tests {
		m := newModel(t, messages.Scenario{Debate: tt.debate})
		for round, want := range tt.want {
			r := runOK(t, m, judge(round+1))
			texts := r.texts()
			if got := r.shape(); got != "text*6 usage*1" {
				t.Errorf("%s round %d = %s", tt.name, round+1, got)
			}
			if got, want := texts[len(texts)-1], "\nCONSENSUS_REACHED: "+strconv.FormatBool(want); got != want {
				t.Errorf("%s round %d last text = %q, want %q", tt.name, round+1, got, want)
			}
		}
		noTurn(t, m, model.Request{Role: model.RoleJudge, AgentID: "n004:judge", Turn: 2, Round: 1})
	}
}

func TestModel_Advisor(t *testing.T) {
	t.Parallel()
	s := messages.Scenario{Advisor: &messages.AdvisorScenario{
		Redirects: 2,
		Halt:      messages.NodeSelector{IDs: []string{"n003"}},
		Malformed: messages.NodeSelector{IDs: []string{"n003", "n004"}},
	}}
	m := newModel(t, s)
	check := func(m *scripted.Model, id string, n int) string {
		t.Helper()
		r := runOK(t, m, model.Request{Role: model.RoleAdvisor, AgentID: id, Turn: n, Review: "the answer"})
		if r.count("reasoning") != 0 || r.count("call") != 0 {
			t.Errorf("advisor streamed %s", r.shape())
		}
		return r.text()
	}
	redirect := regexp.MustCompile(`^<signal>REDIRECT</signal> Cover [a-z ]+ in more depth\.$`)
	for _, id := range []string{"n001", "n003", "n004", "n003/m1", "n004.sub1"} {
		for n := 1; n <= 2; n++ {
			if got := check(m, id, n); !redirect.MatchString(got) {
				t.Errorf("%s check %d = %q, want a redirect", id, n, got)
			}
			if check(m, id, n) != check(newModel(t, s), id, n) {
				t.Errorf("%s check %d is not deterministic", id, n)
			}
		}
		want := map[string]string{
			"n003": "<signal>HALT</signal> The answer contradicts the plan.",
			"n004": "Looks fine to me, I suppose.",
		}[id]
		if want == "" {
			want = "<signal>CONTINUE</signal>"
		}
		for _, n := range []int{3, 40} {
			if got := check(m, id, n); got != want {
				t.Errorf("%s check %d = %q, want %q", id, n, got, want)
			}
		}
	}
	noTurn(t, m, model.Request{Role: model.RoleAdvisor, AgentID: "n001", Turn: 0})

	// Without an advisor scenario, every check continues.
	m = newModel(t, messages.Scenario{})
	if got := check(m, "n001", 1); got != "<signal>CONTINUE</signal>" {
		t.Errorf("no advisor scenario: %q", got)
	}
	// Fraction selectors are seeded; halt wins over malformed.
	s = messages.Scenario{Nodes: 40, Advisor: &messages.AdvisorScenario{Halt: messages.NodeSelector{Fraction: 0.25}, Malformed: messages.NodeSelector{Fraction: 1}}}
	m = newModel(t, s)
	halts := 0
	for _, n := range m.Plan().Nodes {
		switch got := check(m, n.ID, 1); got {
		case "<signal>HALT</signal> The answer contradicts the plan.":
			halts++
		case "Looks fine to me, I suppose.":
		default:
			t.Errorf("%s: %q", n.ID, got)
		}
	}
	if halts != 10 {
		t.Errorf("%d halts, want 10", halts)
	}
}

func TestModel_Steerer(t *testing.T) {
	t.Parallel()
	scripted1 := &messages.GraphDiff{Ops: []messages.DiffOp{
		{Op: messages.OpSplitNode, NodeID: "n005", Into: []messages.PlanNode{{ID: "n005a", Goal: "First half of a rather long goal"}, {ID: "n005b", Goal: "Second half"}}},
		{Op: messages.OpSetRole, NodeID: "n006", Role: "critic"},
	}}
	m := newModel(t, messages.Scenario{Steering: []messages.SteeringScript{
		{AtWave: 0, Note: "no diff here"},
		{AtWave: 1, Note: "split n005", Diff: scripted1},
		{AtWave: 2, Note: "split n005", Diff: &messages.GraphDiff{}},
	}})
	steer := func(note string) (messages.GraphDiff, result) {
		t.Helper()
		r := runOK(t, m, model.Request{Role: model.RoleSteerer, AgentID: "steering:1", Turn: 1, Note: note, Plan: &messages.Plan{}})
		if r.count("reasoning") != 2 || !strings.HasPrefix(r.shape(), "reasoning*2 text*") {
			t.Errorf("steerer streamed %s", r.shape())
		}
		for _, c := range r.texts() {
			if len(c) > scripted.MaxPlanChunk {
				t.Errorf("text chunk of %d bytes", len(c))
			}
		}
		var d messages.GraphDiff
		dec := json.NewDecoder(strings.NewReader(r.text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("diff JSON %q: %v", r.text(), err)
		}
		return d, r
	}
	if got, _ := steer("split n005"); !reflect.DeepEqual(&got, scripted1) {
		t.Errorf("scripted note gave %+v, want %+v", got, scripted1)
	}
	for _, note := range []string{"no diff here", "Look into the costs — all of them, in détail, please, and then some more words"} {
		got, r := steer(note)
		want := messages.GraphDiff{Ops: []messages.DiffOp{{Op: messages.OpAddNode, Node: &messages.PlanNode{ID: scripted.SteerNodeID(note), Goal: note}}}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("note %q gave %+v, want %+v", note, got, want)
		}
		if _, again := steer(note); !reflect.DeepEqual(again.chunks, r.chunks) {
			t.Errorf("note %q is not deterministic", note)
		}
	}
	id := regexp.MustCompile(`^s[0-9a-f]{8}$`)
	a, b := scripted.SteerNodeID("a"), scripted.SteerNodeID("b")
	if !id.MatchString(a) || !id.MatchString(b) || a == b || a != scripted.SteerNodeID("a") {
		t.Errorf("SteerNodeID: %q, %q", a, b)
	}
	noTurn(t, m, model.Request{Role: model.RoleSteerer, Turn: 2, Note: "x"})
}

// canonicalSources are the URLs SearchSources draws on, in normal form.
var canonicalSources = []string{
	"https://example.org/energy/report?a=1&b=2",
	"https://example.com/history/timeline?era=modern&page=3",
	"https://data.example.net/markets/prices?region=eu&year=2024",
	"https://example.org/climate/summary?lang=en&v=2",
	"https://research.example.com/networks/paper?id=42&rev=7",
	"https://example.net/health/study?cohort=b&n=1200",
	"https://archive.example.org/rivers/atlas?map=delta&scale=5",
	"https://example.com/policy/brief?issue=9&topic=water",
}

// normaliseURL lower-cases the scheme and host, drops the default port,
// the fragment and credentials, sorts the query and strips a trailing
// slash of the path.
func normaliseURL(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parse %q: %v", raw, err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	if p := u.Port(); p != "" && !(u.Scheme == "https" && p == "443") {
		host += ":" + p
	}
	u.Host, u.User, u.Fragment, u.RawFragment = host, nil, "", ""
	q := strings.Split(u.RawQuery, "&")
	slices.Sort(q)
	u.RawQuery = strings.Join(q, "&")
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u.String()
}

func TestSearchSources(t *testing.T) {
	t.Parallel()
	spellings := map[string]map[string]bool{} // canonical → spellings
	titles := map[string]string{}
	for i := range 200 {
		q := "Aspect " + strconv.Itoa(i) + " of 200: key facts 1"
		got := scripted.SearchSources(q)
		if !reflect.DeepEqual(got, scripted.SearchSources(q)) {
			t.Fatalf("SearchSources(%q) is not deterministic", q)
		}
		if len(got) != 2 {
			t.Fatalf("SearchSources(%q) = %d sources, want 2", q, len(got))
		}
		var canon []string
		for _, s := range got {
			c := normaliseURL(t, s.URL)
			k := slices.Index(canonicalSources, c)
			if k < 0 {
				t.Fatalf("%q normalises to %q, not a pool source", s.URL, c)
			}
			if want := "Source " + strconv.Itoa(k+1) + ": "; !strings.HasPrefix(s.Title, want) {
				t.Errorf("%q title = %q, want prefix %q", s.URL, s.Title, want)
			}
			if prev, ok := titles[c]; ok && prev != s.Title {
				t.Errorf("%s has titles %q and %q", c, prev, s.Title)
			}
			titles[c] = s.Title
			if spellings[c] == nil {
				spellings[c] = map[string]bool{}
			}
			spellings[c][s.URL] = true
			canon = append(canon, c)
		}
		if canon[0] == canon[1] {
			t.Errorf("SearchSources(%q) returned one source twice: %v", q, got)
		}
	}
	if len(spellings) != len(canonicalSources) {
		t.Errorf("200 queries drew on %d sources, want all %d", len(spellings), len(canonicalSources))
	}
	for c, sp := range spellings {
		if len(sp) != 7 {
			t.Errorf("%s appeared in %d spellings, want all 7: %v", c, len(sp), sp)
		}
	}
}
