// Package scripted is the embedded default model of Conclave: a
// deterministic implementation of model.Model whose behaviour is fully set by
// a messages.Scenario.
//
// The director outputs the plan of PlanFor, which may hold team nodes (a
// nested plan) and debate nodes (a debate config); workers reason, stream
// text, call the search, delegate, ask_human, spawn_subteam and async task
// tools and, when the scenario says so, fail or panic halfway through their
// output; team members are plain workers; sub-agents stream text and may
// delegate deeper; debaters argue and declare a stance, judges report
// consensus, the advisor answers with a signal, the steerer turns a note
// into a graph diff and the synthesiser streams the answer. Model.Stream
// documents every role's turns. All text is drawn from a fixed vocabulary
// by a PRNG seeded from the scenario seed, the agent id and the turn (and
// the round, for debaters and judges), so a restarted attempt streams
// exactly the same chunks as the attempt before it. SearchResult and
// SearchSources are the search tool's result text and sources.
//
// A scenario whose team, debate, spawn, steering, advisor and delegation
// fields are zero gets exactly the plan and the chunks it got before those
// fields existed.
//
// Tokens are counted in chunks: every Text or Reasoning chunk is one output
// token, and input tokens are the words of the request (goal, question,
// context, tool results, transcript, review, guidance, note and injected
// updates).
package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// Name is the model name reported by Model.Name and in every Usage chunk.
const Name = "scripted"

// MaxPlanChunk is the largest Text chunk, in bytes, of the director's plan JSON.
const MaxPlanChunk = 64

// ErrClosed is returned by Recv after Close.
var ErrClosed = errors.New("scripted: stream closed")

var (
	_ model.Model   = (*Model)(nil)
	_ model.Stream  = (*stream)(nil)
	_ model.Factory = (*Factory)(nil).Model
)

// Panic is the value a panic node panics with (see Scenario.PanicNodes).
type Panic struct {
	NodeID  string
	Attempt int
}

func (p *Panic) Error() string {
	return "scripted: panic of node " + p.NodeID + " on attempt " + strconv.Itoa(p.Attempt)
}

// Model is the scripted model of one scenario. It is immutable after New
// and safe for concurrent use by many goroutines.
type Model struct {
	s     messages.Scenario
	delay time.Duration

	plan       messages.Plan
	planChunks []string // the plan JSON, cut into chunks of at most MaxPlanChunk bytes
	reasoning  []string // the director's reasoning chunks

	failIDs, panicIDs []string // sorted, disjoint
	fail, panics      map[string]struct{}
	transient         map[string]struct{}
	panicMembers      map[string]struct{} // Scenario.PanicMembers
	nodeIndex         map[string]int      // plan node id → 0-based position
	// nonLeaf is the number of team and debate nodes: they are the first
	// nonLeaf nodes of the plan, and no worker runs them.
	nonLeaf int

	spawn           map[string]struct{} // workers that call spawn_subteam
	halt, malformed map[string]struct{} // the advisor's HALT and malformed answers
	steer           map[string][]string // scripted steering note → its diff JSON, chunked
}

// Factory builds the scripted models of runs. A model is immutable and
// depends only on its scenario, so runs with the same scenario share one:
// a Factory keeps the models of its last cacheSize scenarios. Its Model
// method is a model.Factory; an engine owns the Factory it was given (no
// cache is shared between engines). Safe for concurrent use.
type Factory struct {
	mu    sync.Mutex
	m     map[string]*Model
	order []string // insertion order, for eviction
}

// NewFactory returns a Factory with an empty cache.
func NewFactory() *Factory { return &Factory{m: map[string]*Model{}} }

const cacheSize = 64

// Model returns the scripted model of scenario s (defaults applied).
func (f *Factory) Model(s messages.Scenario) (model.Model, error) {
	s = s.WithDefaults()
	key, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	f.mu.Lock()
	m, ok := f.m[string(key)]
	f.mu.Unlock()
	if ok {
		return m, nil
	}
	m, err = New(s)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.m[string(key)]; !ok {
		if len(f.order) == cacheSize {
			delete(f.m, f.order[0])
			f.order = f.order[1:]
		}
		f.m[string(key)] = m
		f.order = append(f.order, string(key))
	}
	return m, nil
}

// New applies the scenario defaults, validates the scenario and precomputes
// the plan, the nodes that fail or panic and the other selections.
//
// A selector with IDs selects those ids (ids that are not in the plan are
// ignored; IDs win over Fraction when both are set). A selector with a
// Fraction f > 0 selects exactly round(f*Nodes) nodes, at least one, by a
// shuffle seeded from the scenario seed (each selector has its own salt).
// Team and debate nodes are then dropped from every selection, since no
// worker runs them: with Teams or Debate set, a fraction can select fewer
// nodes. Selections only ever hold top-level plan ids, never a team
// member's "T/X". A node selected both to fail and to panic fails:
// PanicNodes never lists a node of FailNodes.
func New(s messages.Scenario) (*Model, error) {
	s = s.WithDefaults()
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	plan := PlanFor(s)
	js, err := json.Marshal(plan)
	if err != nil {
		return nil, fmt.Errorf("scripted: encode plan: %w", err)
	}
	m := &Model{
		s:          s,
		delay:      time.Duration(s.TokenDelayMS) * time.Millisecond,
		plan:       plan,
		planChunks: splitChunks(string(js), MaxPlanChunk),
		reasoning:  directorReasoning(s),
		failIDs:    selectLeaves(s, s.FailNodes, "fail"),
		panicIDs:   selectLeaves(s, s.PanicNodes, "panic"),
		nonLeaf:    nonLeafCount(s),
		spawn:      toSet(selectLeaves(s, s.Spawn, "spawn")),
	}
	m.fail = toSet(m.failIDs)
	m.panicIDs = slices.DeleteFunc(m.panicIDs, func(id string) bool {
		_, ok := m.fail[id]
		return ok
	})
	m.panics = toSet(m.panicIDs)
	m.transient = toSet(selectLeaves(s, s.TransientNodes, "transient"))
	m.panicMembers = toSet(s.PanicMembers)
	m.nodeIndex = make(map[string]int, len(plan.Nodes))
	for i, n := range plan.Nodes {
		m.nodeIndex[n.ID] = i
	}
	if a := s.Advisor; a != nil {
		m.halt = toSet(selectLeaves(s, a.Halt, "advisor-halt"))
		m.malformed = toSet(selectLeaves(s, a.Malformed, "advisor-malformed"))
	}
	for _, st := range s.Steering {
		if st.Diff == nil {
			continue
		}
		if _, ok := m.steer[st.Note]; ok {
			continue // the first scripted diff of a note wins
		}
		js, err := json.Marshal(st.Diff)
		if err != nil {
			return nil, fmt.Errorf("scripted: encode the steering diff of %q: %w", st.Note, err)
		}
		if m.steer == nil {
			m.steer = make(map[string][]string)
		}
		m.steer[st.Note] = splitChunks(string(js), MaxPlanChunk)
	}
	return m, nil
}

