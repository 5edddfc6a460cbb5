package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport"
)

// decide answers the gates hitl "tools" includes (plan, node) with approve,
// and the three tool approvals with approve, reject and revise.
func decide(p *messages.InterruptRaisedPayload, n int) messages.Resume {
	if p.Kind != messages.InterruptToolApproval {
		return messages.Resume{Decision: messages.DecisionApprove}
	}
	switch n % 3 {
	case 0:
		return messages.Resume{Decision: messages.DecisionApprove}
	case 1:
		return messages.Resume{Decision: messages.DecisionReject, Feedback: "no"}
	default:
		return messages.Resume{Decision: messages.DecisionRevise, EditedArgs: json.RawMessage(`{"query":"edited"}`)}
	}
}

func hitlRun(t *testing.T, h *harness) messages.RunCreated {
	return h.startRun(messages.StartRun{Question: "q", HITL: messages.HITLTools,
		Scenario: &messages.Scenario{Nodes: 3, Waves: 1, Tokens: 3, Approvals: 3}})
}

func checkHITLRun(t *testing.T, events []*messages.Envelope, run messages.RunID) {
	t.Helper()
	testkit.AssertInvariants(t, events)
	for i, e := range events {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: gap or duplicate", i, e.Seq)
		}
	}
	if last := events[len(events)-1]; last.Type != messages.RunFinished || last.RunID != run {
		t.Fatalf("last event %s", last.Type)
	}
	tools := 0
	for _, e := range events {
		if p, ok := e.Payload.(*messages.InterruptResolvedPayload); ok && p.Kind == messages.InterruptToolApproval {
			tools++
		}
	}
	if tools != 3 {
		t.Fatalf("%d tool approvals resolved, want 3", tools)
	}
}

// TestHITL_SSEDisconnectResumeReconnect: the client drops the stream right
// after each interrupt_raised, resumes over HTTP, and reconnects with
// Last-Event-ID: it sees everything through run_finished, once.
func TestHITL_SSEDisconnectResumeReconnect(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/api/v1/events/resume/", "/api/v1/interrupts/"} {
		h := newHarness(t, transportConfig())
		rc := hitlRun(t, h)
		var events []*messages.Envelope
		n := 0
		for {
			hdr := []string{}
			if len(events) > 0 {
				hdr = []string{"Last-Event-ID", strconv.FormatUint(events[len(events)-1].Seq, 10)}
			}
			ctx, cancel := context.WithCancel(context.Background())
			resp, r := h.sse(ctx, "session_id="+string(rc.SessionID), hdr...)
			got := readUntil(t, r, func(e *messages.Envelope) bool {
				return e.Type == messages.InterruptRaised || testkit.TerminalOf(rc.RunID)(e)
			})
			cancel() // disconnect right after interrupt_raised
			resp.Body.Close()
			events = append(events, got...)
			last := got[len(got)-1]
			if last.Type.Terminal() {
				break
			}
			p := last.Payload.(*messages.InterruptRaisedPayload)
			url := path + p.InterruptID
			if path == "/api/v1/interrupts/" {
				url += "/resume"
				// The polling fallback lists it.
				_, body := h.do("GET", "/api/v1/interrupts?session_id="+string(rc.SessionID), nil)
				if !strings.Contains(string(body), p.InterruptID) {
					t.Fatalf("pending list lacks %s: %s", p.InterruptID, body)
				}
				// So does the list of every session of the tenant.
				_, body = h.do("GET", "/api/v1/interrupts?limit=200", nil)
				if !strings.Contains(string(body), p.InterruptID) {
					t.Fatalf("the tenant's pending list lacks %s: %s", p.InterruptID, body)
				}
				if resp, body := h.do("GET", "/api/v1/interrupts?cursor=nope", nil); resp.StatusCode != http.StatusUnprocessableEntity {
					t.Fatalf("a malformed cursor: %d %s", resp.StatusCode, body)
				}
			}
			if p.Kind == messages.InterruptToolApproval {
				n++
			}
			if resp, body := h.do("POST", url, decide(p, n)); resp.StatusCode != http.StatusOK {
				t.Fatalf("resume = %d %s", resp.StatusCode, body)
			}
		}
		checkHITLRun(t, events, rc.RunID)
	}
}

func transportConfig() transport.Config { return transport.Config{} }

