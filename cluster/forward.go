package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/conclave-ai/conclave/actors/interrupts"
	"github.com/conclave-ai/conclave/messages"
)

// Forwarder lets any node answer any call of the runs and interrupts API:
// a call the node cannot serve itself, because another node owns the
// session (421 not_owner) or because the run or interrupt lives on another
// node (404 here), is sent to the owner, or to each other live member in
// turn, over NATS request-reply, and the first answer that is not a 404
// is the client's. Each node serves the calls forwarded to it on
// <Prefix>_http.<node id> through its own handler, authentication
// included (the caller's headers travel with the call); a forwarded call
// is never forwarded again.
//
// Streams (SSE, WebSocket, AG-UI, A2A) are not forwarded: every node
// serves them from the shared journal (Followers).
type Forwarder struct {
	nc      *nats.Conn
	node    *Node
	log     *slog.Logger
	subject func(node string) string
	timeout time.Duration
	maxBody int64

	counts counters
	mu     sync.Mutex
	sub    *nats.Subscription
	wg     sync.WaitGroup
	sem    chan struct{} // bounds the forwarded calls served at once
	shut   bool
}

// ForwardOptions configures NewForwarder.
type ForwardOptions struct {
	// Prefix of the subjects; default "conclave".
	Prefix string
	// Timeout of a forwarded call; default 15 s (the API's own engine
	// timeout is 10 s).
	Timeout time.Duration
	// MaxBody caps a forwarded request body (the API's own cap); it
	// must fit the server's max payload in base64 with the headers.
	// Default and most: three quarters of (max payload less 64 KB).
	MaxBody int64
	// Parallel bounds the forwarded calls this node serves at once;
	// default 64. Calls beyond wait in NATS.
	Parallel int
	Logger   *slog.Logger
}

// NewForwarder returns the forwarder of node.
func NewForwarder(nc *nats.Conn, node *Node, opts ForwardOptions) *Forwarder {
	if opts.Prefix == "" {
		opts.Prefix = "conclave"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 15 * time.Second
	}
	// A call travels as JSON, its body in base64 (4 bytes for 3).
	if limit := (nc.MaxPayload() - 64<<10) / 4 * 3; opts.MaxBody <= 0 || opts.MaxBody > limit {
		opts.MaxBody = limit
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 64
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	prefix := opts.Prefix
	return &Forwarder{
		nc: nc, node: node, log: opts.Logger, timeout: opts.Timeout, maxBody: opts.MaxBody,
		// Not under prefix+".": the journal's stream captures those.
		subject: func(id string) string { return prefix + "_http." + id },
		sem:     make(chan struct{}, opts.Parallel),
	}
}

// forwardedCall is a call on the wire.
type forwardedCall struct {
	Method string      `json:"method"`
	Host   string      `json:"host"`
	URI    string      `json:"uri"`
	Header http.Header `json:"header"`
	Body   []byte      `json:"body,omitempty"`
}

// forwardedAnswer is its answer.
type forwardedAnswer struct {
	Status int         `json:"status"`
	Header http.Header `json:"header"`
	Body   []byte      `json:"body,omitempty"`
}

// forwardable reports whether a call is one the forwarder may send on:
// the runs and interrupts API, which answers with one JSON body.
func forwardable(r *http.Request) bool {
	if r.Header.Get(messages.ForwardedHeader) != "" {
		return false
	}
	p := r.URL.Path
	return p == "/api/v1/runs" || strings.HasPrefix(p, "/api/v1/runs/") || p == "/api/v1/interrupts" ||
		strings.HasPrefix(p, "/api/v1/interrupts/") || strings.HasPrefix(p, "/api/v1/events/resume/")
}

// streamed reports whether a call's answer is a stream that must be
// proxied whole, not forwarded as one message: AG-UI runs and A2A calls,
// served by the owner of their thread's session.
func streamed(r *http.Request) bool {
	if r.Header.Get(messages.ForwardedHeader) != "" {
		return false
	}
	return r.URL.Path == "/api/v1/agui" || r.URL.Path == "/a2a"
}

// Handler serves a call with next and, when next could not serve it here,
// forwards it (see Forwarder).
func (f *Forwarder) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if streamed(r) {
			f.proxyIfMisdirected(next, w, r)
			return
		}
		if tenantWide(r) && r.Header.Get(messages.ForwardedHeader) != "" {
			// This node's page of a gathered list: not while (nor across)
			// a takeover, whose session's interrupts are nowhere yet.
			mark := f.node.takeoverMark()
			rec := newRecorder()
			next.ServeHTTP(rec, r)
			if !f.node.settled(mark) {
				unsettled(w, "node "+f.node.ID()+" is taking sessions over")
				return
			}
			write(w, rec.status, rec.header, rec.body.Bytes())
			return
		}
		if !forwardable(r) {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, f.maxBody+1))
		if err != nil || int64(len(body)) > f.maxBody {
			// Too large to forward (or unreadable): served here only.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
			next.ServeHTTP(w, r)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if tenantWide(r) {
			f.gatherInterrupts(next, w, r)
			return
		}
		rec := newRecorder()
		next.ServeHTTP(rec, r)
		var targets []string
		switch rec.status {
		case http.StatusMisdirectedRequest:
			if owner := rec.header.Get(messages.OwnerHeader); owner != "" && owner != f.node.ID() {
				targets = []string{owner}
			}
		case http.StatusNotFound:
			var err error
			if targets, err = f.others(r.Context()); err != nil {
				f.log.Warn("cluster: list members to forward a call", "err", err)
			}
		}
		if len(targets) > 0 {
			call := forwardedCall{Method: r.Method, Host: r.Host, URI: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body}
			call.Header.Set(messages.ForwardedHeader, f.node.ID())
			var late error
			for _, node := range targets {
				f.counts.forwarded.Add(1)
				ans, err := f.call(r.Context(), node, call)
				if err != nil {
					f.log.Warn("cluster: forward a call", "to", node, "uri", call.URI, "err", err)
					if errors.Is(err, ErrOwnerLate) {
						late = fmt.Errorf("node %s: %w", node, err)
					}
					continue
				}
				if ans.Status == http.StatusNotFound && len(targets) > 1 {
					continue // not there either
				}
				write(w, ans.Status, ans.Header, ans.Body)
				return
			}
			if late != nil {
				// The node that may have it is going away: its sessions
				// move once its lease lapses. The call may yet have been
				// served, if that node comes back in time.
				w.Header().Set("Retry-After", strconv.Itoa(retryAfter(f.node.opts.Lease)))
				writeAPIError(w, http.StatusServiceUnavailable, "unavailable", late.Error()+"; its sessions move to another node once its lease lapses: try again")
				return
			}
		}
		write(w, rec.status, rec.header, rec.body.Bytes())
	})
}

