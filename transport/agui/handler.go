package agui

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/transport/internal/httpjson"
)

// Config configures a Handler. Only Engine is required; the zero value of
// every other field is valid.
type Config struct {
	Engine *actors.Engine
	Logger *slog.Logger
	Now    func() time.Time
	// Authenticate finds the caller's tenant for ServeHTTP. Default: every
	// caller is messages.LocalTenant. A failure is answered 401 with the
	// error's text. ServeTenant does not call it: its caller authenticated.
	Authenticate func(*http.Request) (messages.TenantID, error)
	// MaxBody bounds the request body. A resume carries the whole
	// conversation, so the default is generous: 16 MiB.
	MaxBody int64
	// Heartbeat is the interval of ": ping" comments on an idle stream. Default 10 s.
	Heartbeat time.Duration
	// WriteTimeout bounds one write to the stream. Default 30 s.
	WriteTimeout time.Duration
	// Settle is how long a run must stay quiet, with open interrupts and
	// every agent parked, before its AG-UI run ends with the interrupt
	// outcome. Default 100 ms.
	Settle time.Duration
	// MaxHold bounds how long an open interrupt waits while other agents
	// of the run keep working; then the AG-UI run ends anyway, and those
	// agents are reported suspended. Default 2 s.
	MaxHold time.Duration
	// ResumeGrace is how long a suspended run stays resumable after its
	// interrupts expire (a client then answers them "cancelled" and sees
	// the rest of the run). Default 10 minutes.
	ResumeGrace time.Duration
	// MaxSuspended bounds the suspended runs remembered. Default 100 000.
	MaxSuspended int
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Authenticate == nil {
		c.Authenticate = func(*http.Request) (messages.TenantID, error) { return messages.LocalTenant, nil }
	}
	if c.MaxBody == 0 {
		c.MaxBody = 16 << 20
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 10 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.Settle == 0 {
		c.Settle = 100 * time.Millisecond
	}
	if c.MaxHold == 0 {
		c.MaxHold = 2 * time.Second
	}
	if c.ResumeGrace == 0 {
		c.ResumeGrace = 10 * time.Minute
	}
	if c.MaxSuspended == 0 {
		c.MaxSuspended = 100_000
	}
	return c
}

// Handler serves POST /api/v1/agui. Create it with New.
type Handler struct {
	cfg    Config
	engine *actors.Engine
	susp   *suspensions

	closing  atomic.Bool
	stop     context.Context // cancelled by Shutdown: streams end with RUN_ERROR
	stopAll  context.CancelFunc
	mu       sync.Mutex // guards streams against Shutdown's wait
	streams  sync.WaitGroup
	shutOnce sync.Once
}

var _ http.Handler = (*Handler)(nil)

// New returns a Handler. It panics without cfg.Engine.
func New(cfg Config) *Handler {
	if cfg.Engine == nil {
		panic("agui: Config.Engine is required")
	}
	cfg = cfg.withDefaults()
	stop, cancel := context.WithCancel(context.Background())
	return &Handler{cfg: cfg, engine: cfg.Engine, susp: newSuspensions(cfg.Now, cfg.ResumeGrace, cfg.MaxSuspended), stop: stop, stopAll: cancel}
}

// ServeHTTP authenticates with Config.Authenticate and serves the request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, errorf(http.StatusMethodNotAllowed, codeMethodNotAllowed, r.Method+" is not allowed here; use POST"))
		return
	}
	tenant, err := h.cfg.Authenticate(r)
	if err != nil {
		// Answered at once, body unread, connection closed: an
		// unauthenticated request costs no more than its headers.
		httpjson.WriteErrorAndClose(w, errorf(http.StatusUnauthorized, codeUnauthorized, err.Error()))
		return
	}
	h.ServeTenant(w, r, tenant)
}

// Shutdown ends every open stream with RUN_ERROR{code:"shutting_down"}
// (the Conclave runs go on), refuses new requests with 503 and waits for
// the streams to return. It is idempotent and returns ctx.Err() if ctx
// ends first. Shutting the engine down first also ends every stream, with
// the runs' own terminal events.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.shutOnce.Do(func() {
		h.mu.Lock()
		h.closing.Store(true)
		h.mu.Unlock()
		h.stopAll()
	})
	done := make(chan struct{})
	go func() { h.streams.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// enter registers a request with Shutdown; false once shutting down.
func (h *Handler) enter() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing.Load() {
		return false
	}
	h.streams.Add(1)
	return true
}

