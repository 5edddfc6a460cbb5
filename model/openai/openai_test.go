package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"go.uber.org/goleak"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/openai"
	"github.com/conclave-ai/conclave/model/openai/openaitest"
	"github.com/conclave-ai/conclave/model/scripted"
)

func TestMain(m *testing.M) {
	warmEncoders() // warm_test.go: before any synctest bubble exists
	goleak.VerifyTestMain(m)
}

// newModel is a Model on srv over TCP, with its own transport (closed at
// cleanup, so no connection outlives the test).
func newModel(t *testing.T, srv *openaitest.Server, cfg openai.Config) *openai.Model {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cfg.BaseURL = srv.URL
	cfg.HTTPClient = &http.Client{Transport: tr}
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// collect reads a stream to its end.
func collect(t *testing.T, st model.Stream) ([]model.Chunk, error) {
	t.Helper()
	defer st.Close()
	var out []model.Chunk
	for {
		c, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
}

// streamTurn streams req (workerReq when it is nil) on a Model of srv with cfg
// and returns its chunks; a failure ends the test.
func streamTurn(t *testing.T, srv *openaitest.Server, cfg openai.Config, req *model.Request) []model.Chunk {
	t.Helper()
	r := workerReq()
	if req != nil {
		r = *req
	}
	st, err := newModel(t, srv, cfg).Stream(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(t, st)
	if err != nil {
		t.Fatal(err)
	}
	return chunks
}

func workerReq() model.Request {
	return model.Request{Role: model.RoleWorker, AgentID: "n001", Question: "why is the sky blue", Goal: "Explain scattering", Turn: 1, Attempt: 1}
}

func text(chunks []model.Chunk) (txt, reasoning string) {
	var a, b strings.Builder
	for _, c := range chunks {
		switch c := c.(type) {
		case *model.Text:
			a.WriteString(c.Text)
		case *model.Reasoning:
			b.WriteString(c.Text)
		}
	}
	return a.String(), b.String()
}

func TestModel_StreamsTextAndUsage(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, openaitest.Config{Replies: []openaitest.Reply{{Chunks: []openaitest.Chunk{
		openaitest.TextChunk("Rayleigh "), openaitest.TextChunk("scattering."),
		openaitest.FinishChunk("stop"), usageWithCacheWrite(openaitest.UsageChunk(120, 2, 64), 16),
	}}}})
	m := newModel(t, srv, openai.Config{APIKey: "sk-test"})
	st, err := m.Stream(t.Context(), workerReq())
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(t, st)
	if err != nil {
		t.Fatal(err)
	}
	if txt, _ := text(chunks); txt != "Rayleigh scattering." {
		t.Fatalf("text %q", txt)
	}
	u, ok := chunks[len(chunks)-1].(*model.Usage)
	if !ok {
		t.Fatalf("last chunk %T, want *model.Usage", chunks[len(chunks)-1])
	}
	want := messages.Usage{InputTokens: 120, OutputTokens: 2, CacheReadTokens: 64, CacheCreateTokens: 16}
	if u.Usage != want || u.Model != "test-model" {
		t.Fatalf("usage %+v, want %+v of test-model", u, want)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || !reqs[0].Stream || reqs[0].StreamOptions == nil || !reqs[0].StreamOptions.IncludeUsage {
		t.Fatalf("request %+v: want stream with include_usage", reqs)
	}
	if reqs[0].Authorization != "Bearer sk-test" {
		t.Fatalf("Authorization %q", reqs[0].Authorization)
	}
}

func TestModel_ReasoningFields(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, openaitest.Config{Replies: []openaitest.Reply{{Chunks: []openaitest.Chunk{
		openaitest.ReasoningContentChunk("think "), openaitest.ReasoningChunk("more. "),
		openaitest.TextChunk("Answer."), openaitest.FinishChunk("stop"),
	}}}})
	m := newModel(t, srv, openai.Config{})
	st, err := m.Stream(t.Context(), workerReq())
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(t, st)
	if err != nil {
		t.Fatal(err)
	}
	txt, reasoning := text(chunks)
	if reasoning != "think more. " || txt != "Answer." {
		t.Fatalf("reasoning %q text %q", reasoning, txt)
	}
	// No usage chunk (include_usage ignored): an estimate ends the turn.
	u, ok := chunks[len(chunks)-1].(*model.Usage)
	if !ok || u.Usage.InputTokens == 0 || u.Usage.OutputTokens == 0 {
		t.Fatalf("last chunk %#v, want an estimated usage", chunks[len(chunks)-1])
	}
	if reqs := srv.Requests(); reqs[0].Authorization != "" {
		t.Fatalf("no key configured, yet Authorization %q", reqs[0].Authorization)
	}
}

func TestModel_ToolCallsInterleaved(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, openaitest.Config{Replies: []openaitest.Reply{{Chunks: []openaitest.Chunk{
		openaitest.TextChunk("Looking it up. "),
		openaitest.CallChunk(openaitest.CallStart(0, "call_a", "search")),
		openaitest.CallChunk(openaitest.CallStart(1, "call_b", "delegate"), openaitest.CallArgs(0, `{"que`)),
		openaitest.CallChunk(openaitest.CallArgs(1, `{"task":`)),
		openaitest.CallChunk(openaitest.CallArgs(0, `ry":"sky"}`)),
		openaitest.CallChunk(openaitest.CallArgs(1, `"dig deeper"}`)),
		openaitest.CallChunk(openaitest.CallStart(2, "", "list_async_tasks")), // no id, no arguments
		openaitest.FinishChunk("tool_calls"),
		openaitest.UsageChunk(10, 5, 0),
	}}}})
	m := newModel(t, srv, openai.Config{})
	st, err := m.Stream(t.Context(), workerReq())
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(t, st)
	if err != nil {
		t.Fatal(err)
	}
	var calls []model.ToolCall
	for _, c := range chunks {
		if c, ok := c.(*model.Call); ok {
			calls = append(calls, c.Call)
		}
	}
	want := []model.ToolCall{
		{ID: "call_a", Name: "search", Args: json.RawMessage(`{"query":"sky"}`)},
		{ID: "call_b", Name: "delegate", Args: json.RawMessage(`{"task":"dig deeper"}`)},
		{ID: "n001-t1-c3", Name: "list_async_tasks", Args: json.RawMessage(`{}`)},
	}
	if len(calls) != len(want) {
		t.Fatalf("calls %+v", calls)
	}
	for i := range want {
		if calls[i].ID != want[i].ID || calls[i].Name != want[i].Name || string(calls[i].Args) != string(want[i].Args) {
			t.Fatalf("call %d = %s %s %s, want %s %s %s", i, calls[i].ID, calls[i].Name, calls[i].Args, want[i].ID, want[i].Name, want[i].Args)
		}
	}
	if _, ok := chunks[len(chunks)-1].(*model.Usage); !ok {
		t.Fatalf("last chunk %T", chunks[len(chunks)-1])
	}
}

// TestModel_InvalidCallArgumentsPassOn: a call whose arguments are not
// JSON comes through as the model sent it (the runtime answers it with an
// error result); before, it failed the turn with a model error.
func TestModel_InvalidCallArgumentsPassOn(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, openaitest.Config{Replies: []openaitest.Reply{{Chunks: []openaitest.Chunk{
		openaitest.CallChunk(openaitest.CallStart(0, "c1", "search"), openaitest.CallArgs(0, `{"query":`)),
		openaitest.FinishChunk("tool_calls"),
	}}}})
	m := newModel(t, srv, openai.Config{})
	st, err := m.Stream(t.Context(), workerReq())
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(t, st)
	if err != nil {
		t.Fatalf("err %v, want the call passed on", err)
	}
	c, ok := chunks[0].(*model.Call)
	if !ok || c.Call.ID != "c1" || c.Call.Name != "search" || string(c.Call.Args) != `{"query":` {
		t.Fatalf("chunks %+v, want call c1 search with its raw arguments", chunks)
	}
}

