package transport_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	validationErrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/billing"
	"github.com/conclave-ai/conclave/docs"
	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport"
)

// openAPI is docs/openapi.yaml loaded, checked against the OpenAPI 3.1
// meta-schema, and a validator of requests and answers against it.
type openAPI struct {
	model *v3.Document
	v     validator.Validator
}

func loadOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	doc, err := libopenapi.NewDocument(docs.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if v := doc.GetVersion(); v != "3.1.0" {
		t.Fatalf("docs/openapi.yaml is OpenAPI %s, want 3.1.0", v)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		t.Fatalf("docs/openapi.yaml: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		t.Fatalf("docs/openapi.yaml is not a valid OpenAPI 3.1 document:%s", describe(verrs))
	}
	return &openAPI{model: &m.Model, v: v}
}

func TestOpenAPI_Document(t *testing.T) {
	t.Parallel()
	loadOpenAPI(t)
}

// describe lists validation errors, one a line, with the schema failures
// under each.
func describe(errs []*validationErrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  %s: %s", e.Message, e.Reason)
		for _, se := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n    %s %s: %s", se.KeywordLocation, se.FieldPath, se.Reason)
		}
	}
	return b.String()
}

// contract sends requests to a harness's server and checks each request
// and answer against docs/openapi.yaml, noting which operation answered
// which status (for the coverage check of TestOpenAPI_Contract).
type contract struct {
	t    *testing.T
	api  *openAPI
	h    *harness
	mux  *http.ServeMux
	seen map[string]bool // "get /api/v1/runs/{id} 404"
}

func newContract(t *testing.T, api *openAPI, h *harness, seen map[string]bool) *contract {
	mux, ok := h.srv.Inner().(*http.ServeMux)
	if !ok {
		t.Fatalf("Inner() is a %T, want the *http.ServeMux that routes the API", h.srv.Inner())
	}
	return &contract{t: t, api: api, h: h, mux: mux, seen: seen}
}

// call is one request of the contract test.
type call struct {
	method, target string // target: path and query
	body           string
	hdr            []string // header name/value pairs
	token          string   // bearer token; "" sends none
	want           int      // the status the server must answer
	// breaks: the request breaks the contract on purpose (a malformed body,
	// no token, a bad parameter): the contract must refuse it too, so that
	// it describes what the server refuses.
	breaks bool
}