// engineTimeout bounds one call into the engine before the stream starts.
const engineTimeout = 10 * time.Second

// ServeTenant serves POST /api/v1/agui for an authenticated tenant: it
// decodes RunAgentInput and answers with the SSE stream of one AG-UI run.
// Malformed requests are answered with a JSON error before any byte of a
// stream; a request AG-UI says to refuse in-band (input while interrupts
// are pending, an invalid resume) gets a stream of one RUN_ERROR.
func (h *Handler) ServeTenant(w http.ResponseWriter, r *http.Request, tenant messages.TenantID) {
	if !h.enter() {
		writeError(w, errorf(http.StatusServiceUnavailable, codeUnavailable, "server is shutting down"))
		return
	}
	defer h.streams.Done()
	in, aerr := h.decode(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if tenant == "" {
		tenant = messages.LocalTenant
	}
	session := messages.SessionID(in.ThreadID)
	// In a cluster, a thread is served by its session's owner: 421 with
	// the owner's id otherwise, which the node's forwarder turns into a
	// proxied request (cluster.Forwarder).
	if err := h.engine.Own(r.Context(), tenant, session); err != nil {
		writeError(w, engineError(err))
		return
	}
	if len(in.Resume) > 0 {
		h.resume(w, r, tenant, session, in)
		return
	}
	h.start(w, r, tenant, session, in)
}

func (h *Handler) decode(w http.ResponseWriter, r *http.Request) (*RunAgentInput, *apiError) {
	body, aerr := httpjson.ReadBody(w, r, h.cfg.MaxBody)
	if aerr != nil {
		return nil, aerr
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errorf(http.StatusBadRequest, codeInvalidJSON, "request body is empty; expected RunAgentInput")
	}
	var in RunAgentInput
	// Not strict about fields: AG-UI clients send fields of newer protocol
	// versions, which this server ignores. Valid UTF-8 and a single JSON
	// value are required all the same.
	if err := messages.DecodeOpen(body, &in); err != nil {
		aerr := httpjson.JSONError(err)
		aerr.Message = "RunAgentInput: " + aerr.Message
		return nil, aerr
	}
	if _, err := messages.NewSessionID(in.ThreadID); err != nil {
		return nil, errorf(http.StatusBadRequest, codeBadRequest, "threadId is the Conclave session id: 1 to 128 of A-Z a-z 0-9 _ -")
	}
	if in.RunID == "" || len(in.RunID) > 256 {
		return nil, errorf(http.StatusBadRequest, codeBadRequest, "runId must be a non-empty string of at most 256 bytes")
	}
	for _, e := range in.Resume {
		if e.InterruptID == "" || (e.Status != ResumeResolved && e.Status != ResumeCancelled) {
			return nil, errorf(http.StatusBadRequest, codeBadRequest, `every resume entry needs an interruptId and a status "resolved" or "cancelled"`)
		}
	}
	return &in, nil
}

// runOptions are the run options RunAgentInput.forwardedProps may carry,
// with the meaning they have in POST /api/v1/runs. Other keys are ignored:
// forwardedProps is an open bag that front ends fill with their own props.
type runOptions struct {
	HITL                   messages.HITLMode        `json:"hitl"`
	Scenario               json.RawMessage          `json:"scenario"`
	Seed                   *int64                   `json:"seed"`
	Concurrency            int                      `json:"concurrency"`
	ApprovalTimeoutSeconds int                      `json:"approval_timeout_seconds"`
	ApprovalTimeoutAction  messages.Decision        `json:"approval_timeout_action"`
	Advisor                *messages.AdvisorOptions `json:"advisor"`
	MaxDelegationRounds    int                      `json:"max_delegation_rounds"`
	Budget                 *messages.RunBudget      `json:"budget"`
	// Question is used when messages hold no user message.
	Question string `json:"question"`
}

func (h *Handler) startCommand(in *RunAgentInput, tenant messages.TenantID, session messages.SessionID) (messages.StartRun, *apiError) {
	var o runOptions
	if fp := bytes.TrimSpace(in.ForwardedProps); len(fp) > 0 && !bytes.Equal(fp, []byte("null")) {
		if fp[0] != '{' {
			return messages.StartRun{}, errorf(http.StatusBadRequest, codeInvalidJSON, "forwardedProps must be an object")
		}
		if err := json.Unmarshal(fp, &o); err != nil {
			return messages.StartRun{}, errorf(http.StatusBadRequest, codeInvalidJSON, "forwardedProps: "+err.Error())
		}
	}
	cmd := messages.StartRun{Tenant: tenant, SessionID: session, HITL: o.HITL, Seed: o.Seed, Concurrency: o.Concurrency,
		ApprovalTimeoutSeconds: o.ApprovalTimeoutSeconds, ApprovalTimeoutAction: o.ApprovalTimeoutAction,
		Advisor: o.Advisor, MaxDelegationRounds: o.MaxDelegationRounds, Budget: o.Budget}
	if messages.ValidRequestID(in.RunID) {
		cmd.RequestID = in.RunID // the AG-UI run that started it
	}
	if sc := bytes.TrimSpace(o.Scenario); len(sc) > 0 && !bytes.Equal(sc, []byte("null")) {
		var s messages.Scenario
		if err := messages.DecodeStrict(sc, &s); err != nil {
			aerr := httpjson.JSONError(err)
			aerr.Message = "forwardedProps.scenario: " + aerr.Message
			return messages.StartRun{}, aerr
		}
		cmd.Scenario = &s
	}
	var at int
	cmd.Question, at = question(in.Messages)
	if at >= 0 {
		var aerr *apiError
		if cmd.Files, aerr = mediaFiles(at, in.Messages[at].Content); aerr != nil {
			return messages.StartRun{}, aerr
		}
	}
	if cmd.Question == "" {
		cmd.Question = o.Question
	}
	if cmd.Question == "" {
		return messages.StartRun{}, errorf(http.StatusUnprocessableEntity, codeBadRequest, "no question: messages hold no user message with text content")
	}
	return cmd, nil
}

// question is the text of the last user message with text, and its
// index (-1: none).
func question(msgs []InputMessage) (string, int) {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != "user" {
			continue
		}
		c := bytes.TrimSpace(m.Content)
		if len(c) == 0 {
			continue
		}
		if c[0] == '"' {
			var s string
			if json.Unmarshal(c, &s) == nil && s != "" {
				return s, i
			}
			continue
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(c, &parts) != nil {
			continue
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" && p.Text != "" {
				if b.Len() > 0 {
					b.WriteString("\n")
				}
				b.WriteString(p.Text)
			}
		}
		if b.Len() > 0 {
			return b.String(), i
		}
	}
	return "", -1
}

