// Package openaitest is an OpenAI-compatible Chat Completions server for
// tests. It streams the real wire format — "data: {json}\n\n" frames, then
// "data: [DONE]" — and answers each request with the next scripted Reply
// (text, reasoning_content or reasoning, tool calls split across chunks
// with interleaved indexes, the usage chunk, a 429 with Retry-After, a 500,
// a malformed chunk, a connection dropped mid-stream) or, in council mode,
// as a real model of every role: it recognises the role from the system
// prompt, rebuilds the model.Request from the messages, runs the scripted
// model (model/scripted) on it and streams its output as chunks, in
// OpenAI's format or in a real server's dialect (Config.Dialect: Azure,
// vLLM, llama.cpp, Ollama, LiteLLM, OpenRouter, Groq, DeepSeek, Gemini,
// Mistral, NVIDIA NIM). Everything is deterministic.
//
// Serve it over TCP (NewServer, an httptest.Server) or in memory
// (Server.InMemory: net.Pipe connections, for testing/synctest bubbles).
package openaitest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// Reply is the answer to one request.
type Reply struct {
	// Status, when not 0 or 200, answers with that status and an OpenAI
	// error body (Message), with Header (such as Retry-After).
	Status  int
	Header  http.Header
	Message string
	// Chunks are streamed in order, each in its own frame.
	Chunks []Chunk
	// Raw frames' data are streamed after the chunks as they are (a
	// malformed chunk).
	Raw []string
	// SSE, when set, is a recorded stream (frames, comments, its
	// "data: [DONE]") written as it is after the chunks and frames,
	// ending the answer.
	SSE []byte
	// Drop cuts the connection after the chunks, without [DONE] and without
	// ending the chunked body (a dropped connection).
	Drop bool
	// NoDone ends the body cleanly but without "data: [DONE]".
	NoDone bool
	// Hold, when set, keeps the answer open after the chunks until it is
	// closed or the client goes away (a model that stalls).
	Hold <-chan struct{}
	// KeepAlive, with Hold, sends an SSE comment (": ping") at this
	// interval while the answer is held: a server that keeps the
	// connection alive but sends no chunk.
	KeepAlive time.Duration
	// NoHeaders holds the answer before its headers, until Hold is closed
	// or the client goes away (a server that never answers).
	NoHeaders bool
}

// Config configures a Server.
type Config struct {
	// Replies answer the first requests, in order.
	Replies []Reply
	// Council, when set, answers every request after Replies as the
	// scripted model of this scenario would (council mode); without it, a
	// request with no reply left gets a 500.
	Council *messages.Scenario
	// Dialect is the server whose streaming the council's answers take
	// (the zero Dialect: openaitest's rendering of OpenAI's format).
	Dialect Dialect
	// TextOnly makes the model text-only: a request with an image_url,
	// input_audio or file part is refused, as upstream refuses them for a
	// model without vision (CheckTextOnly).
	TextOnly bool
}

// MaxRecorded bounds the requests a Server keeps for Requests; later ones
// are served but not kept.
const MaxRecorded = 1024

// Server is the fake server. Safe for concurrent use.
type Server struct {
	council  *council
	textOnly bool

	mu       sync.Mutex
	replies  []Reply
	requests []Request
	served   int

	// down: every request answers 503 (an outage; SetDown).
	down atomic.Bool
	// refused counts the requests answered 503 while down.
	refused atomic.Int64

	ts *httptest.Server
	// URL is the API root to give the backend (…/v1), once served.
	URL string
}

// SetDown starts (true) or ends an outage: while down, every request,
// GET /models included, answers 503 and is not served.
func (s *Server) SetDown(down bool) { s.down.Store(down) }

// Refused is how many requests were answered 503 while down.
func (s *Server) Refused() int { return int(s.refused.Load()) }