// do sends c, reads the whole answer (a stream until it ends) and checks
// both against the contract.
func (ct *contract) do(c call) (*http.Response, []byte) {
	ct.t.Helper()
	req := ct.request(c)
	resp, err := ct.h.client.Do(req)
	if err != nil {
		ct.t.Fatalf("%s %s: %v", c.method, c.target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		ct.t.Fatalf("%s %s: reading the answer: %v", c.method, c.target, err)
	}
	ct.check(c, resp, body)
	return resp, body
}

func (ct *contract) request(c call) *http.Request {
	ct.t.Helper()
	var rd io.Reader
	if c.body != "" {
		rd = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, ct.h.base+c.target, rd)
	if err != nil {
		ct.t.Fatal(err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(c.hdr); i += 2 {
		req.Header.Set(c.hdr[i], c.hdr[i+1])
	}
	return req
}

// check validates c's request and the answer (resp with body) against the
// contract, checks the status, and notes the operation and status seen.
func (ct *contract) check(c call, resp *http.Response, body []byte) {
	ct.t.Helper()
	name := c.method + " " + c.target
	if resp.StatusCode != c.want {
		ct.t.Errorf("%s = %d %s, want %d", name, resp.StatusCode, truncate(body), c.want)
	}
	req := ct.request(c) // a fresh body for the validator
	ok, errs := ct.api.v.ValidateHttpRequestSync(req)
	switch {
	case c.breaks && ok:
		ct.t.Errorf("%s: the contract accepts this request, which the server refuses (%d)", name, resp.StatusCode)
	case !c.breaks && !ok:
		ct.t.Errorf("%s: the request breaks the contract:%s", name, describe(errs))
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if ok, errs := ct.api.v.ValidateHttpResponse(ct.request(c), resp); !ok {
		ct.t.Errorf("%s: the answer %d %s breaks the contract:%s", name, resp.StatusCode, truncate(body), describe(errs))
	}
	_, pattern := ct.mux.Handler(req)
	ct.seen[strings.ToLower(c.method)+" "+pattern+" "+strconv.Itoa(resp.StatusCode)] = true
}

// stream opens c, a streaming request (SSE), and returns its answer with
// the body still open: done reads the rest (to its end when toEOF, as a
// stream asked for until=run_end ends by itself; else none), closes it
// and checks the whole exchange against the contract.
func (ct *contract) stream(c call) (resp *http.Response, r *testkit.SSEReader, done func(toEOF bool)) {
	ct.t.Helper()
	req := ct.request(c)
	rt := ct.h.rt
	if rt == nil {
		rt = http.DefaultTransport
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		ct.t.Fatalf("%s %s: %v", c.method, c.target, err)
	}
	var read bytes.Buffer
	body := io.TeeReader(resp.Body, &read)
	closer := resp.Body
	return resp, testkit.NewSSEReader(body), func(toEOF bool) {
		ct.t.Helper()
		if toEOF {
			_, _ = io.Copy(io.Discard, body)
		}
		closer.Close()
		ct.check(c, resp, read.Bytes())
		if resp.StatusCode == http.StatusOK {
			ct.frames(c, read.Bytes(), toEOF)
		}
	}
}

// frames checks the frames of an SSE event stream: each event's data
// validates against the event schema (docs/schema/events.schema.json), and
// a stream read to its end ends with a stream_closed frame whose data
// validates against the contract's StreamClosed.
func (ct *contract) frames(c call, body []byte, ended bool) {
	ct.t.Helper()
	closed, ok := ct.api.model.Components.Schemas.Get("StreamClosed")
	if !ok {
		ct.t.Fatal("docs/openapi.yaml has no StreamClosed schema")
	}
	blocks := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
	for i, block := range blocks {
		var event, data string
		for line := range strings.SplitSeq(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				event = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = v
			}
		}
		switch {
		case event == "stream_closed":
			if ok, errs := schema_validation.NewSchemaValidator().ValidateSchemaString(closed.Schema(), data); !ok {
				ct.t.Errorf("%s %s: the stream_closed frame %s breaks the contract:%s", c.method, c.target, data, describe(errs))
			}
			if i != len(blocks)-1 {
				ct.t.Errorf("%s %s: frames after stream_closed", c.method, c.target)
			}
		case data != "":
			if err := messages.ValidateEventJSON([]byte(data)); err != nil {
				ct.t.Errorf("%s %s: event %s: %v", c.method, c.target, truncate([]byte(data)), err)
			}
		}
		if ended && i == len(blocks)-1 && event != "stream_closed" {
			ct.t.Errorf("%s %s: the stream ended without a stream_closed frame: %q", c.method, c.target, block)
		}
	}
}

// ws dials the WebSocket endpoint with c (GET) and checks the handshake's
// answer, 101 or an error, against the contract.
func (ct *contract) ws(c call) *websocket.Conn {
	ct.t.Helper()
	hdr := http.Header{}
	if c.token != "" {
		hdr.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(c.hdr); i += 2 {
		hdr.Set(c.hdr[i], c.hdr[i+1])
	}
	d := websocket.Dialer{HandshakeTimeout: testkit.Watchdog}
	conn, resp, err := d.Dial("ws"+strings.TrimPrefix(ct.h.base, "http")+c.target, hdr)
	if resp == nil {
		ct.t.Fatalf("dial %s: %v", c.target, err)
	}
	body := readAll(resp)
	ct.check(c, resp, body)
	if conn != nil {
		ct.t.Cleanup(func() { conn.Close() })
	}
	return conn
}

// decode unmarshals an answer the contract already validated.
func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s: %v", truncate(body), err)
	}
	return v
}

const (
	acmeToken  = "token-acme-aaaaaaaaaaaa"
	tightToken = "token-tight-bbbbbbbbbbb"
)

// notDriven are the documented answers TestOpenAPI_Contract does not
// provoke, each with the reason; every other documented (operation,
// status) must have been seen, validated, at least once.
var notDriven = map[string]string{
	"post /api/v1/runs/{id}/abort 500": "the journal refusing the abort record",
	"post /api/v1/runs/{id}/abort 503": "a server shutting down",
	"get /api/v1/interrupts 503":       "cluster mode: a node that does not answer",
	"get /api/v1/audit 500":            "a damaged audit log",
	"get /api/v1/events/stream 500":    "a ResponseWriter that can neither hijack nor flush (TestSSE_UnstreamableWriterIsRefused)",
	"get /api/v1/events/stream 503":    "a server shutting down",
	"post /api/v1/agui 409":            "two requests streaming or resuming the same AG-UI run at once (agui tests)",
	"post /api/v1/agui 503":            "a server shutting down",
	"post /a2a 500":                    "an internal error",
	"post /a2a 503":                    "a server shutting down, or a cluster node without its journal",
	"get /healthz 503":                 "a server shutting down",
}

// TestOpenAPI_Contract drives a real server through every operation of
// docs/openapi.yaml, success and each documented error (but notDriven),
// and validates every request and answer against the contract with
// libopenapi-validator: answer bodies against the schemas generated from
// messages/, statuses, required headers (Retry-After, WWW-Authenticate,
// X-Request-Id) and content types. Requests the server refuses as
// malformed must break the contract too.
func TestOpenAPI_Contract(t *testing.T) {
	t.Parallel()
	api := loadOpenAPI(t)
	seen := map[string]bool{}
	log, _ := testkit.AuditLog(t)
	var toks transport.Tokens
	for tok, tenant := range map[string]messages.TenantID{acmeToken: "acme", tightToken: "tight"} {
		if err := toks.Add(tok, tenant); err != nil {
			t.Fatal(err)
		}
	}
	// tight may have one run not ended, of at most 200 events, and one stream.
	limits := func(tenant messages.TenantID) actors.Limits {
		if tenant == "tight" {
			return actors.Limits{ConcurrentRuns: 1, EventsPerRun: 200}
		}
		return actors.Limits{}
	}
	// acme's high-risk tool calls need 3 of its 3 approvers' signatures.
	gov := &governance.Tenant{Approvers: map[string]*governance.PublicKey{}, Policy: governance.Policy{RejectRequired: 1}}
	approvers := map[string]*governance.PrivateKey{}
	for _, name := range []string{"a1", "a2", "a3"} {
		pk, sk, _, err := governance.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		approvers[name], gov.Approvers[name] = sk, pk
	}
	gov.Policy.Rules = map[messages.RiskLevel]governance.Rule{messages.RiskHigh: {Required: 3, Approvers: []string{"a1", "a2", "a3"}}}
	var notReady, suspended atomic.Bool
	h := newHarnessWith(t, actors.Config{Audit: log, Limits: limits, Billing: &billing.Gate{Checker: suspendedChecker{&suspended}},
		Governance: &governance.Config{Tenants: map[messages.TenantID]*governance.Tenant{"acme": gov}}}, transport.Config{
		Tokens: toks, Audit: log,
		StreamLimit: func(tenant messages.TenantID) int {
			if tenant == "tight" {
				return 1
			}
			return 0
		},
		Ready: func() []messages.NotReady {
			if notReady.Load() {
				return []messages.NotReady{{Component: "journal", Reason: "test"}}
			}
			return nil
		},
	})
	ct := newContract(t, api, h, seen)
	const acme = acmeToken

	// Operations.
	ct.do(call{method: "GET", target: "/healthz", want: 200})
	ct.do(call{method: "GET", target: "/readyz", want: 200})
	notReady.Store(true)
	ct.do(call{method: "GET", target: "/readyz", want: 503})
	notReady.Store(false)
	if _, body := ct.do(call{method: "GET", target: "/api/v1/openapi.yaml", want: 200}); !bytes.Equal(body, docs.OpenAPI) {
		t.Errorf("GET /api/v1/openapi.yaml is not docs/openapi.yaml")
	}
	ct.do(call{method: "GET", target: "/metrics", token: acme, want: 200})
	ct.do(call{method: "GET", target: "/metrics", want: 401, breaks: true})
	ct.do(call{method: "GET", target: "/api/v1/tools", token: acme, want: 200})
	ct.do(call{method: "GET", target: "/api/v1/tools", want: 401, breaks: true})
	card, _ := ct.do(call{method: "GET", target: "/.well-known/agent-card.json", want: 200})
	ct.do(call{method: "GET", target: "/.well-known/agent-card.json", hdr: []string{"If-None-Match", card.Header.Get("ETag")}, want: 304})
	ct.do(call{method: "HEAD", target: "/.well-known/agent-card.json", want: 200})

	// Runs. long runs until aborted; plan waits for its plan's approval.
	long := `{"question":"q","scenario":{"nodes":2,"waves":1,"tokens":1000,"token_delay_ms":5}}`
	plan := `{"question":"q","hitl":"plan","scenario":{"nodes":1,"tokens":2}}`
	_, body := ct.do(call{method: "POST", target: "/api/v1/runs", body: long, token: acme, want: 201,
		hdr: []string{"Idempotency-Key", "k-1", "X-Request-Id", "req-1"}})
	run := decode[messages.RunCreated](t, body)
	if resp, _ := ct.do(call{method: "POST", target: "/api/v1/runs", body: long, token: acme, want: 201,
		hdr: []string{"Idempotency-Key", "k-1"}}); resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("a retry with the same Idempotency-Key was not replayed")
	}
	ct.do(call{method: "POST", target: "/api/v1/runs", body: plan, token: acme, want: 422, hdr: []string{"Idempotency-Key", "k-1"}})
	ct.do(call{method: "POST", target: "/api/v1/runs", body: `{"question":""}`, token: acme, want: 422})
	// An attached file over its limit (base64 of 512 KiB + 1 bytes fits the body).
	bigFile := `{"question":"q","files":[{"name":"a.txt","data":"` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("a"), messages.MaxFileBytes+1)) + `"}]}`
	ct.do(call{method: "POST", target: "/api/v1/runs", body: bigFile, token: acme, want: 413})
	ct.do(call{method: "POST", target: "/api/v1/runs", body: `{"question":"q","files":[{"name":"a.txt","url":"https://files.example/a.txt"}]}`, token: acme, want: 422})
	ct.do(call{method: "POST", target: "/api/v1/runs", body: `{"question":"q","colour":"red"}`, token: acme, want: 400, breaks: true})
	ct.do(call{method: "POST", target: "/api/v1/runs", body: `{"question":"q","seed":"x"}`, token: acme, want: 400, breaks: true})
	ct.do(call{method: "POST", target: "/api/v1/runs", body: long, token: acme, want: 400, breaks: true, hdr: []string{"X-Request-Id", "has space"}})
	ct.do(call{method: "POST", target: "/api/v1/runs", body: long, want: 401, breaks: true})
	suspended.Store(true)
	ct.do(call{method: "POST", target: "/api/v1/runs", body: long, token: acme, want: 402})
	suspended.Store(false)
	ct.do(call{method: "POST", target: "/api/v1/runs", body: `{"question":"q","scenario":{"nodes":50,"tokens":50}}`, token: tightToken, want: 422})
	ct.do(call{method: "POST", target: "/a2a", token: tightToken, hdr: []string{"A2A-Version", "1.0"}, want: 422, body: a2aSend("m-2", `{"nodes":50,"tokens":50}`)})
	_, body = ct.do(call{method: "POST", target: "/api/v1/runs", body: plan, token: tightToken, want: 201})
	tightRun := decode[messages.RunCreated](t, body)
	if resp, _ := ct.do(call{method: "POST", target: "/api/v1/runs", body: plan, token: tightToken, want: 429}); resp.Header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}

	ct.do(call{method: "GET", target: "/api/v1/runs", token: acme, want: 200})
	ct.do(call{method: "GET", target: "/api/v1/runs?session_id=" + string(run.SessionID) + "&status=running&limit=10", token: acme, want: 200})
	ct.do(call{method: "GET", target: "/api/v1/runs?status=bogus", token: acme, want: 400, breaks: true})
	ct.do(call{method: "GET", target: "/api/v1/runs?limit=0", token: acme, want: 400, breaks: true})
	ct.do(call{method: "GET", target: "/api/v1/runs", want: 401, breaks: true})
	ct.do(call{method: "GET", target: "/api/v1/runs/" + string(run.RunID), token: acme, want: 200})
	ct.do(call{method: "GET", target: "/api/v1/runs/nope", token: acme, want: 404})
	ct.do(call{method: "GET", target: "/api/v1/runs/" + string(run.RunID), token: tightToken, want: 404})
	ct.do(call{method: "GET", target: "/api/v1/runs/" + string(run.RunID), want: 401, breaks: true})

	// The run's stream, open until the run ends; steer, rewind and abort it meanwhile.
	runPath := "/api/v1/runs/" + string(run.RunID)
	streamQ := "/api/v1/events/stream?session_id=" + string(run.SessionID)
	_, sse, done := ct.stream(call{method: "GET", target: streamQ + "&until=run_end&run_id=" + string(run.RunID), token: acme, want: 200})
	readUntil(t, sse, func(e *messages.Envelope) bool { return e.Type == messages.NodeStarted })
	ct.do(call{method: "POST", target: runPath + "/steer", body: `{"note":"mind the costs"}`, token: acme, want: 202})
	ct.do(call{method: "POST", target: runPath + "/steer", body: `{"diff":{"ops":[{"op":"explode"}]}}`, token: acme, want: 422})
	ct.do(call{method: "POST", target: runPath + "/steer", body: `{"note":"x","colour":1}`, token: acme, want: 400, breaks: true})
	ct.do(call{method: "POST", target: "/api/v1/runs/nope/steer", body: `{"note":"x"}`, token: acme, want: 404})
	ct.do(call{method: "POST", target: runPath + "/steer", body: `{"note":"x"}`, want: 401, breaks: true})
	ct.do(call{method: "POST", target: runPath + "/rewind", body: `{"wave":0}`, token: acme, want: 409})
	ct.do(call{method: "POST", target: runPath + "/abort", body: `{"reason":"enough"}`, token: acme, want: 202})
	ct.do(call{method: "POST", target: runPath + "/abort", token: acme, want: 409})
	ct.do(call{method: "POST", target: runPath + "/abort", body: `{"why":"x"}`, token: acme, want: 400, breaks: true})
	ct.do(call{method: "POST", target: "/api/v1/runs/nope/abort", token: acme, want: 404})
	ct.do(call{method: "POST", target: runPath + "/abort", want: 401, breaks: true})
	readUntil(t, sse, terminalOf(run.RunID))
	done(true)
	ct.do(call{method: "POST", target: runPath + "/steer", body: `{"note":"late"}`, token: acme, want: 409})
	ct.do(call{method: "POST", target: runPath + "/rewind", body: `{"wave":0,"note":"again"}`, token: acme, want: 201})
	ct.do(call{method: "POST", target: runPath + "/rewind", body: `{"wave":99}`, token: acme, want: 422})
	ct.do(call{method: "POST", target: runPath + "/rewind", body: `{"wave":"first"}`, token: acme, want: 400, breaks: true})
	ct.do(call{method: "POST", target: "/api/v1/runs/nope/rewind", body: `{"wave":0}`, token: acme, want: 404})
	ct.do(call{method: "POST", target: runPath + "/rewind", body: `{"wave":0}`, want: 401, breaks: true})

	// Stream errors, and tight's stream cap (its one stream held open).
	ct.do(call{method: "GET", target: streamQ + "&after=abc", token: acme, want: 400, breaks: true})
	ct.do(call{method: "GET", target: streamQ + "&after=99999999", token: acme, want: 400})
	ct.do(call{method: "GET", target: streamQ + "&until=run_end&run_id=nope", token: acme, want: 404})
	ct.do(call{method: "GET", target: streamQ, want: 401, breaks: true})
	tightQ := "?session_id=" + string(tightRun.SessionID)
	_, _, doneTight := ct.stream(call{method: "GET", target: "/api/v1/events/stream" + tightQ + "&access_token=" + tightToken, want: 200})
	ct.do(call{method: "GET", target: "/api/v1/events/stream" + tightQ, token: tightToken, want: 429})
	ct.ws(call{method: "GET", target: "/api/v1/events/ws" + tightQ, token: tightToken, want: 429})
	ct.do(call{method: "POST", target: "/api/v1/agui", token: tightToken, want: 429,
		body: aguiInput("tight-thread", "r1", "q")})

	// WebSocket.
	wsQ := "/api/v1/events/ws?session_id=" + string(run.SessionID)
	if conn := ct.ws(call{method: "GET", target: wsQ, token: acme, want: 101}); conn != nil {
		conn.Close()
	}
	ct.do(call{method: "GET", target: wsQ, token: acme, want: 400})
	ct.ws(call{method: "GET", target: wsQ, token: acme, hdr: []string{"Origin", "https://evil.example"}, want: 403})
	ct.ws(call{method: "GET", target: "/api/v1/events/ws?session_id=nope&after=5", token: acme, want: 404})
	ct.ws(call{method: "GET", target: wsQ, want: 401, breaks: true})

	// Interrupts, answered at both paths.
	for i, resumePath := range []string{"/api/v1/interrupts/%s/resume", "/api/v1/events/resume/%s"} {
		_, body := ct.do(call{method: "POST", target: "/api/v1/runs", body: plan, token: acme, want: 201})
		hr := decode[messages.RunCreated](t, body)
		_, sse, done := ct.stream(call{method: "GET", target: "/api/v1/events/stream?session_id=" + string(hr.SessionID) + "&until=run_end", token: acme, want: 200})
		raised := readUntil(t, sse, func(e *messages.Envelope) bool { return e.Type == messages.InterruptRaised })
		id := raised[len(raised)-1].Payload.(*messages.InterruptRaisedPayload).InterruptID
		if i == 0 {
			_, body = ct.do(call{method: "GET", target: "/api/v1/interrupts?session_id=" + string(hr.SessionID), token: acme, want: 200})
			if l := decode[messages.InterruptList](t, body); len(l.Interrupts) != 1 {
				t.Errorf("interrupts of the session: %s", body)
			}
			ct.do(call{method: "GET", target: "/api/v1/interrupts?limit=1", token: acme, want: 200})
			ct.do(call{method: "GET", target: "/api/v1/interrupts?cursor=garbage", token: acme, want: 422})
			ct.do(call{method: "GET", target: "/api/v1/interrupts?limit=500", token: acme, want: 400, breaks: true})
			ct.do(call{method: "GET", target: "/api/v1/interrupts", want: 401, breaks: true})
			ct.do(call{method: "GET", target: "/api/v1/interrupts/" + id, token: acme, want: 200})
			ct.do(call{method: "GET", target: "/api/v1/interrupts/nope", token: acme, want: 404})
			ct.do(call{method: "GET", target: "/api/v1/interrupts/" + id, want: 401, breaks: true})
		}
		p := fmt.Sprintf(resumePath, id)
		ct.do(call{method: "POST", target: p, body: `{}`, token: acme, want: 422})
		ct.do(call{method: "POST", target: p, body: `{"decision":"approve","colour":1}`, token: acme, want: 400, breaks: true})
		ct.do(call{method: "POST", target: fmt.Sprintf(resumePath, "nope"), body: `{"decision":"approve"}`, token: acme, want: 404})
		ct.do(call{method: "POST", target: p, body: `{"decision":"approve"}`, want: 401, breaks: true})
		ct.do(call{method: "POST", target: p, body: `{"decision":"approve"}`, token: acme, want: 200})
		ct.do(call{method: "POST", target: p, body: `{"decision":"approve"}`, token: acme, want: 409})
		readUntil(t, sse, terminalOf(hr.RunID))
		done(true)
	}

	// A policy-covered tool call: each signature but the last is a 202.
	_, body = ct.do(call{method: "POST", target: "/api/v1/runs", token: acme, want: 201,
		body: `{"question":"q","scenario":{"nodes":1,"approvals":1,"risky_approvals":1}}`})
	risky := decode[messages.RunCreated](t, body)
	_, sse, done = ct.stream(call{method: "GET", target: "/api/v1/events/stream?session_id=" + string(risky.SessionID) + "&until=run_end", token: acme, want: 200})
	raised := readUntil(t, sse, func(e *messages.Envelope) bool { return e.Type == messages.InterruptRaised })
	in := raised[len(raised)-1].Payload.(*messages.InterruptRaisedPayload)
	if in.Approval == nil {
		t.Fatalf("the risky call's interrupt needs no signature: %+v", in)
	}
	sign := func(approver string) string {
		st := messages.ApprovalStatement{InterruptID: in.InterruptID, EvidenceDigest: in.Approval.EvidenceDigest, Decision: messages.DecisionApprove}
		sig, err := governance.Sign(approvers[approver], st)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(messages.Resume{Decision: messages.DecisionApprove, Signature: &messages.ResumeSignature{Approver: approver, Signature: sig}})
		return string(b)
	}
	ct.do(call{method: "POST", target: "/api/v1/interrupts/" + in.InterruptID + "/resume", body: sign("a1"), token: acme, want: 202})
	ct.do(call{method: "POST", target: "/api/v1/events/resume/" + in.InterruptID, body: sign("a2"), token: acme, want: 202})
	_, body = ct.do(call{method: "GET", target: "/api/v1/interrupts/" + in.InterruptID, token: acme, want: 200})
	if got := decode[messages.Interrupt](t, body); len(got.Signed) != 2 {
		t.Errorf("the interrupt after two signatures: %s", body)
	}
	ct.do(call{method: "POST", target: "/api/v1/events/resume/" + in.InterruptID, body: sign("a3"), token: acme, want: 200})
	readUntil(t, sse, terminalOf(risky.RunID))
	done(true)

	// Audit: the abort above is in acme's log.
	_, body = ct.do(call{method: "GET", target: "/api/v1/audit?after=0&limit=10", token: acme, want: 200})
	if p := decode[messages.AuditPage](t, body); len(p.Records) == 0 {
		t.Errorf("acme's audit log is empty after an abort")
	}
	ct.do(call{method: "GET", target: "/api/v1/audit?after=x", token: acme, want: 400, breaks: true})
	ct.do(call{method: "GET", target: "/api/v1/audit?limit=0", token: acme, want: 400, breaks: true})
	ct.do(call{method: "GET", target: "/api/v1/audit", want: 401, breaks: true})

	// AG-UI and A2A.
	ct.do(call{method: "POST", target: "/api/v1/agui", token: acme, want: 200, body: aguiInput("agui-thread", "r1", "q")})
	ct.do(call{method: "POST", target: "/api/v1/agui", token: acme, want: 422, body: aguiInput("agui-thread", "r2", "")})
	ct.do(call{method: "POST", target: "/api/v1/agui", token: acme, want: 400, body: `{"threadId":"bad thread!","runId":"r"}`})
	ct.do(call{method: "POST", target: "/api/v1/agui", want: 401, breaks: true, body: aguiInput("agui-thread", "r3", "q")})
	a2aHdr := []string{"A2A-Version", "1.0"}
	ct.do(call{method: "POST", target: "/a2a", token: acme, hdr: a2aHdr, want: 200, body: `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`})
	ct.do(call{method: "POST", target: "/a2a", hdr: a2aHdr, want: 401, breaks: true, body: `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`})
	ct.do(call{method: "POST", target: "/a2a", token: tightToken, hdr: a2aHdr, want: 429, body: a2aSend("m-1", `{"nodes":1,"tokens":2}`)})
	doneTight(false)

	// The 505 of the WebSocket endpoint needs HTTP/2; /metrics is a 404
	// where the registry is no Gatherer (an embedder's).
	h2 := newServedHarness(t, transport.Config{Tokens: toks, Registry: prometheus.WrapRegistererWithPrefix("embedder_", prometheus.NewRegistry())}, served{h2: true})
	ct2 := newContract(t, api, h2, seen)
	ct2.do(call{method: "GET", target: wsQ, token: acme, want: 505})
	ct2.do(call{method: "GET", target: "/metrics", token: acme, want: 404})
	// And the audit log's 404 a server without one.
	ct2.do(call{method: "GET", target: "/api/v1/audit", token: acme, want: 404})

	// Coverage: every documented answer was seen, but notDriven.
	unseen := maps.Clone(notDriven)
	for path, item := range api.model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			for code := range op.Responses.Codes.KeysFromOldest() {
				key := method + " " + path + " " + code
				_, skip := unseen[key]
				switch {
				case skip && seen[key]:
					t.Errorf("%s is in notDriven but the test drove it: remove it from the list", key)
				case !skip && !seen[key]:
					t.Errorf("%s is documented but the test never saw it", key)
				}
				delete(unseen, key)
			}
		}
	}
	for key := range unseen {
		t.Errorf("notDriven lists %s, which the contract does not document", key)
	}
}