// Name returns "scripted".
func (m *Model) Name() string { return Name }

// Plan returns the plan the director outputs. It shares no memory with m.
func (m *Model) Plan() messages.Plan { return m.plan.Clone() }

// FailNodes returns the ids of the nodes that fail, sorted.
func (m *Model) FailNodes() []string { return slices.Clone(m.failIDs) }

// PanicNodes returns the ids of the nodes that panic, sorted. It never lists
// a fail node.
func (m *Model) PanicNodes() []string { return slices.Clone(m.panicIDs) }

// SpawnNodes returns the ids of the workers that call spawn_subteam, sorted.
func (m *Model) SpawnNodes() []string { return sortedKeys(m.spawn) }

// anyTurn is the turn count of a turn that is accepted whatever its number
// (an advisor check, a revision turn, a sub-agent's injected update).
const anyTurn = math.MaxInt

// Stream starts one turn. The turns each role has:
//
//   - director: turn 1 streams three Reasoning chunks, then the plan JSON
//     (PlanFor) in Text chunks of at most MaxPlanChunk bytes.
//   - worker (a top-level leaf node, id "nNNN", or a node a steering diff
//     added): with no calls, turn 1 streams ReasoningTokens Reasoning chunks
//     and Tokens Text chunks. With calls, turn 1 streams the reasoning and
//     Tokens/2 Text chunks, then the tool calls, in this order:
//     ToolsPerNode search calls, SubagentsPerNode delegate calls, the
//     node's share of Approvals (search) and InfoRequests (ask_human), one
//     spawn_subteam {"goal": "Deeper look at <goal>", "roles":
//     ["researcher", "critic"]} when Spawn selects the node, and
//     Delegations.Async start_async_task {"task": "Async task <j> of <id>"},
//     and one call of each tool of Calls, in order, its arguments made up by
//     ArgsFor from the tool's schema in req.Tools ({} when req.Tools lacks
//     it), drawn from a PRNG seeded by the seed, the agent, the tool and
//     its position.
//     Without async tasks, turn 2 (whatever its tool results) streams the
//     rest of the text. With k = Delegations.Async > 0 the worker has three
//     turns: turn 2 streams only calls — update_async_task {"task_id":
//     <first>, "context": "Focus on <goal>"}, check_async_task {"task_id"}
//     for each task, list_async_tasks {}, and cancel_async_task {"task_id":
//     <last>} when there are two or more tasks — and turn 3 streams the rest
//     of the text. The task ids are read from the turn's results named
//     start_async_task, in order ({"task_id": "..."}); a start whose result
//     is an error, or has no task_id, has no id, and the calls that need it
//     are left out (list_async_tasks is always made). When the request has
//     context, the first Text chunk of the last turn is
//     "Building on <k> inputs. "; it is one of the Tokens chunks. Fail and
//     panic nodes stop in turn 1, after the reasoning and Tokens/2 Text
//     chunks, before any tool call.
//   - team member (a worker whose AgentID holds '/', such as "n001/m1" or a
//     spawned sub-team's member): turn 1 streams ReasoningTokens Reasoning
//     chunks and Tokens Text chunks, with the context lead; it makes no
//     call and no selector (fail, panic, spawn, advisor) ever matches it.
//     A member of PanicMembers streams one Text chunk and panics instead,
//     on its attempts up to PanicAttempts.
//   - a worker or sub-agent turn with Guidance (an advisor's redirect),
//     whatever its number: max(1, Tokens/4) Text chunks, the first
//     "Revised per advice. ". It never fails, panics or calls a tool, and
//     Guidance wins over Injected.
//   - subagent: turn 1 streams max(1, Tokens/4) Text chunks. When
//     Delegations.Depth > Depth, turn 1 instead calls delegate {"task":
//     "Deeper task of <id>"} and turn 2 streams the text. A turn with
//     Injected context, whatever its number, streams
//     "Noted <n> updates. " and max(1, Tokens/8) more Text chunks.
//   - synthesizer (run answer, team and debate syntheses): turn 1 streams
//     "Answer to: <question> — " and then SynthesisTokens Text chunks.
//   - debater (AgentID "<node>:<agent>", such as "n004:a2"): turn 1 streams
//     "[<persona>] round <r>: ", "(answering <n> earlier lines) " when the
//     Transcript has n > 0 lines, max(3, Tokens/2) words, and then
//     "\nSTANCE: <stance>" (DebateStance). Persona defaults to the plan's
//     persona of the agent. A debater of PanicMembers streams its lead and
//     max(1, Tokens/4) words and panics instead, in round 1, on its
//     attempts up to PanicAttempts.
//   - judge (AgentID "<node>:judge"): turn 1 streams "Judging round <r>: ",
//     four words and "\nCONSENSUS_REACHED: true" when Debate.ConsensusRound
//     > 0 and Round >= ConsensusRound, else "\nCONSENSUS_REACHED: false".
//   - advisor (AgentID the checked agent, Turn the 1-based check number of
//     that agent, any Turn accepted): "<signal>REDIRECT</signal> Cover
//     <aspect> in more depth." for checks up to Advisor.Redirects, then
//     "<signal>HALT</signal> The answer contradicts the plan." for an
//     Advisor.Halt node, "Looks fine to me, I suppose." (no signal) for an
//     Advisor.Malformed node, else "<signal>CONTINUE</signal>" (always, with
//     no Advisor scenario). Halt wins over Malformed.
//   - steerer: turn 1 streams two Reasoning chunks, then a graph diff JSON
//     in Text chunks of at most MaxPlanChunk bytes: the Diff of the first
//     Steering entry whose Note is Note and that has a Diff, else one
//     add_node of {"id": SteerNodeID(Note), "goal": Note}.
//
// Debaters' and judges' words are also seeded by the round, so each round
// says something new. A panic node panics on the attempts up to
// PanicAttempts (an Attempt below 1 counts as 1) and runs normally after.
// Every turn ends with one *model.Usage chunk. The scenario alone decides
// which tools a worker calls; req.Tools only gives the schemas of Calls. A
// turn the role does not have, or an unknown role, is an error wrapping
// model.ErrModel; a done ctx is returned as ctx.Err().
func (m *Model) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st := &stream{ctx: ctx, delay: m.delay}
	h := newHash(m.s.Seed).str(req.AgentID).int(int64(req.Turn))
	if req.Role == model.RoleDebater || req.Role == model.RoleJudge {
		h = h.int(int64(req.Round))
	}
	st.pcg.Seed(seeds(h))
	st.usage.InputTokens = inputWords(req)
	if n := m.s.PrefillProgress; n > 0 && (req.Role == model.RoleWorker || req.Role == model.RoleSynthesizer) {
		if req.Turn > 1 {
			st.cached = st.usage.InputTokens / 2 // the earlier turns' prompt
		}
		st.add(step{kind: kindProgress, n: n})
	}

	turns := 1
	switch req.Role {
	case model.RoleDirector:
		if req.Turn == 1 {
			st.add(step{kind: kindReasoning, lead: m.reasoning})
			st.add(step{kind: kindText, lead: m.planChunks})
		}
	case model.RoleWorker:
		turns = m.worker(st, req)
	case model.RoleSubagent:
		turns = m.subagent(st, req)
	case model.RoleSynthesizer:
		if req.Turn == 1 {
			st.add(step{kind: kindText, lead: []string{"Answer to: " + req.Question + filesNote(req.Files) + " — "}, n: m.s.SynthesisTokens})
		}
	case model.RoleDebater:
		switch {
		case len(req.Tools) > 0 && req.Turn == 1: // a debater with tools calls each, then argues
			c := callList{req: &req}
			for k, d := range req.Tools {
				c.add(d.Name, m.argsFor(req, d.Name, k))
			}
			st.add(step{kind: kindCalls, calls: c.calls})
			turns = 2
		case len(req.Tools) > 0:
			turns = 2
			if req.Turn == 2 {
				m.debater(st, req)
			}
		case req.Turn == 1:
			m.debater(st, req)
		}
	case model.RoleJudge:
		if req.Turn == 1 {
			m.judge(st, req)
		}
	case model.RoleAdvisor:
		turns = anyTurn
		m.advisor(st, req)
	case model.RoleSteerer:
		if req.Turn == 1 {
			m.steerer(st, req)
		}
	default:
		return nil, fmt.Errorf("%w: scripted: unknown role %d", model.ErrModel, int(req.Role))
	}
	if req.Turn < 1 || req.Turn > turns {
		has := "it has " + strconv.Itoa(turns)
		if turns == anyTurn {
			has = "turns are 1-based"
		}
		return nil, fmt.Errorf("%w: scripted: %s %s has no turn %d (%s)", model.ErrModel, req.Role, req.AgentID, req.Turn, has)
	}
	return st, nil
}