// mediaPart is an AG-UI media content part (image, audio, video,
// document): where its bytes are (source) and, in metadata, an optional
// filename; or a part of the multimodal draft that came before 1.0's
// (type "binary": mimeType, data or url, filename), which clients still
// send.
type mediaPart struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	// The "binary" part's fields.
	MimeType string       `json:"mimeType"`
	Data     string       `json:"data"`
	URL      string       `json:"url"`
	Filename string       `json:"filename"`
	Source   *mediaSource `json:"source"`
	Metadata struct {
		Filename string `json:"filename"`
	} `json:"metadata"`
}

// mediaSource is where a media part's bytes are: data (inline base64),
// url, or file (a provider's handle, not read here).
type mediaSource struct {
	Type     string `json:"type"`
	Value    string `json:"value"`
	MimeType string `json:"mimeType"`
}

// mediaFiles are the run's files of the question's message (messages[at],
// content c): its media parts, bytes inline (source data, base64) or by URL
// (source url, fetched by the engine from the operator's prefixes only).
// A part named by a provider's file handle (source file) is refused: no
// bytes travel with it and this server cannot read the provider's store.
// A file is named by metadata.filename, else its id, else
// "<type>-<index>".
func mediaFiles(at int, c json.RawMessage) ([]messages.InputFile, *apiError) {
	c = bytes.TrimSpace(c)
	if len(c) == 0 || c[0] != '[' {
		return nil, nil
	}
	var parts []mediaPart
	if err := json.Unmarshal(c, &parts); err != nil {
		return nil, nil // not parts this server reads: the question's text is what counts
	}
	var out []messages.InputFile
	for j, p := range parts {
		if p.Type == "text" {
			continue
		}
		where := fmt.Sprintf("messages[%d].content[%d]", at, j)
		if p.Type == "binary" { // the draft's shape, as a source
			p.Metadata.Filename = p.Filename
			switch {
			case p.Data != "":
				p.Source = &mediaSource{Type: "data", Value: p.Data, MimeType: p.MimeType}
			case p.URL != "":
				p.Source = &mediaSource{Type: "url", Value: p.URL, MimeType: p.MimeType}
			default:
				p.Source = &mediaSource{Type: "id", Value: p.ID}
			}
		}
		if p.Source == nil {
			return nil, errorf(http.StatusUnprocessableEntity, string(messages.FileInvalid), where+": a "+p.Type+" part needs a source")
		}
		f := messages.InputFile{Name: p.Metadata.Filename, MediaType: p.Source.MimeType}
		if f.Name == "" {
			f.Name = p.ID
		}
		if f.Name == "" {
			f.Name = fmt.Sprintf("%s-%d", p.Type, j)
		}
		switch p.Source.Type {
		case "data":
			data, err := base64.StdEncoding.DecodeString(p.Source.Value)
			if err != nil {
				return nil, errorf(http.StatusUnprocessableEntity, string(messages.FileInvalid), where+".source.value is not base64: "+err.Error())
			}
			f.Data = data
		case "url":
			f.URL = p.Source.Value
		default:
			return nil, errorf(http.StatusUnprocessableEntity, string(messages.FileInvalid),
				fmt.Sprintf("%s: a source of type %q is not read here (data or url)", where, p.Source.Type))
		}
		out = append(out, f)
	}
	return out, nil
}