// tenantWide reports whether a call lists the open interrupts of every
// session of the caller's tenant (GET /api/v1/interrupts without
// session_id). Each node holds those of the sessions it owns, so the
// answer is every live member's page, merged (gatherInterrupts).
func tenantWide(r *http.Request) bool {
	return r.Method == http.MethodGet && r.URL.Path == "/api/v1/interrupts" && !r.URL.Query().Has("session_id")
}

// gatherInterrupts answers a tenant-wide interrupts list with the page
// one node holding every session would give: this node's page and every
// other live member's, asked for the same cursor and limit, merged
// (interrupts.MergePages). A list that silently lacked some interrupts
// would look complete, so the call is 503 unavailable, Retry-After 1,
// while a member does not answer (a dead member answers at once, "no
// responders", until its lease lapses), while a session has no owner
// serving it (Node.unsettled: its owner's lease lapsed and no node took it
// over yet), and while, or across the reading of the pages, a node takes
// a session over.
func (f *Forwarder) gatherInterrupts(next http.Handler, w http.ResponseWriter, r *http.Request) {
	mark := f.node.takeoverMark() // before this node's page
	rec := newRecorder()
	next.ServeHTTP(rec, r)
	if rec.status != http.StatusOK {
		write(w, rec.status, rec.header, rec.body.Bytes()) // a bad cursor or limit, or no credentials: as this node says
		return
	}
	limit := messages.DefaultPageLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		limit, _ = strconv.Atoi(v) // this node took it: valid
	}
	var local messages.InterruptList
	if err := json.Unmarshal(rec.body.Bytes(), &local); err != nil {
		writeAPIError(w, http.StatusInternalServerError, "internal", "listing interrupts: "+err.Error())
		return
	}
	members, err := f.node.Members(r.Context())
	if err != nil {
		unsettled(w, "listing the cluster's members: "+err.Error())
		return
	}
	var others []string
	for _, m := range members {
		if m.ID != f.node.ID() {
			others = append(others, m.ID)
		}
	}
	if why := f.node.unsettled(members); why != "" {
		unsettled(w, why+"; try again")
		return
	}
	pages := make([]messages.InterruptList, len(others))
	errs := make([]error, len(others))
	call := forwardedCall{Method: r.Method, Host: r.Host, URI: r.URL.RequestURI(), Header: r.Header.Clone()}
	call.Header.Set(messages.ForwardedHeader, f.node.ID())
	var wg sync.WaitGroup
	for i, node := range others {
		f.counts.forwarded.Add(1)
		wg.Go(func() {
			ans, err := f.call(r.Context(), node, call)
			switch {
			case err != nil:
				errs[i] = err
			case ans.Status != http.StatusOK:
				errs[i] = fmt.Errorf("HTTP %d: %.200s", ans.Status, ans.Body)
			default:
				errs[i] = json.Unmarshal(ans.Body, &pages[i])
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			f.log.Warn("cluster: list a member's interrupts", "node", others[i], "err", err)
			unsettled(w, fmt.Sprintf("node %s did not list its interrupts (%v); try again", others[i], err))
			return
		}
	}
	// Checked again after the pages: a takeover that ran here, or a
	// session this node's view saw lose its owner, while they were read.
	why := f.node.unsettled(members)
	if why == "" && !f.node.settled(mark) {
		why = "node " + f.node.ID() + " took sessions over"
	}
	if why != "" {
		unsettled(w, why+"; try again")
		return
	}
	merged := interrupts.MergePages(limit, append(pages, local)...)
	if merged.Interrupts == nil {
		merged.Interrupts = []messages.Interrupt{}
	}
	body, err := json.Marshal(merged)
	if err != nil {
		writeAPIError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	write(w, http.StatusOK, http.Header{"Content-Type": {"application/json"}}, body)
}

// unsettled answers a gathered list that would be incomplete: 503
// unavailable, Retry-After 1.
func unsettled(w http.ResponseWriter, why string) {
	w.Header().Set("Retry-After", "1")
	writeAPIError(w, http.StatusServiceUnavailable, "unavailable", why)
}

// writeAPIError writes the API's error body (messages.ErrorBody); code is
// one of the API's error codes (docs/api.md).
func writeAPIError(w http.ResponseWriter, status int, code, message string) {
	body, _ := json.Marshal(messages.ErrorBody{Error: messages.APIError{Code: code, Message: message}})
	write(w, status, http.Header{"Content-Type": {"application/json"}}, body)
}

// others lists the live members but this node.
func (f *Forwarder) others(ctx context.Context) ([]string, error) {
	members, err := f.node.Members(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range members {
		if m.ID != f.node.ID() {
			out = append(out, m.ID)
		}
	}
	return out, nil
}

// call sends one call to node and waits for its answer.
func (f *Forwarder) call(ctx context.Context, node string, call forwardedCall) (forwardedAnswer, error) {
	data, err := json.Marshal(call)
	if err != nil {
		return forwardedAnswer{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	// A node that stopped renewing its membership (stopped, paused, cut
	// off) will not answer before its lease lapses: given up on sooner.
	ctx, stop := f.node.watchRenewals(ctx, node)
	defer stop()
	msg, err := f.nc.RequestWithContext(ctx, f.subject(node), data)
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrOwnerLate) {
			return forwardedAnswer{}, cause
		}
		return forwardedAnswer{}, err
	}
	var ans forwardedAnswer
	if err := json.Unmarshal(msg.Data, &ans); err != nil {
		return forwardedAnswer{}, fmt.Errorf("bad answer: %w", err)
	}
	return ans, nil
}

func write(w http.ResponseWriter, status int, header http.Header, body []byte) {
	if status == 0 {
		status = http.StatusOK // a handler that wrote nothing
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Serve answers the calls forwarded to this node with h, until Shutdown.
func (f *Forwarder) Serve(h http.Handler) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shut {
		return ErrClosed
	}
	sub, err := f.nc.Subscribe(f.subject(f.node.ID()), func(m *nats.Msg) {
		f.mu.Lock()
		if f.shut {
			f.mu.Unlock()
			return
		}
		f.wg.Add(1)
		f.mu.Unlock()
		f.sem <- struct{}{}
		go func() {
			defer func() { <-f.sem; f.wg.Done() }()
			f.serveOne(h, m)
		}()
	})
	if err != nil {
		return fmt.Errorf("cluster: serve forwarded calls: %w", err)
	}
	f.sub = sub
	// Once the server has the subscription, calls forwarded here arrive.
	if err := f.nc.Flush(); err != nil {
		return fmt.Errorf("cluster: serve forwarded calls: %w", err)
	}
	return nil
}

func (f *Forwarder) serveOne(h http.Handler, m *nats.Msg) {
	var call forwardedCall
	ans := forwardedAnswer{Status: http.StatusBadRequest}
	if err := json.Unmarshal(m.Data, &call); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, call.Method, call.URI, bytes.NewReader(call.Body))
		if err == nil {
			req.Header, req.Host = call.Header, call.Host // links in answers name the node the client called
			req.RemoteAddr = "cluster:" + call.Header.Get(messages.ForwardedHeader)
			rec := newRecorder()
			h.ServeHTTP(rec, req)
			ans = forwardedAnswer{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}
		}
	}
	data, _ := json.Marshal(ans)
	if int64(len(data)) > f.nc.MaxPayload() {
		// Too large for one NATS message: say so at once rather than
		// leave the caller to its timeout.
		msg, _ := json.Marshal(messages.ErrorBody{Error: messages.APIError{Code: "internal",
			Message: fmt.Sprintf("the answer of node %s (%d bytes) is too large to forward; call that node directly", f.node.ID(), len(ans.Body))}})
		data, _ = json.Marshal(forwardedAnswer{Status: http.StatusBadGateway, Header: http.Header{"Content-Type": {"application/json"}}, Body: msg})
	}
	if err := m.Respond(data); err != nil {
		f.log.Warn("cluster: answer a forwarded call", "uri", call.URI, "err", err)
	}
}

// Shutdown stops serving forwarded calls and waits for those in progress.
func (f *Forwarder) Shutdown(ctx context.Context) error {
	f.mu.Lock()
	f.shut = true
	sub := f.sub
	f.mu.Unlock()
	var err error
	if sub != nil {
		err = sub.Unsubscribe()
		if errors.Is(err, nats.ErrConnectionClosed) {
			err = nil
		}
	}
	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	select {
	case <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recorder is an http.ResponseWriter that keeps the answer in memory.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// proxyIfMisdirected serves a streamed call with next unless next answers
// 421 not_owner before writing anything else: the call is then proxied
// whole to the owner's HTTP API (its URL from its membership key), and
// the owner's answer, stream included, is the client's.
func (f *Forwarder) proxyIfMisdirected(next http.Handler, w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, f.maxBody+1))
	if err != nil || int64(len(body)) > f.maxBody {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		next.ServeHTTP(w, r)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sw := &sniffWriter{ResponseWriter: w}
	next.ServeHTTP(sw, r)
	if !sw.misdirected {
		return
	}
	owner := sw.owner
	for k := range w.Header() {
		delete(w.Header(), k) // the local 421's headers
	}
	m, err := f.node.member(r.Context(), owner)
	if err != nil || m == nil || m.URL == "" {
		f.log.Warn("cluster: proxy a streamed call: the owner has no URL", "owner", owner, "err", err)
		w.Header().Set(messages.OwnerHeader, owner)
		write(w, sw.status, sw.header, sw.body.Bytes())
		return
	}
	target, err := url.Parse(m.URL)
	if err != nil {
		write(w, sw.status, sw.header, sw.body.Bytes())
		return
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set(messages.ForwardedHeader, f.node.ID())
		},
		FlushInterval: -1, // a stream: every write at once
		ErrorLog:      slog.NewLogLogger(f.log.Handler(), slog.LevelWarn),
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	f.counts.proxied.Add(1)
	proxy.ServeHTTP(w, r)
}

// sniffWriter passes an answer through, except a 421 naming an owner,
// which it keeps (the call is then proxied).
type sniffWriter struct {
	http.ResponseWriter
	decided     bool
	misdirected bool
	owner       string
	status      int
	header      http.Header
	body        bytes.Buffer
}

func (s *sniffWriter) WriteHeader(status int) {
	if s.decided {
		if !s.misdirected {
			s.ResponseWriter.WriteHeader(status)
		}
		return
	}
	s.decided = true
	if owner := s.Header().Get(messages.OwnerHeader); status == http.StatusMisdirectedRequest && owner != "" {
		s.misdirected, s.owner, s.status, s.header = true, owner, status, s.Header().Clone()
		return
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *sniffWriter) Write(b []byte) (int, error) {
	if !s.decided {
		s.WriteHeader(http.StatusOK)
	}
	if s.misdirected {
		return s.body.Write(b)
	}
	return s.ResponseWriter.Write(b)
}

// Flush passes flushes of a stream through.
func (s *sniffWriter) Flush() {
	if !s.misdirected {
		if f, ok := s.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (s *sniffWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