// worker adds the steps of a worker turn to st and returns the number of
// turns a worker has; it adds nothing for a turn beyond that number.
func (m *Model) worker(st *stream, req model.Request) (turns int) {
	t := m.s.Tokens
	if req.Guidance != "" {
		st.add(revisionStep(t))
		return anyTurn
	}
	if isMember(req.AgentID) {
		if req.Turn == 1 {
			st.add(step{kind: kindReasoning, n: m.s.ReasoningTokens})
			if m.memberPanics(req) {
				st.add(textStep(min(t, 1), false, nil))
				st.add(step{kind: kindPanic, panic: &Panic{NodeID: req.AgentID, Attempt: max(req.Attempt, 1)}})
				return 1
			}
			st.add(textStep(t, true, req.Context))
		}
		return 1
	}
	x := m.extraCalls(req.AgentID)
	_, spawns := m.spawn[req.AgentID]
	async := m.asyncTasks()
	calls := m.s.ToolsPerNode + m.s.SubagentsPerNode + x.approvals + x.asks + x.choices + async + len(m.s.Calls) + m.consults()
	if spawns {
		calls++
	}
	turns = 1
	switch {
	case async > 0:
		turns = 3
	case calls > 0:
		turns = 2
	}
	switch req.Turn {
	case 1:
		st.add(step{kind: kindReasoning, n: m.s.ReasoningTokens})
		id := req.AgentID
		attempt := max(req.Attempt, 1)
		_, fails := m.fail[id]
		_, panics := m.panics[id]
		panics = panics && attempt <= m.s.PanicAttempts
		_, transient := m.transient[id]
		transient = transient && attempt <= m.s.TransientAttempts
		switch {
		case fails:
			st.add(textStep(t/2, turns == 1, req.Context))
			st.add(step{kind: kindFail, err: fmt.Errorf("%w: scripted failure of node %s", model.ErrModel, id)})
		case transient:
			st.add(textStep(t/2, turns == 1, req.Context))
			st.add(step{kind: kindFail, err: fmt.Errorf("%w: %w: scripted rate limit of node %s, attempt %d", model.ErrModel, model.ErrTransient, id, attempt)})
		case panics:
			st.add(textStep(t/2, turns == 1, req.Context))
			st.add(step{kind: kindPanic, panic: &Panic{NodeID: id, Attempt: attempt}})
		case calls > 0:
			st.add(textStep(t/2, false, nil))
			st.add(step{kind: kindCalls, calls: m.toolCalls(req, spawns)})
		default:
			st.add(textStep(t, true, req.Context))
		}
	case 2:
		switch turns {
		case 2:
			st.add(textStep(t-t/2, true, req.Context))
		case 3:
			st.add(step{kind: kindCalls, calls: asyncCalls(req)})
		}
	case 3:
		if turns == 3 {
			st.add(textStep(t-t/2, true, req.Context))
		}
	}
	return turns
}