// TestModel_MidStreamFailures: once a chunk has arrived nothing is retried;
// a malformed chunk, a dropped connection and a stream without a finish
// reason are model errors from Recv, after the chunks that came.
func TestModel_MidStreamFailures(t *testing.T) {
	t.Parallel()
	for name, rep := range map[string]openaitest.Reply{
		"malformed": {Chunks: []openaitest.Chunk{openaitest.TextChunk("Half ")}, Raw: []string{`{"id":"x","choices":[{"delta":{"content":`}},
		"dropped":   {Chunks: []openaitest.Chunk{openaitest.TextChunk("Half ")}, Drop: true},
		"no-finish": {Chunks: []openaitest.Chunk{openaitest.TextChunk("Half ")}, NoDone: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := openaitest.NewServer(t, openaitest.Config{Replies: []openaitest.Reply{rep, rep}})
			m := newModel(t, srv, openai.Config{})
			st, err := m.Stream(t.Context(), workerReq())
			if err != nil {
				t.Fatal(err)
			}
			chunks, err := collect(t, st)
			if !errors.Is(err, model.ErrModel) {
				t.Fatalf("err %v, want model.ErrModel", err)
			}
			if txt, _ := text(chunks); txt != "Half " {
				t.Fatalf("text before the failure %q", txt)
			}
			if n := srv.Served(); n != 1 {
				t.Fatalf("%d requests: a failure after the first chunk must not be retried", n)
			}
		})
	}
}

