package openaitest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/openai"
	"github.com/conclave-ai/conclave/model/scripted"
)

// council answers every request as the scripted model of its scenario.
type council struct {
	m       *scripted.Model
	dialect Dialect

	mu       sync.Mutex
	reported messages.Usage // the usage sent, as the backend should read it
	// local maps the wire name of each of the scenario's Calls (tools
	// like "kid.shout", which the API cannot name) to the tool's name:
	// the council plays a model that calls tools by the names offered.
	local map[string]string
}

func newCouncil(s messages.Scenario, d Dialect) (*council, error) {
	m, err := scripted.New(s)
	if err != nil {
		return nil, err
	}
	local := map[string]string{}
	for _, name := range s.Calls {
		local[openai.WireToolName(name)] = name
	}
	return &council{m: m, dialect: d, local: local}, nil
}

// toLocal renames req's offered tools and earlier results to the
// scenario's names; toWire renames a call the scripted model makes to the
// name its tool was offered under.
func (c *council) toLocal(req *model.Request) {
	for i, t := range req.Tools {
		if n, ok := c.local[t.Name]; ok {
			req.Tools[i].Name = n
		}
	}
	for i, r := range req.ToolResults {
		if n, ok := c.local[r.Name]; ok {
			req.ToolResults[i].Name = n
		}
	}
}

func (c *council) toWire(calls []model.ToolCall) {
	for i := range calls {
		if w := openai.WireToolName(calls[i].Name); c.local[w] == calls[i].Name {
			calls[i].Name = w
		}
	}
}

// roles are the roles the council recognises, by their system prompt.
var roles = []model.Role{
	model.RoleDirector, model.RoleWorker, model.RoleSubagent, model.RoleSynthesizer,
	model.RoleDebater, model.RoleJudge, model.RoleAdvisor, model.RoleSteerer,
}

// RequestOf rebuilds the model.Request a chat request was made from, as far
// as the scripted model needs it: the role (from the system prompt), the
// agent, persona, round, depth, question, goal, note and review (from the
// task message's tags), the number of inputs, transcript lines and
// injected updates, the guidance, the turn and attempt (from the last
// message), the tools offered, and the tool results of the last turn (the tool messages after
// the last assistant message, named by its tool calls; content starting
// with openai.ErrorPrefix is an error).
func RequestOf(r *Request) (model.Request, error) {
	var req model.Request
	if len(r.Messages) < 3 || r.Messages[0].Role != "system" || r.Messages[1].Role != "user" {
		return req, errors.New("openaitest: want system, task, …, turn messages")
	}
	sys := string(r.Messages[0].Content)
	for _, role := range roles {
		if sys == openai.SystemPrompt(role) {
			req.Role = role
		}
	}
	if req.Role == 0 {
		return req, fmt.Errorf("openaitest: unknown system prompt %.60q", sys)
	}
	task := string(r.Messages[1].Content)
	req.AgentID = tagValue(task, "agent")
	req.Persona = tagValue(task, "persona")
	req.Round, _ = strconv.Atoi(tagValue(task, "round"))
	req.Depth, _ = strconv.Atoi(tagValue(task, "depth"))
	req.Question = tagValue(task, "question")
	req.Goal = tagValue(task, "task")
	req.Note = tagValue(task, "note")
	req.Review = tagValue(task, "review")
	req.Context = tagValues(task, "input")
	req.Transcript = tagValues(task, "line")

	last := r.Messages[len(r.Messages)-1]
	if last.Role != "user" {
		return req, errors.New("openaitest: the last message is not the turn's user message")
	}
	turn := string(last.Content)
	req.Turn, _ = strconv.Atoi(tagValue(turn, "turn"))
	req.Attempt, _ = strconv.Atoi(tagValue(turn, "attempt"))
	req.Guidance = tagValue(turn, "guidance")
	req.Injected = tagValues(turn, "update")

	// The tools offered, whose schemas the scripted model makes its
	// Scenario.Calls arguments from.
	for _, t := range r.Tools {
		req.Tools = append(req.Tools, model.ToolDef{Name: t.Function.Name, Description: t.Function.Description, Schema: t.Function.Parameters})
	}

	// The last turn's tool results.
	names := map[string]string{}
	for i := len(r.Messages) - 2; i >= 2; i-- {
		m := r.Messages[i]
		if m.Role == "assistant" {
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Function.Name
			}
			break
		}
	}
	for i := len(r.Messages) - 2; i >= 2 && r.Messages[i].Role == "tool"; i-- {
		m := r.Messages[i]
		content := string(m.Content)
		res := model.ToolResult{CallID: m.ToolCallID, Name: names[m.ToolCallID], Content: content}
		if rest, ok := strings.CutPrefix(content, openai.ErrorPrefix); ok {
			res.Content, res.IsError = rest, true
		}
		req.ToolResults = append([]model.ToolResult{res}, req.ToolResults...)
	}
	return req, nil
}