// New returns an unstarted Server (see Start and InMemory).
func New(cfg Config) (*Server, error) {
	s := &Server{replies: append([]Reply(nil), cfg.Replies...), textOnly: cfg.TextOnly}
	if cfg.Council != nil {
		c, err := newCouncil(*cfg.Council, cfg.Dialect)
		if err != nil {
			return nil, err
		}
		s.council = c
	}
	return s, nil
}

// NewServer starts a Server on a loopback port; tb.Cleanup closes it.
func NewServer(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	s.ts = httptest.NewServer(s)
	s.URL = s.ts.URL + "/v1"
	tb.Cleanup(s.ts.Close)
	return s
}

// Enqueue adds replies after the ones left.
func (s *Server) Enqueue(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, r...)
}

// Requests returns the requests served so far (at most MaxRecorded).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Reported is the usage the council has reported so far, summed, as the
// backend should read it (prompt, completion, cached and cache-write
// tokens); zero without a council or in a dialect that sends none.
func (s *Server) Reported() messages.Usage {
	if s.council == nil {
		return messages.Usage{}
	}
	s.council.mu.Lock()
	defer s.council.mu.Unlock()
	return s.council.reported
}

// Served is how many requests the server has answered or is answering.
func (s *Server) Served() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served
}

// maxBody bounds a request body.
const maxBody = 32 << 20