// TestModel_CancelMidStream: once the turn's context is done, Recv returns
// its error, even while the server stalls.
func TestModel_CancelMidStream(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	defer close(hold)
	srv := openaitest.NewServer(t, openaitest.Config{Replies: []openaitest.Reply{{Chunks: []openaitest.Chunk{openaitest.TextChunk("Half ")}, Hold: hold}}})
	m := newModel(t, srv, openai.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	st, err := m.Stream(ctx, workerReq())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if c, err := st.Recv(); err != nil || c.(*model.Text).Text != "Half " {
		t.Fatalf("first chunk %v, %v", c, err)
	}
	recv := make(chan error, 1)
	go func() { // owned by this test: ends when Recv returns, which cancel causes
		_, err := st.Recv()
		recv <- err
	}()
	cancel()
	select {
	case err := <-recv:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Recv after cancel: %v", err)
		}
	case <-time.After(10 * time.Second): // watchdog, not a wait
		t.Fatal("Recv did not return after cancel")
	}
}

// inMemory is a Model on srv over in-memory connections; call it inside
// the synctest bubble.
func inMemory(t *testing.T, srv *openaitest.Server, cfg openai.Config) (*openai.Model, func()) {
	t.Helper()
	client, stop := srv.InMemory()
	cfg.BaseURL, cfg.HTTPClient = "http://openaitest/v1", client
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, stop
}

var okReply = openaitest.Reply{Chunks: []openaitest.Chunk{openaitest.TextChunk("ok"), openaitest.FinishChunk("stop")}}

// TestModel_RetriesHonourRetryAfter: a 429 with Retry-After: 3 and then a
// 503 are retried, after 3s (the server's) and 1s (the second backoff,
// 2 × 500ms); virtual time.
func TestModel_RetriesHonourRetryAfter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		srv, err := openaitest.New(openaitest.Config{Replies: []openaitest.Reply{
			{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3"}}},
			{Status: http.StatusServiceUnavailable},
			okReply,
		}})
		if err != nil {
			t.Fatal(err)
		}
		m, stop := inMemory(t, srv, openai.Config{})
		defer stop()
		start := time.Now()
		st, err := m.Stream(t.Context(), workerReq())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := collect(t, st); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 4*time.Second {
			t.Fatalf("took %v of virtual time, want 4s (3s Retry-After + 1s backoff)", took)
		}
		if n := srv.Served(); n != 3 {
			t.Fatalf("%d requests, want 3", n)
		}
	})
}

// TestModel_RetriesAreBounded: MaxAttempts 500s and the turn fails with a
// model error, after backoffs of 0.5s, 1s and 2s.
func TestModel_RetriesAreBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fail := openaitest.Reply{Status: http.StatusInternalServerError}
		srv, err := openaitest.New(openaitest.Config{Replies: []openaitest.Reply{fail, fail, fail, fail, okReply}})
		if err != nil {
			t.Fatal(err)
		}
		m, stop := inMemory(t, srv, openai.Config{})
		defer stop()
		start := time.Now()
		_, err = m.Stream(t.Context(), workerReq())
		if !errors.Is(err, model.ErrModel) {
			t.Fatalf("err %v, want model.ErrModel", err)
		}
		if took := time.Since(start); took != 3500*time.Millisecond {
			t.Fatalf("took %v, want 3.5s", took)
		}
		if n := srv.Served(); n != openai.DefaultMaxAttempts {
			t.Fatalf("%d requests, want %d", n, openai.DefaultMaxAttempts)
		}
	})
}