// start answers a RunAgentInput without resume: a new Conclave run in the
// thread's session, streamed as one AG-UI run.
func (h *Handler) start(w http.ResponseWriter, r *http.Request, tenant messages.TenantID, session messages.SessionID, in *RunAgentInput) {
	cmd, aerr := h.startCommand(in, tenant, session)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	cmd.TraceParent = r.Header.Get("Traceparent") // the run's trace continues the caller's
	ctx, cancel := context.WithTimeout(r.Context(), engineTimeout)
	defer cancel()
	pending, _, err := h.engine.PendingInterrupts(ctx, tenant, session, "", 1)
	if err != nil && !errors.Is(err, actors.ErrSessionNotFound) {
		writeError(w, engineError(err))
		return
	}
	if len(pending) > 0 {
		// AG-UI: pending interrupts block new input; the client is told in-band.
		h.refuse(w, r, "pending_interrupts", fmt.Sprintf("thread %s has pending interrupts (first: %s); answer them with resume before sending new input",
			session, pending[0].InterruptID))
		return
	}
	head, err := h.engine.Head(ctx, tenant, session)
	if err != nil && !errors.Is(err, actors.ErrSessionNotFound) {
		writeError(w, engineError(err))
		return
	}
	ref, err := h.engine.StartRun(ctx, cmd)
	if err != nil {
		writeError(w, engineError(err))
		return
	}
	sub, err := h.engine.Subscribe(ctx, messages.Subscribe{Tenant: tenant, SessionID: ref.SessionID, After: head})
	if err != nil {
		_ = h.engine.Abort(ctx, messages.AbortRun{Tenant: tenant, RunID: ref.RunID, Reason: "the AG-UI stream could not subscribe"})
		writeError(w, engineError(err))
		return
	}
	defer sub.Close()
	st := h.newStream(w, r)
	seg := &segment{
		h: h, st: st, sub: sub, tenant: tenant, session: ref.SessionID, proj: NewProjector(ref.RunID), cursor: head,
		begin: BeginOptions{ThreadID: in.ThreadID, RunID: in.RunID, ParentRunID: in.ParentRunID},
	}
	seg.run(r.Context())
}

// refuse answers with a stream of one RUN_ERROR.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, code, message string) {
	st := h.newStream(w, r)
	_ = st.write([]Event{&RunError{Base: base(TypeRunError, h.cfg.Now()), Message: message, Code: code}})
}

