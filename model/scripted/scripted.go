// Package scripted is the embedded default model of Conclave: a
// deterministic implementation of model.Model whose behaviour is fully set by
// a messages.Scenario.
//
// The director outputs the plan of PlanFor; workers reason, stream text, call
// the search and delegate tools and, when the scenario says so, fail or panic
// halfway through their output; sub-agents and the synthesiser stream text.
// All text is drawn from a fixed vocabulary by a PRNG seeded from the
// scenario seed, the agent id and the turn, so a restarted attempt streams
// exactly the same chunks as the attempt before it.
//
// Tokens are counted in chunks: every Text or Reasoning chunk is one output
// token, and input tokens are the words of the request (goal, question,
// context and tool results).
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
	_ model.Factory = Factory
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
	nodeIndex         map[string]int // plan node id → 0-based position
}

// Factory builds a scripted model for a run; it is a model.Factory. A model
// is immutable and depends only on its scenario, so runs with the same
// scenario share one (the last cacheSize scenarios are kept).
func Factory(s messages.Scenario) (model.Model, error) { return defaultCache.get(s) }

const cacheSize = 64

var defaultCache = &cache{m: map[string]*Model{}}

// cache holds recently built models by scenario. It is safe for
// concurrent use; it is a package-level memo of a pure function, not
// mutable shared state anyone observes.
type cache struct {
	mu    sync.Mutex
	m     map[string]*Model
	order []string // insertion order, for eviction
}

func (c *cache) get(s messages.Scenario) (*Model, error) {
	s = s.WithDefaults()
	key, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	c.mu.Lock()
	m, ok := c.m[string(key)]
	c.mu.Unlock()
	if ok {
		return m, nil
	}
	m, err = New(s)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[string(key)]; !ok {
		if len(c.order) == cacheSize {
			delete(c.m, c.order[0])
			c.order = c.order[1:]
		}
		c.m[string(key)] = m
		c.order = append(c.order, string(key))
	}
	return m, nil
}

// New applies the scenario defaults, validates the scenario and precomputes
// the plan and the nodes that fail or panic.
//
// A selector with IDs selects those ids (ids that are not in the plan are
// ignored; IDs win over Fraction when both are set). A selector with a
// Fraction f > 0 selects exactly round(f*Nodes) nodes, at least one, by a
// shuffle seeded from the scenario seed. A node selected both to fail and
// to panic fails: PanicNodes never lists a node of FailNodes.
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
		failIDs:    selectNodes(s, s.FailNodes, "fail"),
		panicIDs:   selectNodes(s, s.PanicNodes, "panic"),
	}
	m.fail = toSet(m.failIDs)
	m.panicIDs = slices.DeleteFunc(m.panicIDs, func(id string) bool {
		_, ok := m.fail[id]
		return ok
	})
	m.panics = toSet(m.panicIDs)
	m.nodeIndex = make(map[string]int, len(plan.Nodes))
	for i, n := range plan.Nodes {
		m.nodeIndex[n.ID] = i
	}
	return m, nil
}

// Name returns "scripted".
func (m *Model) Name() string { return Name }

// Plan returns the plan the director outputs. It shares no memory with m.
func (m *Model) Plan() messages.Plan {
	nodes := make([]messages.PlanNode, len(m.plan.Nodes))
	for i, n := range m.plan.Nodes {
		n.Deps = slices.Clone(n.Deps)
		n.Tools = slices.Clone(n.Tools)
		nodes[i] = n
	}
	return messages.Plan{Nodes: nodes}
}

// FailNodes returns the ids of the nodes that fail, sorted.
func (m *Model) FailNodes() []string { return slices.Clone(m.failIDs) }

// PanicNodes returns the ids of the nodes that panic, sorted. It never lists
// a fail node.
func (m *Model) PanicNodes() []string { return slices.Clone(m.panicIDs) }

// Stream starts one turn. The turns each role has:
//
//   - director: turn 1 streams three Reasoning chunks, then the plan JSON in
//     Text chunks of at most MaxPlanChunk bytes.
//   - worker: with no tools (ToolsPerNode and SubagentsPerNode zero), turn 1
//     streams ReasoningTokens Reasoning chunks and Tokens Text chunks. With
//     tools, turn 1 streams the reasoning and Tokens/2 Text chunks, then the
//     tool calls; turn 2 (whatever its tool results) streams the rest of the
//     text. When the request has context, the first Text chunk of the last
//     turn is "Building on <k> inputs. "; it is one of the Tokens chunks.
//     Fail and panic nodes stop in turn 1, after the reasoning and Tokens/2
//     Text chunks, before any tool call.
//   - subagent: turn 1 streams max(1, Tokens/4) Text chunks.
//   - synthesizer: turn 1 streams "Answer to: <question> — " and then
//     SynthesisTokens Text chunks.
//
// A panic node panics on the attempts up to PanicAttempts (an Attempt below
// 1 counts as 1) and runs normally after. Every turn ends with one
// *model.Usage chunk. The tools in req.Tools are
// not consulted: the scenario alone decides which tools a worker calls. A
// turn the role does not have, or an unknown role, is an error wrapping
// model.ErrModel; a done ctx is returned as ctx.Err().
func (m *Model) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st := &stream{ctx: ctx, delay: m.delay}
	st.pcg.Seed(seeds(newHash(m.s.Seed).str(req.AgentID).int(int64(req.Turn))))
	st.usage.InputTokens = inputWords(req)

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
		if req.Turn == 1 {
			st.add(step{kind: kindText, n: max(1, m.s.Tokens/4)})
		}
	case model.RoleSynthesizer:
		if req.Turn == 1 {
			st.add(step{kind: kindText, lead: []string{"Answer to: " + req.Question + " — "}, n: m.s.SynthesisTokens})
		}
	default:
		return nil, fmt.Errorf("%w: scripted: unknown role %d", model.ErrModel, int(req.Role))
	}
	if req.Turn < 1 || req.Turn > turns {
		return nil, fmt.Errorf("%w: scripted: %s %s has no turn %d (it has %d)", model.ErrModel, req.Role, req.AgentID, req.Turn, turns)
	}
	return st, nil
}