// TestModel_RetryWaitIsCancellable: a turn waiting out a Retry-After ends
// with its context.
func TestModel_RetryWaitIsCancellable(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		srv, err := openaitest.New(openaitest.Config{Replies: []openaitest.Reply{
			{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"60"}}}, okReply,
		}})
		if err != nil {
			t.Fatal(err)
		}
		m, stop := inMemory(t, srv, openai.Config{})
		defer stop()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if _, err := m.Stream(ctx, workerReq()); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want the context's", err)
		}
		if n := srv.Served(); n != 1 {
			t.Fatalf("%d requests", n)
		}
	})
}

// TestModel_RetryAfterTooLong: a server asking to wait more than
// MaxRetryAfter is not retried.
func TestModel_RetryAfterTooLong(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		srv, err := openaitest.New(openaitest.Config{Replies: []openaitest.Reply{
			{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"600"}}}, okReply,
		}})
		if err != nil {
			t.Fatal(err)
		}
		m, stop := inMemory(t, srv, openai.Config{MaxRetryAfter: time.Minute})
		defer stop()
		start := time.Now()
		if _, err := m.Stream(t.Context(), workerReq()); !errors.Is(err, model.ErrModel) || !strings.Contains(err.Error(), "retry after 10m0s") {
			t.Fatalf("err %v", err)
		}
		if time.Since(start) != 0 || srv.Served() != 1 {
			t.Fatalf("waited %v, %d requests", time.Since(start), srv.Served())
		}
	})
}

// TestModel_ClientErrorsAreNotRetried: a 401 fails at once.
func TestModel_ClientErrorsAreNotRetried(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, openaitest.Config{Replies: []openaitest.Reply{{Status: http.StatusUnauthorized}, okReply}})
	m := newModel(t, srv, openai.Config{})
	if _, err := m.Stream(t.Context(), workerReq()); !errors.Is(err, model.ErrModel) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err %v", err)
	}
	if n := srv.Served(); n != 1 {
		t.Fatalf("%d requests", n)
	}
}