// memberPanics reports whether the turn of a team member or debate agent
// panics: Scenario.PanicMembers names it and its attempt is at most
// PanicAttempts.
func (m *Model) memberPanics(req model.Request) bool {
	_, ok := m.panicMembers[req.AgentID]
	return ok && max(req.Attempt, 1) <= m.s.PanicAttempts
}

// isMember reports whether a worker id is a team member's ("T/X").
func isMember(id string) bool { return strings.IndexByte(id, '/') >= 0 }

// asyncTasks is Delegations.Async.
func (m *Model) asyncTasks() int {
	if d := m.s.Delegations; d != nil {
		return d.Async
	}
	return 0
}

// revisedLead leads a revision turn.
var revisedLead = []string{"Revised per advice. "}

// revisionStep is a turn that follows an advisor's redirect:
// max(1, tokens/4) Text chunks, the first of them revisedLead.
func revisionStep(tokens int) step {
	return step{kind: kindText, lead: revisedLead, n: max(1, tokens/4) - 1}
}

// textStep streams n Text chunks; when lastTurn and there is context, the
// first of them mentions the context.
func textStep(n int, lastTurn bool, context []string) step {
	s := step{kind: kindText, n: n}
	if lastTurn && len(context) > 0 && n > 0 {
		s.lead = []string{"Building on " + strconv.Itoa(len(context)) + " inputs. "}
		s.n--
	}
	return s
}

// extras are a node's share of the scenario's Approvals (extra search
// calls), RiskyApprovals (publish calls among them), InfoRequests
// (ask_human calls) and Choices (ask_choice calls).
type extras struct{ approvals, risky, asks, choices int }

// extraCalls is how many of the scenario's extra calls fall on node id:
// one per leaf node in id order, wrapping around (team and debate nodes
// have no worker and get none).
func (m *Model) extraCalls(id string) extras {
	i, ok := m.nodeIndex[id]
	if !ok {
		return extras{}
	}
	return extraShares(m.s, m.nonLeaf, i)
}

// extraShares is extraCalls for the node at index i of the plan (nonLeaf
// of whose nodes are teams and debates).
func extraShares(s messages.Scenario, nonLeaf, i int) extras {
	leaves := s.Nodes - nonLeaf
	i -= nonLeaf
	if i < 0 || leaves <= 0 {
		return extras{}
	}
	share := func(total int) int {
		n := total / leaves
		if i < total%leaves {
			n++
		}
		return n
	}
	return extras{share(s.Approvals), share(s.RiskyApprovals), share(s.InfoRequests), share(s.Choices)}
}

// toolCalls returns the calls of a worker's first turn: ToolsPerNode search
// calls, then SubagentsPerNode delegate calls, then the node's share of the
// scenario's Approvals (search calls), InfoRequests (ask_human calls) and
// Choices (ask_choice calls), then spawn_subteam when spawns, then Delegations.Async start_async_task
// calls.
func (m *Model) toolCalls(req model.Request, spawns bool) []model.ToolCall {
	goal := strings.Join(strings.Fields(req.Goal), " ")
	x := m.extraCalls(req.AgentID)
	approvals, risky, asks := x.approvals, x.risky, x.asks
	async := m.asyncTasks()
	c := callList{req: &req, calls: make([]model.ToolCall, 0, m.s.ToolsPerNode+m.s.SubagentsPerNode+approvals+asks+x.choices+1+async+len(m.s.Calls))}
	for k := 1; k <= m.s.ToolsPerNode; k++ {
		c.add(model.ToolSearch, searchArgs{Query: strings.TrimSpace(goal + " " + strconv.Itoa(k)), Steps: m.s.ToolProgressSteps, StepMS: m.s.ToolStepMS})
	}
	for k := 1; k <= m.s.SubagentsPerNode; k++ {
		args := delegateArgs{Task: "Sub-task " + strconv.Itoa(k) + " of " + req.AgentID}
		if r := m.s.Remote; r != nil && r.Delegate {
			args.Agent = r.Agent // the remote agent takes the task
		}
		c.add(model.ToolDelegate, args)
	}
	for k := 1; k <= approvals; k++ {
		if k <= risky { // the node's share of RiskyApprovals comes first
			c.add(model.ToolPublish, publishArgs{Text: strings.TrimSpace(goal + " report " + strconv.Itoa(k))})
			continue
		}
		c.add(model.ToolSearch, searchArgs{Query: strings.TrimSpace(goal + " gated " + strconv.Itoa(k))})
	}
	for k := 1; k <= asks; k++ {
		c.add(model.ToolAskHuman, askArgs{Question: "What should " + req.AgentID + " assume about " + goal + "?", Context: "question " + strconv.Itoa(k) + " of " + req.AgentID})
	}
	for k := 1; k <= x.choices; k++ {
		c.add(model.ToolAskChoice, choiceArgs{Question: "How should " + req.AgentID + " approach " + goal + "?",
			Context: "choice " + strconv.Itoa(k) + " of " + req.AgentID, Options: choiceOptions, Multiple: m.s.MultipleChoice})
	}
	if spawns {
		c.add(model.ToolSpawnSubteam, spawnArgs{Goal: "Deeper look at " + goal, Roles: spawnRoles})
	}
	for k := 1; k <= async; k++ {
		c.add(model.ToolStartAsyncTask, delegateArgs{Task: "Async task " + strconv.Itoa(k) + " of " + req.AgentID})
	}
	for k, name := range m.s.Calls {
		c.add(name, m.argsFor(req, name, k))
	}
	for k := 1; k <= m.consults(); k++ {
		c.add(model.ToolConsultAdvisor, consultArgs{Question: "How should " + req.AgentID + " deepen " + goal + "? (" + strconv.Itoa(k) + ")"})
	}
	return c.calls
}