// tagValue is the content of the first <name>…</name> of s.
func tagValue(s, name string) string {
	open, end := "<"+name+">\n", "\n</"+name+">\n"
	i := strings.Index(s, open)
	if i < 0 {
		return ""
	}
	s = s[i+len(open):]
	j := strings.Index(s, end)
	if j < 0 {
		return ""
	}
	return s[:j]
}

// tagValues is the content of every <name>…</name> of s.
func tagValues(s, name string) []string {
	open, end := "<"+name+">\n", "\n</"+name+">\n"
	var out []string
	for {
		i := strings.Index(s, open)
		if i < 0 {
			return out
		}
		s = s[i+len(open):]
		j := strings.Index(s, end)
		if j < 0 {
			return out
		}
		out = append(out, s[:j])
		s = s[j+len(end):]
	}
}

// serve answers req as the scripted model, in the council's dialect
// (dialect.go; the zero one: reasoning as reasoning_content deltas, text
// as content deltas, calls as tool_calls deltas interleaved by index, the
// finish reason and the usage chunk). A director's or steerer's repair
// turn is answered as its first turn. A scripted failure or panic (fail
// and panic nodes) drops the connection: the backend reports a model
// error.
func (c *council) serve(w http.ResponseWriter, r *http.Request, req *Request) {
	if c.dialect.Check != nil {
		if bad := c.dialect.Check(req); bad != nil {
			writeInvalid(w, bad)
			return
		}
	}
	mreq, err := RequestOf(req)
	if err != nil {
		writeError(w, http.StatusBadRequest, nil, err.Error())
		return
	}
	c.toLocal(&mreq)
	if (mreq.Role == model.RoleDirector || mreq.Role == model.RoleSteerer) && mreq.Turn > 1 {
		mreq.Turn = 1 // a repair turn (the answer before was invalid): answer again
	}
	st, err := c.m.Stream(r.Context(), mreq)
	if err != nil {
		writeError(w, http.StatusBadRequest, nil, err.Error())
		return
	}
	defer st.Close()
	sw := newSSE(w, req.Model)
	defer func() {
		if v := recover(); v != nil { // a scripted panic node
			sw.drop()
		}
	}()
	rd := &render{d: c.dialect, sw: sw}
	if rd.begin() != nil {
		return
	}
	var out int64
	var calls []model.ToolCall
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			sw.drop() // a scripted failure, or the client is gone
			return
		}
		switch ch := ch.(type) {
		case *model.Text:
			out++
			err = rd.chunk(TextChunk(ch.Text))
		case *model.Reasoning:
			out++
			err = rd.reasoning(ch.Text)
		case *model.Call:
			calls = append(calls, ch.Call)
		case *model.Usage:
		}
		if err != nil {
			return
		}
	}
	c.toWire(calls)
	u := c.usage(req, out)
	if rd.finish(calls, u, req.StreamOptions != nil && req.StreamOptions.IncludeUsage, c.report) != nil {
		return
	}
	_ = sw.done()
}