// TestModel_ResponseFormatFallback: the director asks for its plan schema;
// a server that answers 400 is asked again without it, and never with it
// again.
func TestModel_ResponseFormatFallback(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, openaitest.Config{Replies: []openaitest.Reply{
		{Status: http.StatusBadRequest, Message: "response_format json_schema is not supported"}, okReply, okReply,
	}})
	m := newModel(t, srv, openai.Config{RoleModels: map[model.Role]string{model.RoleDirector: "strong-model"}})
	req := model.Request{Role: model.RoleDirector, AgentID: "director", Goal: "q", Turn: 1, Attempt: 1,
		Tools:  []model.ToolDef{{Name: "search", Description: "Search the web."}, {Name: "delegate"}},
		Agents: []model.AgentDef{{Name: "helper", Description: "Sample Agent — streams"}}}
	for range 2 {
		st, err := m.Stream(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := collect(t, st); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	if rf := reqs[0].ResponseFormat; rf == nil || rf.Type != "json_schema" || rf.JSONSchema == nil || rf.JSONSchema.Name != openai.PlanSchemaName {
		t.Fatalf("first request's response_format %+v", rf)
	}
	// The director plans with the tools; it does not call them.
	if len(reqs[0].Tools) != 0 || !strings.Contains(string(reqs[0].Messages[1].Content), "<available_tools>\nsearch: Search the web.\ndelegate\n</available_tools>") {
		t.Fatalf("director tools %+v, task %s", reqs[0].Tools, reqs[0].Messages[1].Content)
	}
	// It is told of the remote agents a node may name.
	if !strings.Contains(string(reqs[0].Messages[1].Content), "<available_agents>\nhelper: Sample Agent — streams\nA node whose goal") {
		t.Fatalf("director task %s", reqs[0].Messages[1].Content)
	}
	for _, r := range reqs[1:] {
		if r.ResponseFormat != nil {
			t.Fatalf("response_format %+v after the server refused it", r.ResponseFormat)
		}
		if r.Model != "strong-model" {
			t.Fatalf("director model %q", r.Model)
		}
	}
}

// TestModel_RequestShape: a worker's second turn is system, task, the
// first turn's assistant message with its tool calls, one tool message per
// result (errors marked), and the turn; tools carry their schemas; the
// role's model is used; the council server's RequestOf reads it back.
func TestModel_RequestShape(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, openaitest.Config{Replies: []openaitest.Reply{okReply}})
	m := newModel(t, srv, openai.Config{Model: "big", RoleModels: map[model.Role]string{model.RoleWorker: "small"}})
	calls := []model.ToolCall{
		{ID: "c1", Name: "search", Args: json.RawMessage(`{"query":"sky"}`)},
		{ID: "c2", Name: "delegate", Args: json.RawMessage(`{"task":"t"}`)},
	}
	results := []model.ToolResult{
		{CallID: "c1", Name: "search", Content: "Results"},
		{CallID: "c2", Name: "delegate", Content: "boom", IsError: true},
	}
	req := workerReq()
	req.Turn = 2
	req.Context = []string{"input one", "input two"}
	req.History = []model.Exchange{{Text: "Let me look.", Calls: calls, Results: results}}
	req.ToolResults = results
	req.Guidance = "Cover optics."
	req.Tools = []model.ToolDef{{Name: "search", Description: "Search the web.", Schema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)}}
	st, err := m.Stream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, st); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	var roles []string
	for _, msg := range r.Messages {
		roles = append(roles, msg.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,tool,user" {
		t.Fatalf("roles %s", got)
	}
	if r.Model != "small" || r.ResponseFormat != nil {
		t.Fatalf("model %q response_format %+v", r.Model, r.ResponseFormat)
	}
	a := r.Messages[2]
	if string(a.Content) != "Let me look." || len(a.ToolCalls) != 2 || a.ToolCalls[0].Function.Arguments != `{"query":"sky"}` || a.ToolCalls[1].ID != "c2" {
		t.Fatalf("assistant message %+v", a)
	}
	if r.Messages[4].ToolCallID != "c2" || string(r.Messages[4].Content) != openai.ErrorPrefix+"boom" {
		t.Fatalf("tool message %+v", r.Messages[4])
	}
	if len(r.Tools) != 1 || r.Tools[0].Type != "function" || r.Tools[0].Function.Name != "search" || !strings.Contains(string(r.Tools[0].Function.Parameters), `"required":["query"]`) {
		t.Fatalf("tools %+v", r.Tools)
	}
	back, err := openaitest.RequestOf(&r)
	if err != nil {
		t.Fatal(err)
	}
	if back.Role != model.RoleWorker || back.AgentID != "n001" || back.Goal != req.Goal || back.Question != req.Question ||
		back.Turn != 2 || back.Attempt != 1 || len(back.Context) != 2 || back.Guidance != req.Guidance ||
		len(back.ToolResults) != 2 || back.ToolResults[1].Name != "delegate" || !back.ToolResults[1].IsError || back.ToolResults[1].Content != "boom" {
		t.Fatalf("RequestOf = %+v", back)
	}
}