// consults is how many consult_advisor calls each worker makes
// (Advisor.Consults).
func (m *Model) consults() int {
	if a := m.s.Advisor; a != nil {
		return a.Consults
	}
	return 0
}

type consultArgs struct {
	Question string `json:"question"`
}

// argsFor makes up the arguments of call k of Scenario.Calls, to tool
// name, from the tool's schema in req.Tools ({} for a tool it lacks): the
// same for the same seed, agent, tool and position.
func (m *Model) argsFor(req model.Request, name string, k int) json.RawMessage {
	var schema json.RawMessage
	for _, d := range req.Tools {
		if d.Name == name {
			schema = d.Schema
			break
		}
	}
	pcg := rand.NewPCG(seeds(newHash(m.s.Seed).str("calls").str(req.AgentID).str(name).int(int64(k))))
	return ArgsFor(schema, rand.New(pcg))
}

// asyncCalls returns the calls of an async worker's second turn, from the
// results of its start_async_task calls (see Stream).
func asyncCalls(req model.Request) []model.ToolCall {
	var ids []string // one per start, in order; "" when it gave no task id
	for _, r := range req.ToolResults {
		if r.Name != model.ToolStartAsyncTask {
			continue
		}
		var v taskArgs
		if r.IsError || json.Unmarshal([]byte(r.Content), &v) != nil {
			v.TaskID = ""
		}
		ids = append(ids, v.TaskID)
	}
	goal := strings.Join(strings.Fields(req.Goal), " ")
	c := callList{req: &req, calls: make([]model.ToolCall, 0, len(ids)+3)}
	if len(ids) > 0 && ids[0] != "" {
		c.add(model.ToolUpdateAsyncTask, updateArgs{TaskID: ids[0], Context: "Focus on " + goal})
	}
	for _, id := range ids {
		if id != "" {
			c.add(model.ToolCheckAsyncTask, taskArgs{TaskID: id})
		}
	}
	c.add(model.ToolListAsyncTasks, struct{}{})
	if last := len(ids) - 1; last >= 1 && ids[last] != "" {
		c.add(model.ToolCancelAsyncTask, taskArgs{TaskID: ids[last]})
	}
	return c.calls
}

// callList builds the calls of one turn; call k (1-based) of turn t of
// agent a has the id "<a>-t<t>-c<k>".
type callList struct {
	req   *model.Request
	calls []model.ToolCall
}

func (c *callList) add(name string, args any) {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err) // unreachable: args hold strings and lists of strings, or JSON from ArgsFor
	}
	id := c.req.AgentID + "-t" + strconv.Itoa(c.req.Turn) + "-c" + strconv.Itoa(len(c.calls)+1)
	c.calls = append(c.calls, model.ToolCall{ID: id, Name: name, Args: b})
}

// spawnRoles are the roles of every scripted spawn_subteam call.
var spawnRoles = []string{"researcher", "critic"}

type askArgs struct {
	Question string `json:"question"`
	Context  string `json:"context"`
}

// choiceOptions are the options of every scripted ask_choice call.
var choiceOptions = []messages.ChoiceOption{
	{ID: "broad", Label: "Broad survey", Description: "Cover every source briefly"},
	{ID: "deep", Label: "Deep dive", Description: "Follow the strongest source in depth"},
	{ID: "skip", Label: "Skip this aspect"},
}

type choiceArgs struct {
	Question string                  `json:"question"`
	Context  string                  `json:"context"`
	Options  []messages.ChoiceOption `json:"options"`
	Multiple bool                    `json:"multiple,omitempty"`
}

type searchArgs struct {
	Query  string `json:"query"`
	Steps  int    `json:"steps,omitempty"`
	StepMS int    `json:"step_ms,omitempty"`
}

type publishArgs struct {
	Text string `json:"text"`
}

type delegateArgs struct {
	Task  string `json:"task"`
	Agent string `json:"agent,omitempty"`
}

type spawnArgs struct {
	Goal  string   `json:"goal"`
	Roles []string `json:"roles"`
}

type taskArgs struct {
	TaskID string `json:"task_id"`
}

type updateArgs struct {
	TaskID  string `json:"task_id"`
	Context string `json:"context"`
}

// SearchResult is the deterministic result text of the search tool for
// query; the runtime calls it to execute the tool "search".
func SearchResult(query string) string {
	var pcg rand.PCG
	pcg.Seed(seeds(newHash(0).str("search").str(query)))
	var b strings.Builder
	b.WriteString("Results for ")
	b.WriteString(strconv.Quote(query))
	b.WriteString(": ")
	for i := range 12 {
		w := vocabulary[pcg.Uint64()>>58]
		if i == 11 {
			w = w[:len(w)-1] + "."
		}
		b.WriteString(w)
	}
	return b.String()
}