// resume answers a RunAgentInput with resume[]: it answers the interrupts
// of the suspended Conclave run and streams its continuation as a new
// AG-UI run. A replay of a resume (same runId, same entries) streams the
// same continuation again without answering anything twice.
func (h *Handler) resume(w http.ResponseWriter, r *http.Request, tenant messages.TenantID, session messages.SessionID, in *RunAgentInput) {
	ids := make([]string, 0, len(in.Resume))
	for _, e := range in.Resume {
		if slicesContains(ids, e.InterruptID) {
			h.refuse(w, r, "invalid_resume", "interrupt "+e.InterruptID+" is answered twice")
			return
		}
		ids = append(ids, e.InterruptID)
	}
	s := h.susp.find(tenant, ids)
	if s == nil {
		s = h.rebuild(r.Context(), tenant, session, ids)
	}
	if s == nil || s.session != session {
		h.refuse(w, r, "invalid_resume", "resume names interrupts that are not the open interrupts of one suspended run of this thread "+
			"(unknown, of another thread, expired past the grace period, or from different runs)")
		return
	}

	h.susp.mu.Lock()
	switch {
	case s.busy:
		h.susp.mu.Unlock()
		writeError(w, errorf(http.StatusConflict, codeConflict, "this run is being streamed to another request"))
		return
	case s.resumedBy != "" && (s.resumedBy != in.RunID || !sameAnswers(s.answers, in.Resume)):
		by := s.resumedBy
		h.susp.mu.Unlock()
		h.refuse(w, r, "invalid_resume", "these interrupts were already answered by run "+by)
		return
	case s.resumedBy != "":
		// A replay: stream the same continuation again.
		s.busy = true
		h.susp.mu.Unlock()
		h.continueFrom(w, r, s, in, true)
		return
	}
	h.susp.mu.Unlock()

	if len(ids) != len(s.interrupts) {
		var missing []string
		for _, id := range s.interrupts {
			if !slicesContains(ids, id) {
				missing = append(missing, id)
			}
		}
		h.refuse(w, r, "invalid_resume", fmt.Sprintf("resume must answer every open interrupt; missing: %s", strings.Join(missing, ", ")))
		return
	}
	answers := make([]messages.Resume, 0, len(in.Resume))
	for _, e := range in.Resume {
		kind := s.proj.kindOf(e.InterruptID)
		res, err := ResumeFor(kind, e)
		if err != nil {
			h.refuse(w, r, "invalid_resume", err.Error())
			return
		}
		if e.Status == ResumeResolved {
			if info, ok := h.engine.Interrupt(tenant, e.InterruptID); ok && info.Status == messages.InterruptTimedOut {
				h.refuse(w, r, "interrupt_expired", "interrupt "+e.InterruptID+" expired and its timeout action was taken; answer it with status \"cancelled\" to continue")
				return
			}
		}
		res.Tenant = tenant
		answers = append(answers, res)
	}

	h.susp.mu.Lock()
	if s.busy || s.resumedBy != "" { // a concurrent resume won
		h.susp.mu.Unlock()
		writeError(w, errorf(http.StatusConflict, codeConflict, "another request is resuming these interrupts"))
		return
	}
	s.busy = true
	h.susp.mu.Unlock()

	for i, res := range answers {
		_, err := h.engine.Resume(res)
		var invalid *actors.InvalidResumeError
		switch {
		case err == nil,
			errors.Is(err, actors.ErrInterruptNotFound), // answered already (an earlier attempt, or another channel)
			errors.Is(err, actors.ErrInterruptConflict),
			errors.Is(err, actors.ErrInterruptExpired) && in.Resume[i].Status == ResumeCancelled:
		case errors.Is(err, actors.ErrInterruptExpired):
			h.release(s)
			h.refuse(w, r, "interrupt_expired", "interrupt "+res.InterruptID+" expired and its timeout action was taken; answer it with status \"cancelled\" to continue")
			return
		case errors.As(err, &invalid):
			h.release(s)
			h.refuse(w, r, "invalid_resume", "interrupt "+res.InterruptID+": "+invalid.Reason)
			return
		default:
			h.release(s)
			h.refuse(w, r, "internal", err.Error())
			return
		}
	}
	h.susp.mu.Lock()
	s.resumedBy, s.answers = in.RunID, in.Resume
	h.susp.mu.Unlock()
	h.continueFrom(w, r, s, in, false)
}