// TestModel_ContextBudget: over the budget, the oldest inputs go first,
// then the oldest earlier turns; the system prompt, the task, the latest
// turn and the last message stay, and a note says what was left out.
func TestModel_ContextBudget(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 4000) // 1000 estimated tokens
	req := workerReq()
	req.Turn = 4
	req.Context = []string{"OLDEST " + big, "MIDDLE " + big, "NEWEST " + big}
	for _, id := range []string{"h1", "h2", "h3"} {
		req.History = append(req.History, model.Exchange{
			Text:    "turn " + id + " " + big,
			Calls:   []model.ToolCall{{ID: id, Name: "search", Args: json.RawMessage(`{"query":"q"}`)}},
			Results: []model.ToolResult{{CallID: id, Name: "search", Content: "result " + id}},
		})
	}
	for _, tc := range []struct {
		budget          int
		inputs, turns   []string // kept
		droppedAnything bool
	}{
		{budget: 0, inputs: []string{"OLDEST", "MIDDLE", "NEWEST"}, turns: []string{"h1", "h2", "h3"}},
		{budget: 5500, inputs: []string{"MIDDLE", "NEWEST"}, turns: []string{"h1", "h2", "h3"}, droppedAnything: true},
		{budget: 2500, inputs: nil, turns: []string{"h2", "h3"}, droppedAnything: true},
		{budget: 100, inputs: nil, turns: []string{"h3"}, droppedAnything: true},
	} {
		m, err := openai.New(openai.Config{BaseURL: "http://unused/v1", Model: "m", ContextTokens: tc.budget})
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Params(req)
		if err != nil {
			t.Fatal(err)
		}
		js, err := json.Marshal(p.Messages)
		if err != nil {
			t.Fatal(err)
		}
		var msgs []openaitest.Message
		if err := json.Unmarshal(js, &msgs); err != nil {
			t.Fatal(err)
		}
		if string(msgs[0].Content) != openai.SystemPrompt(model.RoleWorker) || msgs[len(msgs)-1].Role != "user" || !strings.Contains(string(msgs[len(msgs)-1].Content), "<turn>\n4\n</turn>") {
			t.Fatalf("budget %d: the system prompt or the turn message went", tc.budget)
		}
		task := string(msgs[1].Content)
		if !strings.Contains(task, req.Goal) || !strings.Contains(task, req.Question) {
			t.Fatalf("budget %d: the task went", tc.budget)
		}
		for _, in := range []string{"OLDEST", "MIDDLE", "NEWEST"} {
			kept := strings.Contains(task, in+" ")
			if want := contains(tc.inputs, in); kept != want {
				t.Fatalf("budget %d: input %s kept %v, want %v", tc.budget, in, kept, want)
			}
		}
		var turns []string
		for _, msg := range msgs {
			if msg.Role == "assistant" {
				turns = append(turns, msg.ToolCalls[0].ID)
			}
		}
		if strings.Join(turns, ",") != strings.Join(tc.turns, ",") {
			t.Fatalf("budget %d: turns %v, want %v", tc.budget, turns, tc.turns)
		}
		if got := strings.Contains(task, "<omitted>"); got != tc.droppedAnything {
			t.Fatalf("budget %d: omitted note %v", tc.budget, got)
		}
		if tc.budget >= 2500 {
			var n int
			for _, msg := range msgs {
				n += openai.EstimateTokens(string(msg.Content))
				for _, c := range msg.ToolCalls {
					n += openai.EstimateTokens(c.Function.Arguments)
				}
			}
			if n > tc.budget {
				t.Fatalf("budget %d: %d estimated tokens", tc.budget, n)
			}
		}
	}
}