// PlanFor returns the plan the director outputs for s. s should already be
// defaulted and valid; PlanFor applies the defaults again (they are
// idempotent) and clamps Waves to 1..Nodes rather than failing.
//
// Node ids are n001, n002, ... zero-padded to max(3, digits(Nodes)). The
// nodes are spread over Waves levels, the first Nodes%Waves levels getting
// one node more than the others, and numbered in level order. A node of
// level k > 0 depends on min(FanIn, size of level k-1) distinct nodes of
// level k-1 chosen by a PRNG seeded from the seed and its id, so the wave of
// every node is its level.
//
// The first Teams nodes (in id order) are team nodes and the next
// Debate.Nodes nodes are debate nodes; they keep their ids, goals and deps
// and have no tools. A team's nested plan has TeamSize nodes m1..mK with
// goals "Part <j> of <team goal>"; when K >= 2 they form two waves, the
// first ceil(K/2) members, then the others, each of which depends on
// min(FanIn, ceil(K/2)) members of the first wave chosen by a PRNG seeded
// from the seed, the team id and its own id. A debate node's config has
// Debate.Agents agents a1..aN with the personas optimist, skeptic,
// pragmatist and historian, in that order, and the scenario's Rounds,
// Judge, MinRounds and CompactAfter.
//
// The other nodes are leaves. Their tools are search (ToolsPerNode > 0)
// and delegate (SubagentsPerNode > 0), then search (if not yet), publish
// ask_human and ask_choice for their share of Approvals, RiskyApprovals,
// InfoRequests and Choices, then spawn_subteam for the nodes
// Spawn selects, then the five async task tools when Delegations.Async > 0,
// then the tools of Calls they do not have yet. A leaf Remote selects
// names Remote.Agent and has no tools.
func PlanFor(s messages.Scenario) messages.Plan {
	s = s.WithDefaults()
	if s.Nodes < 1 {
		return messages.Plan{Nodes: []messages.PlanNode{}}
	}
	waves := min(max(s.Waves, 1), s.Nodes)
	width := idWidth(s.Nodes)
	var tools []string
	if s.ToolsPerNode > 0 {
		tools = append(tools, model.ToolSearch)
	}
	if s.SubagentsPerNode > 0 {
		tools = append(tools, model.ToolDelegate)
	}
	teams, nonLeaf := min(max(s.Teams, 0), s.Nodes), nonLeafCount(s)
	spawn := toSet(selectLeaves(s, s.Spawn, "spawn"))
	async := s.Delegations != nil && s.Delegations.Async > 0
	var remote map[string]struct{}
	if s.Remote != nil {
		remote = toSet(selectLeaves(s, s.Remote.Nodes, "remote"))
	}

	nodes := make([]messages.PlanNode, 0, s.Nodes)
	pcg := rand.NewPCG(0, 0)
	r := rand.New(pcg)
	var picked []int
	prevStart, prevSize := 0, 0 // index in nodes and size of the previous level
	for level := range waves {
		size := s.Nodes / waves
		if level < s.Nodes%waves {
			size++
		}
		start := len(nodes)
		for range size {
			i := len(nodes) + 1
			id := nodeID(i, width)
			pcg.Seed(seeds(newHash(s.Seed).str("node").str(id)))
			n := messages.PlanNode{
				ID:   id,
				Goal: "Aspect " + strconv.Itoa(i) + " of " + strconv.Itoa(s.Nodes) + ": " + aspects[r.IntN(len(aspects))],
			}
			if level > 0 {
				picked = pickDistinct(r, prevSize, min(s.FanIn, prevSize), picked[:0])
				n.Deps = make([]string, len(picked))
				for j, p := range picked {
					n.Deps[j] = nodes[prevStart+p].ID
				}
				slices.Sort(n.Deps) // ids have one width: lexical order is numeric order
			}
			switch {
			case i <= teams:
				n.Kind = messages.KindTeam
				n.Team = teamPlan(s, id, n.Goal)
			case i <= nonLeaf:
				n.Kind = messages.KindDebate
				n.Debate = debateConfig(s.Debate)
			case remote != nil && has(remote, id):
				n.Agent = s.Remote.Agent // run by the remote agent: no tools
			default:
				n.Tools = slices.Clone(tools)
				// The plan names every tool the node's worker calls, so that
				// what an approver is shown (evidence) is what happens.
				x := extraShares(s, nonLeaf, i-1)
				approvals, risky, asks := x.approvals, x.risky, x.asks
				if approvals > risky && !slices.Contains(n.Tools, model.ToolSearch) {
					n.Tools = append(n.Tools, model.ToolSearch)
				}
				if risky > 0 {
					n.Tools = append(n.Tools, model.ToolPublish)
				}
				if asks > 0 {
					n.Tools = append(n.Tools, model.ToolAskHuman)
				}
				if x.choices > 0 {
					n.Tools = append(n.Tools, model.ToolAskChoice)
				}
				if _, ok := spawn[id]; ok {
					n.Tools = append(n.Tools, model.ToolSpawnSubteam)
				}
				if async {
					n.Tools = append(n.Tools, asyncTools...)
				}
				n.Tools = withCalls(n.Tools, s.Calls)
			}
			nodes = append(nodes, n)
		}
		prevStart, prevSize = start, size
	}
	return messages.Plan{Nodes: nodes}
}

// asyncTools are the tools of a leaf node when Delegations.Async > 0.
var asyncTools = []string{
	model.ToolStartAsyncTask, model.ToolCheckAsyncTask, model.ToolUpdateAsyncTask,
	model.ToolCancelAsyncTask, model.ToolListAsyncTasks,
}

// teamPlan is the nested plan of team node id (see PlanFor).
func teamPlan(s messages.Scenario, id, goal string) *messages.Plan {
	k := max(s.TeamSize, 1)
	first := k // the size of the first wave
	if k >= 2 {
		first = (k + 1) / 2
	}
	nodes := make([]messages.PlanNode, k)
	pcg := rand.NewPCG(0, 0)
	r := rand.New(pcg)
	var picked []int
	for j := range k {
		n := messages.PlanNode{ID: "m" + strconv.Itoa(j+1), Goal: "Part " + strconv.Itoa(j+1) + " of " + goal}
		if j >= first {
			pcg.Seed(seeds(newHash(s.Seed).str("team").str(id).str(n.ID)))
			picked = pickDistinct(r, first, min(s.FanIn, first), picked[:0])
			n.Deps = make([]string, len(picked))
			for d, p := range picked {
				n.Deps[d] = nodes[p].ID
			}
			slices.Sort(n.Deps) // first <= MaxTeamSize/2 < 10: one digit, lexical order is numeric order
		}
		nodes[j] = n
	}
	return &messages.Plan{Nodes: nodes}
}

// personas are the personas of a debate's agents, in agent order.
var personas = [messages.MaxDebateAgents]string{"optimist", "skeptic", "pragmatist", "historian"}

// debateConfig is the config of every debate node (see PlanFor).
func debateConfig(d *messages.DebateScenario) *messages.DebateConfig {
	agents := make([]messages.DebateAgent, max(d.Agents, 0))
	for i := range agents {
		agents[i] = messages.DebateAgent{ID: "a" + strconv.Itoa(i+1), Persona: personas[i%len(personas)]}
	}
	return &messages.DebateConfig{Agents: agents, Rounds: d.Rounds, Judge: d.Judge, MinRounds: d.MinRounds, CompactAfter: d.CompactAfter,
		Tools: slices.Clone(d.Tools)}
}