// ServeHTTP answers POST …/chat/completions, and GET …/models (the list
// of models, as the API answers it: what a health probe asks).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.down.Load() {
		s.refused.Add(1)
		writeError(w, http.StatusServiceUnavailable, nil, "The server is overloaded or not ready yet.")
		return
	}
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"test-model","object":"model","created":0,"owned_by":"openaitest"}]}`+"\n")
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		writeError(w, http.StatusNotFound, nil, "not found: "+r.Method+" "+r.URL.Path)
		return
	}
	var req Request
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, nil, "bad request: "+err.Error())
		return
	}
	req.Authorization = r.Header.Get("Authorization")
	req.Traceparent = r.Header.Get("Traceparent")
	if bad := CheckRequest(&req); bad != nil { // what upstream refuses, the fake refuses (rules.go)
		writeInvalid(w, bad)
		return
	}
	if bad := CheckTextOnly(&req); s.textOnly && bad != nil {
		writeInvalid(w, bad)
		return
	}
	s.mu.Lock()
	s.served++
	if len(s.requests) < MaxRecorded {
		s.requests = append(s.requests, req)
	}
	var reply *Reply
	if len(s.replies) > 0 {
		reply = &s.replies[0]
		s.replies = s.replies[1:]
	}
	s.mu.Unlock()

	switch {
	case reply != nil:
		serveReply(r.Context(), w, &req, reply)
	case s.council != nil:
		s.council.serve(w, r, &req)
	default:
		writeError(w, http.StatusInternalServerError, nil, "openaitest: no reply left")
	}
}

// writeInvalid answers a request upstream refuses as upstream does.
func writeInvalid(w http.ResponseWriter, e *InvalidRequest) {
	d := errorDetail{Message: e.Message, Type: "invalid_request_error"}
	if e.Param != "" {
		d.Param = &e.Param
	}
	if e.Code != "" {
		d.Code = &e.Code
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(errorBody{Error: d})
}

func writeError(w http.ResponseWriter, status int, h http.Header, msg string) {
	for k, v := range h {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody{Error: errorDetail{Message: msg, Type: "openaitest_error"}})
}

// serveReply streams a scripted reply.
func serveReply(ctx context.Context, w http.ResponseWriter, req *Request, rep *Reply) {
	if rep.Status != 0 && rep.Status != http.StatusOK {
		msg := rep.Message
		if msg == "" {
			msg = http.StatusText(rep.Status)
		}
		writeError(w, rep.Status, rep.Header, msg)
		return
	}
	if rep.NoHeaders {
		select {
		case <-rep.Hold: // nil: never
		case <-ctx.Done():
		}
		return
	}
	sw := newSSE(w, req.Model)
	for _, c := range rep.Chunks {
		if sw.chunk(c) != nil {
			return
		}
	}
	if rep.Hold != nil && !hold(ctx, sw, rep) {
		return
	}
	for _, raw := range rep.Raw {
		if sw.frame([]byte(raw)) != nil {
			return
		}
	}
	if rep.SSE != nil {
		_ = sw.raw(rep.SSE)
		return
	}
	switch {
	case rep.Drop:
		sw.drop()
	case rep.NoDone:
	default:
		_ = sw.done()
	}
}

// hold waits for rep.Hold, sending keep-alive comments meanwhile if asked;
// false when the client went away first.
func hold(ctx context.Context, sw *sse, rep *Reply) bool {
	var tick <-chan time.Time
	if rep.KeepAlive > 0 {
		t := time.NewTicker(rep.KeepAlive)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-rep.Hold:
			return true
		case <-ctx.Done():
			return false
		case <-tick:
			if sw.comment("ping") != nil {
				return false
			}
		}
	}
}

// sse writes the frames of one streamed answer.
type sse struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	model string
	id    string
	start bool
}

func newSSE(w http.ResponseWriter, model string) *sse {
	return &sse{w: w, rc: http.NewResponseController(w), model: model, id: "chatcmpl-openaitest"}
}

func (s *sse) begin() {
	if s.start {
		return
	}
	s.start = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
}

// chunk writes c, filling its id, object and model.
func (s *sse) chunk(c Chunk) error {
	if c.ID == "" {
		c.ID = s.id
	}
	if c.Object == "" {
		c.Object = "chat.completion.chunk"
	}
	if c.Model == "" {
		c.Model = s.model
	}
	if c.Choices == nil {
		c.Choices = []ChunkChoice{}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return s.frame(b)
}

func (s *sse) frame(data []byte) error {
	s.begin()
	buf := make([]byte, 0, len(data)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := s.w.Write(buf); err != nil {
		return err
	}
	return s.rc.Flush()
}

// raw writes b as it is.
func (s *sse) raw(b []byte) error {
	s.begin()
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// comment writes an SSE comment line (a keep-alive).
func (s *sse) comment(text string) error {
	s.begin()
	if _, err := s.w.Write([]byte(": " + text + "\n\n")); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sse) done() error { return s.frame([]byte("[DONE]")) }

// drop flushes what was written and closes the connection under the
// response, so the client sees the chunked body cut short.
func (s *sse) drop() {
	s.begin()
	_ = s.rc.Flush()
	conn, _, err := s.rc.Hijack()
	if err != nil {
		return
	}
	_ = conn.Close()
}

// InMemory serves s over in-memory connections (net.Pipe) and returns a
// client that reaches it (any URL host: use "http://openaitest/v1") and a
// stop func that shuts the server down and waits for it. Inside a
// testing/synctest bubble, call it inside the bubble: every goroutine then
// blocks durably, so virtual time advances while a request waits.
func (s *Server) InMemory() (client *http.Client, stop func()) {
	l := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	hs := &http.Server{Handler: s}
	served := make(chan struct{})
	go func() { // owned by stop: Close ends Serve, stop waits for it
		defer close(served)
		_ = hs.Serve(l)
	}()
	tr := &http.Transport{
		DialContext: l.dial,
		// One request per connection: no idle connection outlives a
		// request, so nothing of it is left when stop returns.
		DisableKeepAlives: true,
	}
	return &http.Client{Transport: tr}, func() {
		_ = hs.Close()
		tr.CloseIdleConnections()
		<-served
	}
}

// pipeListener hands out the server ends of net.Pipe connections.
type pipeListener struct {
	conns chan net.Conn // unbuffered: a dial waits for Accept
	done  chan struct{}
	once  sync.Once
}

var errListenerClosed = errors.New("openaitest: listener closed")

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, errListenerClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, errListenerClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "openaitest" }