// TestModel_ContextBudgetTranscript: a debater over budget loses its oldest
// transcript lines (after the inputs), newest kept.
func TestModel_ContextBudgetTranscript(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("y", 2000) // 500 estimated tokens
	req := model.Request{Role: model.RoleDebater, AgentID: "n004:a1", Persona: "skeptic", Round: 3, Turn: 1, Attempt: 1,
		Question: "q", Transcript: []string{"L1 " + big, "L2 " + big, "L3 " + big, "L4 " + big}}
	m, err := openai.New(openai.Config{BaseURL: "http://unused/v1", Model: "m", ContextTokens: 1400})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Params(req)
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(p.Messages)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []openaitest.Message
	if err := json.Unmarshal(js, &msgs); err != nil {
		t.Fatal(err)
	}
	task := string(msgs[1].Content)
	for line, want := range map[string]bool{"L1": false, "L2": false, "L3": true, "L4": true} {
		if got := strings.Contains(task, "<line>\n"+line+" "); got != want {
			t.Errorf("line %s kept %v, want %v", line, got, want)
		}
	}
	if !strings.Contains(task, "2 earlier transcript lines were left out") {
		t.Errorf("no note of the dropped lines:\n%.300s", task)
	}
	back, err := openaitest.RequestOf(&openaitest.Request{Messages: msgs})
	if err != nil || back.Round != 3 || back.Persona != "skeptic" || len(back.Transcript) != 2 {
		t.Fatalf("RequestOf %+v, %v", back, err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestSchemas_ValidateScriptedOutput: the plans and diffs the scripted
// model outputs (teams, debates, tools, a steering diff) validate against
// the schemas the backend sends.
func TestSchemas_ValidateScriptedOutput(t *testing.T) {
	t.Parallel()
	resolve := func(raw json.RawMessage) *jsonschema.Resolved {
		var s jsonschema.Schema
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	plan, diff := resolve(openai.PlanSchema()), resolve(openai.DiffSchema())
	sc := messages.Scenario{Nodes: 8, Teams: 1, ToolsPerNode: 1, SubagentsPerNode: 1, Debate: &messages.DebateScenario{Nodes: 1, Agents: 3, Rounds: 2, Judge: true},
		Remote: &messages.RemoteScenario{Agent: "helper", Nodes: messages.NodeSelector{IDs: []string{"n008"}}}} // a node naming a remote agent
	js, err := json.Marshal(scripted.PlanFor(sc.WithDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	var v any // the validator takes decoded JSON
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	if err := plan.Validate(v); err != nil {
		t.Fatalf("plan %s: %v", js, err)
	}
	d := messages.GraphDiff{Ops: []messages.DiffOp{{Op: messages.OpAddNode, Node: &messages.PlanNode{ID: scripted.SteerNodeID("more"), Goal: "more", Deps: []string{"n001"}}}, {Op: messages.OpSetTools, NodeID: "n002", Tools: []string{"search"}}}}
	js, _ = json.Marshal(d)
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	if err := diff.Validate(v); err != nil {
		t.Fatalf("diff %s: %v", js, err)
	}
	if err := plan.Validate(map[string]any{"nodes": []any{map[string]any{"id": "a"}}}); err == nil {
		t.Fatal("a node without a goal validated")
	}
}

func TestNew_Errors(t *testing.T) {
	t.Parallel()
	if _, err := openai.New(openai.Config{Model: "m"}); !errors.Is(err, openai.ErrNoBaseURL) {
		t.Fatalf("err %v", err)
	}
	if _, err := openai.New(openai.Config{BaseURL: "http://x/v1"}); !errors.Is(err, openai.ErrNoModel) {
		t.Fatalf("err %v", err)
	}
}

func TestKeyFromEnv(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if k := openai.KeyFromEnv(env(map[string]string{"CONCLAVE_MODEL_API_KEY": "a", "OPENAI_API_KEY": "b"})); k != "a" {
		t.Fatalf("key %q", k)
	}
	if k := openai.KeyFromEnv(env(map[string]string{"OPENAI_API_KEY": "b"})); k != "b" {
		t.Fatalf("key %q", k)
	}
}

// usageWithCacheWrite adds the cache_creation_input_tokens a proxy in front
// of an Anthropic model sends.
func usageWithCacheWrite(c openaitest.Chunk, written int64) openaitest.Chunk {
	c.Usage.CacheCreationInputTokens = written
	return c
}

// TestParams_Temperature: a turn that asks for a temperature (a debater's
// contentiousness) sends it; other turns leave the server's default.
func TestParams_Temperature(t *testing.T) {
	t.Parallel()
	m, err := openai.New(openai.Config{BaseURL: "http://unused/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	hot := 0.9
	for _, tc := range []struct {
		req  model.Request
		want string
	}{
		{model.Request{Role: model.RoleDebater, AgentID: "d:a1", Round: 1, Temperature: &hot}, `"temperature":0.9`},
		{model.Request{Role: model.RoleWorker, AgentID: "n001", Goal: "g"}, ""},
	} {
		p, err := m.Params(tc.req)
		if err != nil {
			t.Fatal(err)
		}
		js, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(js), `"temperature"`); got != (tc.want != "") || tc.want != "" && !strings.Contains(string(js), tc.want) {
			t.Errorf("%s: request %s, want temperature %q", tc.req.Role, js, tc.want)
		}
	}
}

// TestParams_AdvisorConsult: a consult reaches the advisor with the
// consult system prompt and its question in a <consult> tag; a check
// keeps the gate's prompt.
func TestParams_AdvisorConsult(t *testing.T) {
	t.Parallel()
	m, err := openai.New(openai.Config{BaseURL: "http://unused/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		req       model.Request
		want, not string
	}{
		{model.Request{Role: model.RoleAdvisor, AgentID: "n001", Goal: "g", Review: "so far", Consult: "which source first?"},
			`\u003cconsult\u003e\nwhich source first?`, "signal"},
		{model.Request{Role: model.RoleAdvisor, AgentID: "n001", Goal: "g", Review: "done"}, "signal", "consult"},
	} {
		p, err := m.Params(tc.req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		js := string(b)
		if !strings.Contains(js, "You are the advisor") || !strings.Contains(js, tc.want) || strings.Contains(js, tc.not) {
			t.Errorf("consult %q: request %s, want %q and not %q", tc.req.Consult, js, tc.want, tc.not)
		}
	}
}