// nonLeafCount is the number of team and debate nodes of the plan of s:
// they are its first nodes.
func nonLeafCount(s messages.Scenario) int {
	n := max(s.Teams, 0)
	if s.Debate != nil {
		n += max(s.Debate.Nodes, 0)
	}
	return min(n, max(s.Nodes, 0))
}

// pickDistinct appends k distinct integers of [0, n) to dst, in no
// particular order (Floyd's algorithm: k draws whatever n is).
func pickDistinct(r *rand.Rand, n, k int, dst []int) []int {
	for j := n - k; j < n; j++ {
		t := r.IntN(j + 1)
		if slices.Contains(dst, t) {
			t = j
		}
		dst = append(dst, t)
	}
	return dst
}

// selectNodes resolves a node selector to sorted, distinct plan node ids.
func selectNodes(s messages.Scenario, sel messages.NodeSelector, salt string) []string {
	width := idWidth(s.Nodes)
	var ids []string
	switch {
	case len(sel.IDs) > 0:
		for _, id := range sel.IDs {
			if isNodeID(id, s.Nodes, width) {
				ids = append(ids, id)
			}
		}
	case sel.Fraction > 0:
		k := min(max(int(math.Round(sel.Fraction*float64(s.Nodes))), 1), s.Nodes)
		r := rand.New(rand.NewPCG(seeds(newHash(s.Seed).str(salt))))
		for _, i := range r.Perm(s.Nodes)[:k] {
			ids = append(ids, nodeID(i+1, width))
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// selectLeaves is selectNodes without the team and debate nodes.
func selectLeaves(s messages.Scenario, sel messages.NodeSelector, salt string) []string {
	ids := selectNodes(s, sel, salt)
	if nonLeaf := nonLeafCount(s); nonLeaf > 0 {
		ids = slices.DeleteFunc(ids, func(id string) bool {
			i, _ := strconv.Atoi(id[1:]) // a valid node id: selectNodes checked it
			return i <= nonLeaf
		})
	}
	return ids
}

func sortedKeys(set map[string]struct{}) []string {
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func has(set map[string]struct{}, id string) bool {
	_, ok := set[id]
	return ok
}

func toSet(ids []string) map[string]struct{} {
	set := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		set[id] = struct{}{}
	}
	return set
}

// idWidth is the number of digits of a node id: max(3, digits(nodes)).
func idWidth(nodes int) int { return max(3, len(strconv.Itoa(nodes))) }

func nodeID(i, width int) string { return fmt.Sprintf("n%0*d", width, i) }

// isNodeID reports whether id is the id of a node of a plan of the given
// size.
func isNodeID(id string, nodes, width int) bool {
	if len(id) != width+1 || id[0] != 'n' {
		return false
	}
	i, err := strconv.Atoi(id[1:])
	return err == nil && id[1] != '+' && id[1] != '-' && i >= 1 && i <= nodes
}

func directorReasoning(s messages.Scenario) []string {
	deps := fmt.Sprintf("Each node builds on up to %d nodes of the wave before it. ", s.FanIn)
	if s.Waves == 1 {
		deps = "The nodes are independent and can all run at once. "
	}
	return []string{
		"Reading the question and what a good answer needs. ",
		fmt.Sprintf("Splitting the question into %d nodes over %d waves. ", s.Nodes, s.Waves),
		deps,
	}
}

// splitChunks cuts s into chunks of at most size bytes (size >= utf8.UTFMax),
// never inside a UTF-8 sequence.
func splitChunks(s string, size int) []string {
	var out []string
	for len(s) > 0 {
		n := min(size, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n--
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// inputWords counts the words of a request's goal, question, context,
// tool results, debate transcript, review, guidance, steering note and
// injected updates.
func inputWords(req model.Request) int64 {
	n := countWords(req.Goal) + countWords(req.Question) + countWords(req.Review) +
		countWords(req.Guidance) + countWords(req.Note)
	for _, c := range req.Context {
		n += countWords(c)
	}
	for _, c := range req.Transcript {
		n += countWords(c)
	}
	for _, c := range req.Injected {
		n += countWords(c)
	}
	for _, r := range req.ToolResults {
		n += countWords(r.Content)
	}
	for _, f := range req.Files { // what a model reads of them: text as words, the others as a word per 4 bytes
		if f.Kind() == messages.FileText {
			n += countWords(string(f.Data))
		} else {
			n += int(f.Size+3) / 4
		}
	}
	return int64(n)
}

// filesNote names the run's attached files in the synthesiser's answer
// (" (with the attached files a.md, b.png)"), so that a scripted run shows
// its agents were given them; "" without files.
func filesNote(files []messages.RunFile) string {
	if len(files) == 0 {
		return ""
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Name
	}
	return " (with the attached files " + strings.Join(names, ", ") + ")"
}

// countWords counts the space-separated words of s without allocating.
func countWords(s string) int {
	n, in := 0, false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

// stepKind is what a step of a turn streams.
type stepKind uint8

const (
	kindReasoning stepKind = iota + 1 // the lead texts, then n words, as Reasoning chunks
	kindText                          // the lead texts, then n words, as Text chunks
	kindCalls                         // the calls, as Call chunks
	kindProgress                      // n Progress chunks over the turn's input tokens
	kindFail                          // Recv returns err
	kindPanic                         // Recv panics with panic
)

// step is one part of a turn.
type step struct {
	kind  stepKind
	lead  []string // fixed texts streamed before the n words
	n     int      // number of vocabulary words
	calls []model.ToolCall
	err   error
	panic *Panic
}

// prefillTokensPerMS is the scripted prefill's pace (Progress.TimeMS).
const prefillTokensPerMS = 2

// chunkSlab is how many Text or Reasoning chunks a stream allocates at once.
const chunkSlab = 64

// stream is one scripted turn: its steps, then a Usage chunk, then io.EOF.
type stream struct {
	ctx   context.Context
	delay time.Duration
	timer *time.Timer // created by the first wait when delay > 0
	pcg   rand.PCG    // draws the vocabulary words

	steps  [4]step
	nsteps int
	cur    int // index of the current step
	pos    int // chunks streamed of the current step

	usage     messages.Usage
	cached    int64 // input tokens a later turn finds in the cache (Progress)
	usageSent bool
	err       error // once set, every Recv returns it

	// Chunks are handed out from slabs to allocate less than once per token;
	// each chunk is still distinct, so callers may keep them.
	texts     []model.Text
	reasoning []model.Reasoning
}

func (s *stream) add(st step) {
	s.steps[s.nsteps] = st
	s.nsteps++
}

// Recv returns the next chunk of the turn, io.EOF after the Usage chunk,
// the context's error once the context is done and ErrClosed after Close.
func (s *stream) Recv() (model.Chunk, error) {
	if s.err != nil {
		return nil, s.err
	}
	if err := s.ctx.Err(); err != nil {
		s.err = err
		return nil, err
	}
	for ; s.cur < s.nsteps; s.cur, s.pos = s.cur+1, 0 {
		st := &s.steps[s.cur]
		switch st.kind {
		case kindReasoning, kindText:
			total := len(st.lead) + st.n
			if s.pos == total {
				continue
			}
			if err := s.wait(); err != nil {
				s.err = err
				return nil, err
			}
			var w string
			if s.pos < len(st.lead) {
				w = st.lead[s.pos]
			} else {
				w = vocabulary[s.pcg.Uint64()>>58]
			}
			s.pos++
			s.usage.OutputTokens++
			if st.kind == kindText {
				if len(s.texts) == 0 {
					s.texts = make([]model.Text, min(chunkSlab, total-s.pos+1))
				}
				c := &s.texts[0]
				s.texts = s.texts[1:]
				c.Text = w
				return c, nil
			}
			if len(s.reasoning) == 0 {
				s.reasoning = make([]model.Reasoning, min(chunkSlab, total-s.pos+1))
			}
			c := &s.reasoning[0]
			s.reasoning = s.reasoning[1:]
			c.Text = w
			return c, nil
		case kindProgress:
			if s.pos == st.n {
				continue
			}
			if err := s.wait(); err != nil {
				s.err = err
				return nil, err
			}
			s.pos++
			total := s.usage.InputTokens
			processed := total * int64(s.pos) / int64(st.n)
			return &model.Progress{Processed: processed, Total: total, Cached: s.cached, TimeMS: processed / prefillTokensPerMS}, nil
		case kindCalls:
			if s.pos < len(st.calls) {
				s.pos++
				return &model.Call{Call: st.calls[s.pos-1]}, nil
			}
		case kindFail:
			s.err = st.err
			return nil, s.err
		case kindPanic:
			// A caller that recovers and calls Recv again gets an error, not
			// a second panic.
			s.err = fmt.Errorf("%w: %v", model.ErrModel, st.panic)
			panic(st.panic)
		}
	}
	if !s.usageSent {
		s.usageSent = true
		return &model.Usage{Model: Name, Usage: s.usage}, nil
	}
	s.err = io.EOF
	return nil, io.EOF
}

// wait waits for the token delay, or until the context is done.
func (s *stream) wait() error {
	if s.delay <= 0 {
		return nil
	}
	if s.timer == nil {
		s.timer = time.NewTimer(s.delay)
	} else {
		s.timer.Reset(s.delay) // the timer has fired or been stopped: no stale tick (Go >= 1.23)
	}
	select {
	case <-s.ctx.Done():
		s.timer.Stop()
		return s.ctx.Err()
	case <-s.timer.C:
		return nil
	}
}

// Close releases the stream. It is idempotent and always returns nil.
func (s *stream) Close() error {
	if s.timer != nil {
		s.timer.Stop()
	}
	s.err = ErrClosed
	return nil
}

// hash is FNV-1a 64: a stable hash to derive PRNG seeds from.
type hash uint64

func newHash(seed int64) hash { return hash(14695981039346656037).int(seed) }

func (h hash) byte(b byte) hash { return (h ^ hash(b)) * 1099511628211 }

func (h hash) int(v int64) hash {
	for i := range 8 {
		h = h.byte(byte(uint64(v) >> (8 * i)))
	}
	return h
}

// str hashes s and a terminator, so that ("ab","c") and ("a","bc") differ.
func (h hash) str(s string) hash {
	for i := range len(s) {
		h = h.byte(s[i])
	}
	return h.byte(0xff)
}

// seeds derives the two PCG seeds from h.
func seeds(h hash) (uint64, uint64) {
	return uint64(h), splitmix64(uint64(h))
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// vocabulary is the read-only table of the 64 words the model streams, each
// with its trailing space. Its length must stay 64: a word is picked by the
// top 6 bits of a PRNG draw.
var vocabulary = [64]string{
	"light ", "river ", "stone ", "market ", "signal ", "garden ", "system ", "pattern ",
	"answer ", "change ", "energy ", "future ", "growth ", "history ", "island ", "journey ",
	"balance ", "bridge ", "center ", "detail ", "effect ", "factor ", "ground ", "method ",
	"network ", "option ", "process ", "question ", "reason ", "source ", "theory ", "value ",
	"clear ", "simple ", "strong ", "early ", "common ", "direct ", "general ", "local ",
	"recent ", "likely ", "steady ", "broad ", "careful ", "useful ", "open ", "known ",
	"shows ", "suggests ", "means ", "depends ", "builds ", "holds ", "moves ", "leads ",
	"and ", "but ", "then ", "also ", "still ", "often ", "here ", "more ",
}

// aspects are the phrases of the plan node goals.
var aspects = [...]string{
	"background and definitions", "key facts", "competing views", "quality of the evidence",
	"historical context", "costs and benefits", "risks", "open questions",
	"stakeholders", "practical constraints", "edge cases", "recent developments",
	"common misconceptions", "comparisons", "underlying assumptions", "recommendations",
}