func aguiInput(thread, run, question string) string {
	msgs := `[]`
	if question != "" {
		msgs = `[{"id":"u-` + run + `","role":"user","content":"` + question + `"}]`
	}
	return `{"threadId":"` + thread + `","runId":"` + run + `","protocolVersion":"1.0","state":{},"messages":` + msgs +
		`,"tools":[],"context":[],"forwardedProps":{"scenario":{"nodes":1,"tokens":2,"synthesis_tokens":2}}}`
}

func a2aSend(messageID, scenario string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"` + messageID +
		`","role":"ROLE_USER","parts":[{"text":"q"}],"metadata":{"scenario":` + scenario + `}}}}`
}

// TestOpenAPI_RoutesMatch: every route the server mounts is in
// docs/openapi.yaml with the same methods, and every path there is
// mounted: neither can drift from the other. The route table is checked
// against the handlers too: each route answers the methods it lists, and
// 405 to the others. "/" is not an endpoint (the dashboard and the API's
// JSON 404).
func TestOpenAPI_RoutesMatch(t *testing.T) {
	t.Parallel()
	api := loadOpenAPI(t)
	h := newHarness(t, transport.Config{})
	mounted := maps.Clone(h.srv.MountedRoutes())
	if m, ok := mounted["/"]; !ok || m != nil {
		t.Errorf(`"/" is mounted with methods %v (present: %v), want the catch-all with none`, m, ok)
	}
	delete(mounted, "/")
	documented := map[string][]string{}
	for path, item := range api.model.Paths.PathItems.FromOldest() {
		var methods []string
		for m := range item.GetOperations().KeysFromOldest() {
			methods = append(methods, strings.ToUpper(m))
		}
		slices.Sort(methods)
		documented[path] = methods
	}
	for pattern, methods := range mounted {
		if d, ok := documented[pattern]; !ok {
			t.Errorf("the server mounts %s %v; docs/openapi.yaml does not describe it", pattern, methods)
		} else if !slices.Equal(d, methods) {
			t.Errorf("%s: the server answers %v, docs/openapi.yaml describes %v", pattern, methods, d)
		}
	}
	for path := range documented {
		if _, ok := mounted[path]; !ok {
			t.Errorf("docs/openapi.yaml describes %s, which the server does not mount", path)
		}
	}
	// The table says what the handlers do: every method it lists is
	// answered (whatever the status, but 405), every other one is a 405.
	for pattern, methods := range mounted {
		path := strings.NewReplacer("{id}", "x").Replace(pattern)
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
			resp, _ := h.do(m, path, nil)
			if listed := slices.Contains(methods, m); listed == (resp.StatusCode == http.StatusMethodNotAllowed) {
				t.Errorf("%s %s = %d, but the route table lists %v", m, path, resp.StatusCode, methods)
			}
		}
	}
}

// suspendedChecker is a billing hook that says every tenant is suspended
// while *on is true.
type suspendedChecker struct{ on *atomic.Bool }

func (c suspendedChecker) Check(context.Context, billing.Request) (billing.Decision, error) {
	if c.on.Load() {
		return billing.Decision{Code: messages.ErrCodeTenantSuspended, Reason: "suspended"}, nil
	}
	return billing.Decision{Allow: true}, nil
}