// worker adds the steps of a worker turn to st and returns the number of
// turns a worker has; it adds nothing for a turn beyond that number.
func (m *Model) worker(st *stream, req model.Request) (turns int) {
	t := m.s.Tokens
	approvals, asks := m.extraCalls(req.AgentID)
	calls := m.s.ToolsPerNode + m.s.SubagentsPerNode + approvals + asks
	turns = 1
	if calls > 0 {
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
		switch {
		case fails:
			st.add(textStep(t/2, turns == 1, req.Context))
			st.add(step{kind: kindFail, err: fmt.Errorf("%w: scripted failure of node %s", model.ErrModel, id)})
		case panics:
			st.add(textStep(t/2, turns == 1, req.Context))
			st.add(step{kind: kindPanic, panic: &Panic{NodeID: id, Attempt: attempt}})
		case calls > 0:
			st.add(textStep(t/2, false, nil))
			st.add(step{kind: kindCalls, calls: m.toolCalls(req)})
		default:
			st.add(textStep(t, true, req.Context))
		}
	case 2:
		if turns == 2 {
			st.add(textStep(t-t/2, true, req.Context))
		}
	}
	return turns
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

// extraCalls is how many of the scenario's Approvals (extra search calls)
// and InfoRequests (ask_human calls) fall on node id: one per node in id
// order, wrapping around.
func (m *Model) extraCalls(id string) (approvals, asks int) {
	i, ok := m.nodeIndex[id]
	if !ok {
		return 0, 0
	}
	share := func(total int) int {
		n := total / m.s.Nodes
		if i < total%m.s.Nodes {
			n++
		}
		return n
	}
	return share(m.s.Approvals), share(m.s.InfoRequests)
}

// toolCalls returns the calls of a worker's first turn: ToolsPerNode search
// calls, then SubagentsPerNode delegate calls, then the node's share of the
// scenario's Approvals (search calls) and InfoRequests (ask_human calls).
func (m *Model) toolCalls(req model.Request) []model.ToolCall {
	goal := strings.Join(strings.Fields(req.Goal), " ")
	approvals, asks := m.extraCalls(req.AgentID)
	calls := make([]model.ToolCall, 0, m.s.ToolsPerNode+m.s.SubagentsPerNode+approvals+asks)
	call := func(name string, args any) {
		b, err := json.Marshal(args)
		if err != nil {
			panic(err) // unreachable: args only hold strings
		}
		id := req.AgentID + "-t" + strconv.Itoa(req.Turn) + "-c" + strconv.Itoa(len(calls)+1)
		calls = append(calls, model.ToolCall{ID: id, Name: name, Args: b})
	}
	for k := 1; k <= m.s.ToolsPerNode; k++ {
		call(model.ToolSearch, searchArgs{Query: strings.TrimSpace(goal + " " + strconv.Itoa(k))})
	}
	for k := 1; k <= m.s.SubagentsPerNode; k++ {
		call(model.ToolDelegate, delegateArgs{Task: "Sub-task " + strconv.Itoa(k) + " of " + req.AgentID})
	}
	for k := 1; k <= approvals; k++ {
		call(model.ToolSearch, searchArgs{Query: strings.TrimSpace(goal + " gated " + strconv.Itoa(k))})
	}
	for k := 1; k <= asks; k++ {
		call(model.ToolAskHuman, askArgs{Question: "What should " + req.AgentID + " assume about " + goal + "?", Context: "question " + strconv.Itoa(k) + " of " + req.AgentID})
	}
	return calls
}

type askArgs struct {
	Question string `json:"question"`
	Context  string `json:"context"`
}

type searchArgs struct {
	Query string `json:"query"`
}

type delegateArgs struct {
	Task string `json:"task"`
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
				ID:    id,
				Goal:  "Aspect " + strconv.Itoa(i) + " of " + strconv.Itoa(s.Nodes) + ": " + aspects[r.IntN(len(aspects))],
				Tools: slices.Clone(tools),
			}
			if level > 0 {
				picked = pickDistinct(r, prevSize, min(s.FanIn, prevSize), picked[:0])
				n.Deps = make([]string, len(picked))
				for j, p := range picked {
					n.Deps[j] = nodes[prevStart+p].ID
				}
				slices.Sort(n.Deps) // ids have one width: lexical order is numeric order
			}
			nodes = append(nodes, n)
		}
		prevStart, prevSize = start, size
	}
	return messages.Plan{Nodes: nodes}
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

// inputWords counts the words of a request's goal, question, context and
// tool results.
func inputWords(req model.Request) int64 {
	n := countWords(req.Goal) + countWords(req.Question)
	for _, c := range req.Context {
		n += countWords(c)
	}
	for _, r := range req.ToolResults {
		n += countWords(r.Content)
	}
	return int64(n)
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

// chunkSlab is how many Text or Reasoning chunks a stream allocates at once.
const chunkSlab = 64

// stream is one scripted turn: its steps, then a Usage chunk, then io.EOF.
type stream struct {
	ctx   context.Context
	delay time.Duration
	timer *time.Timer // created by the first wait when delay > 0
	pcg   rand.PCG    // draws the vocabulary words

	steps  [3]step
	nsteps int
	cur    int // index of the current step
	pos    int // chunks streamed of the current step

	usage     messages.Usage
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