func (h *Handler) release(s *suspension) {
	h.susp.mu.Lock()
	s.busy = false
	h.susp.mu.Unlock()
}

// continueFrom streams the Conclave run of s after its cursor as the AG-UI
// run in.RunID. s must be marked busy; it is released at the end, with
// where the AG-UI run ended. A replay ends where the first stream of this
// resume ended, with the same outcome.
func (h *Handler) continueFrom(w http.ResponseWriter, r *http.Request, s *suspension, in *RunAgentInput, replay bool) {
	defer h.release(s)
	ctx, cancel := context.WithTimeout(r.Context(), engineTimeout)
	sub, err := h.engine.Subscribe(ctx, messages.Subscribe{Tenant: s.tenant, SessionID: s.session, After: s.cursor})
	cancel()
	if err != nil {
		h.refuse(w, r, "internal", "cannot continue the run: "+err.Error())
		return
	}
	defer sub.Close()
	seg := &segment{
		h: h, st: h.newStream(w, r), sub: sub, tenant: s.tenant, session: s.session, proj: s.proj.Clone(), cursor: s.cursor,
		begin: BeginOptions{ThreadID: in.ThreadID, RunID: in.RunID, ParentRunID: s.aguiRunID},
		from:  s,
	}
	if replay {
		h.susp.mu.Lock()
		seg.replayTo = s.next
		h.susp.mu.Unlock()
	}
	seg.run(r.Context())
}

// rebuild reconstructs a suspension that is not in memory (evicted, or
// lost with a restart while the engine kept the run parked): when every id
// names an open interrupt of one run of this session, the run is projected
// silently from the session's start up to the last of their
// interrupt_raised events, and the resume continues from there. The
// client may then see again what that run streamed after those events in
// its interrupted AG-UI run (with new message ids); nothing is lost.
func (h *Handler) rebuild(ctx context.Context, tenant messages.TenantID, session messages.SessionID, ids []string) *suspension {
	var run messages.RunID
	for _, id := range ids {
		in, ok := h.engine.Interrupt(tenant, id)
		if !ok || in.SessionID != session || (run != "" && in.RunID != run) {
			return nil
		}
		run = in.RunID
	}
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	head, err := h.engine.Head(ctx, tenant, session)
	if err != nil {
		return nil
	}
	sub, err := h.engine.Subscribe(ctx, messages.Subscribe{Tenant: tenant, SessionID: session})
	if err != nil {
		return nil
	}
	defer sub.Close()
	proj := NewProjector(run)
	proj.Begin(nil, BeginOptions{Time: h.cfg.Now()})
	raised := map[string]bool{}
	var batch []*messages.Encoded
	for cursor := uint64(0); cursor < head; {
		if batch, err = sub.Next(ctx, batch, batchSize); err != nil {
			return nil
		}
		for _, enc := range batch {
			cursor = enc.Seq
			if enc.RunID != run {
				continue
			}
			env, err := enc.Envelope()
			if err != nil {
				return nil
			}
			proj.Apply(nil, env)
			if p, ok := env.Payload.(*messages.InterruptRaisedPayload); ok && slicesContains(ids, p.InterruptID) {
				raised[p.InterruptID] = true
			}
			if len(raised) == len(ids) {
				if proj.Ended() || len(proj.Pending()) == 0 {
					return nil
				}
				var open []string
				for _, pi := range proj.Pending() {
					if slicesContains(ids, pi.ID) {
						open = append(open, pi.ID)
					}
				}
				proj.Suspend(nil, h.cfg.Now(), open, nil)
				s := &suspension{tenant: tenant, session: session, run: run, cursor: cursor, proj: proj, interrupts: ids, expires: map[string]time.Time{}}
				h.susp.add(s)
				return s
			}
		}
	}
	return nil
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// kindOf is the kind of an open interrupt ("" if unknown).
func (p *Projector) kindOf(id string) messages.InterruptKind {
	for _, pi := range p.pending {
		if pi.p.InterruptID == id {
			return pi.p.Kind
		}
	}
	return ""
}