// usage is what the server reports of an answer: about 4 bytes a prompt
// token; the system prompt is the stable prefix a server would cache.
func (c *council) usage(req *Request, out int64) *Usage {
	var prompt int
	for _, m := range req.Messages {
		prompt += len(m.Content)
	}
	u := UsageChunk(int64(prompt/4), out, int64(len(req.Messages[0].Content)/4)).Usage
	if c.dialect.ShapeUsage != nil {
		c.dialect.ShapeUsage(u)
	}
	return u
}

// report adds u, as the backend should read it, to the usage reported.
func (c *council) report(u *Usage) {
	r := messages.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		CacheCreateTokens: u.CacheCreationInputTokens, CacheReadTokens: u.PromptCacheHitTokens}
	if d := u.PromptTokensDetails; d != nil {
		r.CacheReadTokens = d.CachedTokens
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reported = c.reported.Add(r)
}

// render writes one answer in a dialect.
type render struct {
	d  Dialect
	sw *sse
}

func (r *render) chunk(c Chunk) error {
	if r.d.Decorate != nil {
		r.d.Decorate(&c)
	}
	return r.sw.chunk(c)
}

// begin sends what comes before the first delta.
func (r *render) begin() error {
	for _, raw := range r.d.Prelude {
		if err := r.sw.frame([]byte(raw)); err != nil {
			return err
		}
	}
	if r.d.Comment != "" {
		if err := r.sw.comment(r.d.Comment); err != nil {
			return err
		}
	}
	if r.d.RoleChunk {
		empty := ""
		return r.chunk(deltaChunk(Delta{Role: "assistant", Content: &empty}))
	}
	return nil
}

func (r *render) reasoning(text string) error {
	switch r.d.Reasoning {
	case "-":
		return nil
	case "reasoning":
		return r.chunk(ReasoningChunk(text))
	}
	return r.chunk(ReasoningContentChunk(text))
}

// finish sends the calls, the finish chunk, the usage where the dialect
// puts it (reporting it), the epilogue.
func (r *render) finish(calls []model.ToolCall, u *Usage, asked bool, report func(*Usage)) error {
	reason := "stop"
	var groups [][]ToolCallDelta
	if len(calls) > 0 {
		reason = "tool_calls"
		if r.d.FinishCalls != "" {
			reason = r.d.FinishCalls
		}
		if r.d.CallID != nil {
			calls = append([]model.ToolCall(nil), calls...)
			for i := range calls {
				calls[i].ID = r.d.CallID(calls[i].ID)
			}
		}
		split := r.d.Calls
		if split == nil {
			split = CallsInterleaved
		}
		groups = split(calls)
	}
	var inFinish []ToolCallDelta
	if r.d.CallsInFinish && len(groups) > 0 {
		groups, inFinish = groups[:len(groups)-1], groups[len(groups)-1]
	}
	for _, g := range groups {
		if err := r.chunk(CallChunk(g...)); err != nil {
			return err
		}
	}
	if r.d.Comment != "" {
		if err := r.sw.comment(r.d.Comment); err != nil {
			return err
		}
	}
	fin := FinishChunk(reason)
	fin.Choices[0].Delta.ToolCalls = inFinish
	sent := false
	switch r.d.Usage {
	case UsageInFinish:
		fin.Usage, sent = u, true
	case UsageXGroq:
		fin.XGroq, sent = &XGroq{ID: "req_openaitest", Usage: u}, true
	}
	if err := r.chunk(fin); err != nil {
		return err
	}
	if asked && (r.d.Usage == UsageLastChunk || r.d.Usage == UsageXGroq) {
		uc := UsageChunk(0, 0, 0)
		uc.Usage, sent = u, true
		if err := r.chunk(uc); err != nil {
			return err
		}
	}
	if sent {
		report(u)
	}
	for _, raw := range r.d.Epilogue {
		if err := r.sw.frame([]byte(raw)); err != nil {
			return err
		}
	}
	return nil
}