func TestHITL_WebSocketResume(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transportConfig())
	rc := hitlRun(t, h)
	conn, _, err := websocket.DefaultDialer.Dial(rc.WSURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var events []*messages.Envelope
	n := 0
	for done := false; !done; {
		_, data, err := conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			if bytes.Contains(line, []byte(`"reply_to"`)) {
				var rep messages.WSReply
				if err := json.Unmarshal(line, &rep); err != nil || !rep.OK || rep.RequestID == "" {
					t.Fatalf("reply %s", line)
				}
				continue
			}
			var env messages.Envelope
			if err := json.Unmarshal(line, &env); err != nil {
				t.Fatal(err)
			}
			events = append(events, &env)
			if p, ok := env.Payload.(*messages.InterruptRaisedPayload); ok {
				if p.Kind == messages.InterruptToolApproval {
					n++
				}
				m := messages.WSClientMessage{Type: messages.WSResume, RequestID: "r-" + p.InterruptID, InterruptID: p.InterruptID, Resume: decide(p, n)}
				if err := conn.WriteJSON(m); err != nil {
					t.Fatal(err)
				}
			}
			done = done || testkit.TerminalOf(rc.RunID)(&env)
		}
	}
	checkHITLRun(t, events, rc.RunID)
	// A bad resume gets an error reply, not a closed connection.
	if err := conn.WriteJSON(messages.WSClientMessage{Type: messages.WSResume, InterruptID: "nope", Resume: messages.Resume{Decision: messages.DecisionApprove}}); err != nil {
		t.Fatal(err)
	}
	_, data, err := conn.ReadMessage()
	if err != nil || !strings.Contains(string(data), `"status":404`) {
		t.Fatalf("reply to a bad resume: %s %v", data, err)
	}
}

// TestHITL_ConcurrentResumesOneWins: 20 concurrent resumes of one
// interrupt over HTTP: exactly one 200; the others 409 (being resolved) or
// 404 (already resolved).
func TestHITL_ConcurrentResumesOneWins(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transportConfig())
	rc := h.startRun(messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 2}})
	resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID))
	defer resp.Body.Close()
	evs := readUntil(t, r, func(e *messages.Envelope) bool { return e.Type == messages.InterruptRaised })
	id := evs[len(evs)-1].Payload.(*messages.InterruptRaisedPayload).InterruptID

	// Invalid bodies first: 422 and the interrupt stays pending.
	for _, bad := range []string{`{}`, `{"decision":"revise"}`, `{"decision":"maybe"}`} {
		if resp, body := h.do("POST", "/api/v1/interrupts/"+id+"/resume", bad); resp.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("%s = %d %s, want 422", bad, resp.StatusCode, body)
		}
	}
	if resp, _ := h.do("POST", "/api/v1/interrupts/"+id+"/resume", `{"decision":"approve","colour":1}`); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("unknown field = %d", resp.StatusCode)
	}
	codes := make([]int, 20)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, _ := h.do("POST", "/api/v1/events/resume/"+id, `{"decision":"approve"}`)
			codes[i] = resp.StatusCode
		}()
	}
	close(start)
	wg.Wait()
	ok := 0
	for _, c := range codes {
		switch c {
		case http.StatusOK:
			ok++
		case http.StatusConflict: // the losers, before or after the winner was applied
		default:
			t.Fatalf("status %d", c)
		}
	}
	if ok != 1 {
		t.Fatalf("%d resumes succeeded (%v), want exactly 1", ok, codes)
	}
	testkit.AssertInvariants(t, append(evs, readUntil(t, r, testkit.TerminalOf(rc.RunID))...))
	if resp, body := h.do("POST", "/api/v1/events/resume/"+id, `{"decision":"approve"}`); resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "interrupt_conflict") {
		t.Fatalf("resume after resolution = %d %s, want 409 interrupt_conflict", resp.StatusCode, body)
	}
}

// TestHITL_ChoiceResume: a choice's resume over HTTP is 422
// invalid_resume for an unknown option id, two ids of a single choice or
// none, and the interrupt stays pending; a valid id is 200 and the
// interrupt_resolved names it.
func TestHITL_ChoiceResume(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transportConfig())
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, Choices: 1}})
	resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID))
	defer resp.Body.Close()
	evs := readUntil(t, r, func(e *messages.Envelope) bool { return e.Type == messages.InterruptRaised })
	p := evs[len(evs)-1].Payload.(*messages.InterruptRaisedPayload)
	if p.Kind != messages.InterruptChoice || len(p.Options) != 3 {
		t.Fatalf("raised %+v", p)
	}
	for _, bad := range []string{`{"choices":["nope"]}`, `{"choices":["broad","deep"]}`, `{"choices":[]}`, `{}`} {
		if resp, body := h.do("POST", "/api/v1/interrupts/"+p.InterruptID+"/resume", bad); resp.StatusCode != http.StatusUnprocessableEntity ||
			!strings.Contains(string(body), "invalid_resume") {
			t.Fatalf("%s = %d %s, want 422 invalid_resume", bad, resp.StatusCode, body)
		}
	}
	if resp, body := h.do("POST", "/api/v1/interrupts/"+p.InterruptID+"/resume", `{"choices":["skip"]}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("valid choice = %d %s", resp.StatusCode, body)
	}
	evs = readUntil(t, r, func(e *messages.Envelope) bool { return e.Type == messages.InterruptResolved })
	if res := evs[len(evs)-1].Payload.(*messages.InterruptResolvedPayload); len(res.Choices) != 1 || res.Choices[0] != "skip" {
		t.Fatalf("resolved %+v", res)
	}
}
