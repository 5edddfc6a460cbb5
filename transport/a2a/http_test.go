package a2a_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/billing"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport/a2a"
	"github.com/conclave-ai/conclave/transport/internal/httpjson"
)

// foldArtifacts rebuilds the artifacts a client ends up with from a
// stream's frames (append adds, otherwise replaces).
func foldArtifacts(fs []a2a.StreamResponse) map[string]string {
	out := map[string]string{}
	for _, f := range fs {
		switch {
		case f.Task != nil:
			for _, a := range f.Task.Artifacts {
				out[a.ArtifactID] = *a.Parts[0].Text
			}
		case f.ArtifactUpdate != nil:
			u := f.ArtifactUpdate
			text := ""
			for _, p := range u.Artifact.Parts {
				text += *p.Text
			}
			if u.Append {
				out[u.Artifact.ArtifactID] += text
			} else {
				out[u.Artifact.ArtifactID] = text
			}
		}
	}
	return out
}

func ctxWatchdog(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	t.Cleanup(cancel)
	return ctx
}

func TestHandler_Card(t *testing.T) {
	t.Parallel()
	for _, bearer := range []bool{false, true} {
		hs := newHarness(t, a2a.Config{BearerAuth: bearer})
		resp, err := hs.client.Get(hs.srv.URL + a2a.CardPath)
		if err != nil {
			t.Fatal(err)
		}
		var card a2a.AgentCard
		err = json.NewDecoder(resp.Body).Decode(&card)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("card: %d %v", resp.StatusCode, err)
		}
		if len(card.SupportedInterfaces) != 1 || card.SupportedInterfaces[0].URL != hs.srv.URL+a2a.RPCPath ||
			card.SupportedInterfaces[0].ProtocolBinding != "JSONRPC" || card.SupportedInterfaces[0].ProtocolVersion != "1.0" {
			t.Fatalf("interfaces %+v", card.SupportedInterfaces)
		}
		if !card.Capabilities.Streaming || card.Name == "" || card.Description == "" || card.Version == "" ||
			len(card.Skills) == 0 || len(card.DefaultInputModes) == 0 || len(card.DefaultOutputModes) == 0 {
			t.Fatalf("card %+v", card)
		}
		if got := card.SecuritySchemes["bearer"].HTTPAuth != nil; got != bearer {
			t.Fatalf("bearer scheme advertised: %v, want %v", got, bearer)
		}
		// Spec §8.6.1: cacheable, with a validator a client can send back.
		etag := resp.Header.Get("ETag")
		if cc := resp.Header.Get("Cache-Control"); cc != "max-age=300" || len(etag) < 10 || etag[0] != '"' {
			t.Fatalf("Cache-Control %q, ETag %q", cc, etag)
		}
		for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag} {
			req, _ := http.NewRequest(http.MethodGet, hs.srv.URL+a2a.CardPath, nil)
			req.Header.Set("If-None-Match", inm)
			resp, err := hs.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotModified || len(b) != 0 || resp.Header.Get("ETag") != etag {
				t.Fatalf("If-None-Match %s: %d %q", inm, resp.StatusCode, b)
			}
		}
		req, _ := http.NewRequest(http.MethodGet, hs.srv.URL+a2a.CardPath, nil)
		req.Header.Set("If-None-Match", `"stale"`)
		if resp, err := hs.client.Do(req); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("a stale ETag: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
	}
}

// TestHandler_QuotaRefusals: each quota the engine or the stream caps
// enforce answers what REST answers for it: too many runs and the run
// rate are HTTP 429 with Retry-After and CodeQuotaExceeded (ErrorInfo
// reason TOO_MANY_RUNS, RATE_LIMITED, TOO_MANY_STREAMS, domain
// conclave.quota, retry_after_seconds), a scenario that can never fit
// is 422 invalid params; none is an internal error or names the engine.
func TestHandler_QuotaRefusals(t *testing.T) {
	t.Parallel()
	parked := map[string]any{"message": userText("q", map[string]any{"hitl": "plan"})}
	quota := func(t *testing.T, r reply, reason string) {
		t.Helper()
		if r.Error == nil || r.Status != http.StatusTooManyRequests || r.Error.Code != a2a.CodeQuotaExceeded || r.Header.Get("Retry-After") == "" {
			t.Fatalf("HTTP %d Retry-After %q error %+v, want 429 with Retry-After and code %d", r.Status, r.Header.Get("Retry-After"), r.Error, a2a.CodeQuotaExceeded)
		}
		if len(r.Error.Data) != 1 || r.Error.Data[0].Reason != reason || r.Error.Data[0].Domain != a2a.QuotaDomain ||
			r.Error.Data[0].Metadata["retry_after_seconds"] != r.Header.Get("Retry-After") || strings.Contains(r.Error.Message, "actors:") {
			t.Fatalf("error %+v, want reason %s", r.Error, reason)
		}
	}
	t.Run("too many runs", func(t *testing.T) {
		t.Parallel()
		hs := newHarnessWith(t, actors.Config{Limits: func(messages.TenantID) actors.Limits { return actors.Limits{ConcurrentRuns: 1} }}, a2a.Config{})
		mustResult[a2a.SendMessageResponse](t, hs.call("SendMessage", parked)) // returns at the plan gate, the run still open
		quota(t, hs.call("SendMessage", parked), "TOO_MANY_RUNS")
	})
	t.Run("rate limited", func(t *testing.T) {
		t.Parallel()
		hs := newHarnessWith(t, actors.Config{Limits: func(messages.TenantID) actors.Limits {
			return actors.Limits{RunsPerSecond: 0.01, RunBurst: 1}
		}}, a2a.Config{})
		mustResult[a2a.SendMessageResponse](t, hs.call("SendMessage", parked))
		r := hs.call("SendMessage", parked)
		quota(t, r, "RATE_LIMITED")
		if r.Header.Get("Retry-After") == "1" { // one run per 100 s
			t.Fatalf("Retry-After %s", r.Header.Get("Retry-After"))
		}
	})
	t.Run("billing denied", func(t *testing.T) {
		t.Parallel()
		// A real billing service (package billing's HTTP hook): the first
		// start is refused for budget, the second for a suspension.
		var n atomic.Int32
		billSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			code := "insufficient_budget"
			if n.Add(1) > 1 {
				code = "tenant_suspended"
			}
			_, _ = w.Write([]byte(`{"allow": false, "code": "` + code + `", "reason": "billing says no"}`))
		}))
		t.Cleanup(billSrv.Close)
		hs := newHarnessWith(t, actors.Config{Billing: &billing.Gate{Checker: &billing.HTTPChecker{URL: billSrv.URL}}}, a2a.Config{})
		quota(t, hs.call("SendMessage", parked), "INSUFFICIENT_BUDGET")
		r := hs.call("SendMessage", parked)
		if r.Error == nil || r.Status != http.StatusPaymentRequired || r.Error.Code != a2a.CodeQuotaExceeded || r.Header.Get("Retry-After") != "" ||
			len(r.Error.Data) != 1 || r.Error.Data[0].Reason != "TENANT_SUSPENDED" || !strings.Contains(r.Error.Message, "billing says no") {
			t.Fatalf("HTTP %d error %+v, want 402 TENANT_SUSPENDED without Retry-After", r.Status, r.Error)
		}
	})
	t.Run("scenario too large", func(t *testing.T) {
		t.Parallel()
		hs := newHarnessWith(t, actors.Config{Limits: func(messages.TenantID) actors.Limits { return actors.Limits{EventsPerRun: 100} }}, a2a.Config{})
		r := hs.call("SendMessage", map[string]any{"message": userText("q", map[string]any{"scenario": map[string]any{"nodes": 50}})})
		if r.Error == nil || r.Status != http.StatusUnprocessableEntity || r.Error.Code != a2a.CodeInvalidParams ||
			!strings.Contains(r.Error.Message, "scenario_too_large") || strings.Contains(r.Error.Message, "actors:") {
			t.Fatalf("HTTP %d error %+v, want 422 invalid params naming scenario_too_large", r.Status, r.Error)
		}
	})
	t.Run("budget too large", func(t *testing.T) {
		t.Parallel()
		hs := newHarnessWith(t, actors.Config{Limits: func(messages.TenantID) actors.Limits { return actors.Limits{TokensPerRun: 100} }}, a2a.Config{})
		r := hs.call("SendMessage", map[string]any{"message": userText("q", map[string]any{"budget": map[string]any{"tokens": 101}})})
		if r.Error == nil || r.Status != http.StatusUnprocessableEntity || r.Error.Code != a2a.CodeInvalidParams ||
			!strings.Contains(r.Error.Message, "budget_too_large") {
			t.Fatalf("HTTP %d error %+v, want 422 invalid params naming budget_too_large", r.Status, r.Error)
		}
	})
	t.Run("insufficient budget", func(t *testing.T) {
		t.Parallel()
		hs := newHarnessWith(t, actors.Config{Limits: func(messages.TenantID) actors.Limits { return actors.Limits{TokensPerDay: 1} }}, a2a.Config{})
		// The first run spends the day's one token (and ends budget_exceeded).
		mustResult[a2a.SendMessageResponse](t, hs.call("SendMessage", map[string]any{"message": userText("q", map[string]any{"scenario": map[string]any{"nodes": 1, "tokens": 2}})}))
		quota(t, hs.call("SendMessage", parked), "INSUFFICIENT_BUDGET")
	})
	t.Run("too many streams", func(t *testing.T) {
		t.Parallel()
		hs := newHarness(t, a2a.Config{StreamSlot: func(messages.TenantID) (func(), error) {
			return nil, &httpjson.Error{Status: http.StatusTooManyRequests, Code: httpjson.CodeTooManyStreams, Message: "too many streams", RetryAfter: 2 * time.Second}
		}})
		r := hs.call("SendMessage", parked)
		quota(t, r, "TOO_MANY_STREAMS")
		if r.Header.Get("Retry-After") != "2" {
			t.Fatalf("Retry-After %q, want 2", r.Header.Get("Retry-After"))
		}
	})
}

// TestHandler_UnknownFieldsIgnored: spec §5.7, unrecognized fields in the
// params and the message (a newer client's) are ignored; Conclave's own
// run options in the metadata stay strict.
func TestHandler_UnknownFieldsIgnored(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, a2a.Config{})
	msg := userText("q", map[string]any{"scenario": map[string]any{"nodes": 1, "tokens": 2}})
	msg["futureField"] = map[string]any{"x": 1}
	res := mustResult[a2a.SendMessageResponse](t, hs.call("SendMessage", map[string]any{"message": msg, "tenantHint": "x", "configuration": map[string]any{"somethingNew": true}}))
	task := res.Task
	if task == nil || task.Status.State != a2a.StateCompleted {
		t.Fatalf("answer %+v", res)
	}
	got := mustResult[a2a.Task](t, hs.call("GetTask", map[string]any{"id": task.ID, "task_id": "x"}))
	if got.ID != task.ID {
		t.Fatalf("GetTask with an unknown field: %+v", got)
	}
}

// TestHandler_StreamToCompletion: a new task streams from its submission to
// COMPLETED; the artifacts the client folds match GetTask and the run.
func TestHandler_StreamToCompletion(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, a2a.Config{})
	ctx := ctxWatchdog(t)
	s, errReply := hs.stream(ctx, "SendStreamingMessage", map[string]any{
		"message": userText("Why is the sky blue?", map[string]any{"scenario": map[string]any{"nodes": 6, "waves": 2, "tokens": 4, "subagents_per_node": 1}}),
	})
	if errReply != nil {
		t.Fatalf("error %+v", errReply.Error)
	}
	fs := frames(t, s.all(t))
	if st := checkStream(t, fs); st != a2a.StateCompleted {
		t.Fatalf("ended %s", st)
	}
	task := fs[0].Task
	if task.Status.State != a2a.StateSubmitted || task.ContextID == "" || len(task.Artifacts) != 0 {
		t.Fatalf("first frame %+v", task)
	}
	sum, err := hs.engine.Run(messages.LocalTenant, messages.RunID(task.ID))
	if err != nil || sum.Status != messages.StatusFinished || string(sum.SessionID) != task.ContextID {
		t.Fatalf("run %+v %v", sum, err)
	}
	folded := foldArtifacts(fs)
	if folded[a2a.AnswerArtifactID] != sum.Answer || sum.Answer == "" {
		t.Fatalf("answer artifact %q, run answer %q", folded[a2a.AnswerArtifactID], sum.Answer)
	}
	if n := len(folded); n != 6+6+1 {
		t.Fatalf("%d artifacts, want 6 nodes + 6 sub-agents + answer: %v", n, folded)
	}
	got := mustResult[a2a.Task](t, hs.call("GetTask", map[string]any{"id": task.ID}))
	if got.Status.State != a2a.StateCompleted || len(got.Artifacts) != len(folded) {
		t.Fatalf("GetTask %s with %d artifacts", got.Status.State, len(got.Artifacts))
	}
	for _, a := range got.Artifacts {
		if *a.Parts[0].Text != folded[a.ArtifactID] {
			t.Fatalf("artifact %s: GetTask %q, stream %q", a.ArtifactID, *a.Parts[0].Text, folded[a.ArtifactID])
		}
	}
	if st := lastStatus(fs); st.Message == nil || *st.Message.Parts[0].Text != sum.Answer {
		t.Fatalf("final status message %+v", st.Message)
	}
}

// TestHandler_InterruptResume: a hitl "tools" run raises plan, node, tool
// and info interrupts; each INPUT_REQUIRED ends the stream, and a message
// with the same taskId answers it (text when one is open, data parts
// otherwise) and streams on, until COMPLETED.
func TestHandler_InterruptResume(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, a2a.Config{})
	ctx := ctxWatchdog(t)
	s, errReply := hs.stream(ctx, "SendStreamingMessage", map[string]any{"message": userText("q", map[string]any{
		"hitl": "tools", "scenario": map[string]any{"nodes": 3, "waves": 1, "tokens": 3, "approvals": 2, "info_requests": 1}})})
	if errReply != nil {
		t.Fatalf("error %+v", errReply.Error)
	}
	fs := frames(t, s.all(t))
	task := fs[0].Task
	answered := map[string]bool{}
	kinds := map[string]int{}
	rounds, texts := 0, 0
	for checkStream(t, fs) == a2a.StateInputRequired {
		if rounds++; rounds > 50 {
			t.Fatal("too many rounds")
		}
		open := interruptsOf(t, lastStatus(fs))
		var parts []any
		for _, d := range open {
			if answered[d.InterruptID] {
				t.Fatalf("interrupt %s asked again after it was answered", d.InterruptID)
			}
			answered[d.InterruptID] = true
			kinds[d.Reason]++
			switch {
			case len(open) == 1 && d.Reason != "info_request":
				parts = append(parts, map[string]any{"text": "approve"})
				texts++
			case len(open) == 1:
				parts = append(parts, map[string]any{"text": "blue"})
				texts++
			case d.Reason == "info_request":
				parts = append(parts, map[string]any{"data": map[string]any{"interruptId": d.InterruptID, "response": "blue"}})
			case d.Reason == "tool_approval" && kinds[d.Reason] == 2:
				parts = append(parts, map[string]any{"data": map[string]any{"interruptId": d.InterruptID, "decision": "reject", "feedback": "no"}})
			default:
				parts = append(parts, map[string]any{"data": map[string]any{"interruptId": d.InterruptID, "decision": "approve"}})
			}
		}
		s, errReply := hs.stream(ctx, "SendStreamingMessage", map[string]any{"message": answer(task.ID, task.ContextID, parts...)})
		if errReply != nil {
			t.Fatalf("answer refused: %+v", errReply.Error)
		}
		fs = frames(t, s.all(t))
		if st := fs[0].Task.Status; st.State == a2a.StateInputRequired {
			for _, d := range interruptsOf(t, st) {
				if answered[d.InterruptID] {
					t.Fatalf("the answer stream's task still asks for %s", d.InterruptID)
				}
			}
		}
	}
	if st := lastStatus(fs).State; st != a2a.StateCompleted {
		t.Fatalf("ended %s", st)
	}
	// plan + 3 nodes + 2 tool approvals + 1 info request.
	if kinds["plan_approval"] != 1 || kinds["node_approval"] != 3 || kinds["tool_approval"] != 2 || kinds["info_request"] != 1 {
		t.Fatalf("interrupts answered: %v", kinds)
	}
	t.Logf("%d rounds, %d answered by text", rounds, texts)
	if texts == 0 {
		t.Fatal("no round had a single open interrupt to answer by text")
	}
}

// readAll reads a stream to its end on its own goroutine.
func readAll(t *testing.T, s *sse, wg *sync.WaitGroup, out *[]reply, errs chan<- error) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer s.close()
		for {
			r, err := s.next()
			if err == io.EOF {
				return
			}
			if err != nil {
				errs <- err
				return
			}
			*out = append(*out, r)
		}
	}()
}

// TestHandler_StreamsAgree: parallel nodes interleave their artifact
// chunks, and a SubscribeToTask stream opened mid-run receives, after its
// Task, exactly the frames (byte for byte) that the first stream receives
// from that point on.
func TestHandler_StreamsAgree(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, a2a.Config{})
	ctx := ctxWatchdog(t)
	a, errReply := hs.stream(ctx, "SendStreamingMessage", map[string]any{"message": userText("q", map[string]any{
		"concurrency": 6, "scenario": map[string]any{"nodes": 6, "waves": 1, "tokens": 60, "token_delay_ms": 3}})})
	if errReply != nil {
		t.Fatalf("error %+v", errReply.Error)
	}
	var first []reply
	for len(first) < 12 { // into the wave
		r, err := a.next()
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, r)
	}
	task := frameOf(t, first[0]).Task
	b, errReply := hs.stream(ctx, "SubscribeToTask", map[string]any{"id": task.ID})
	if errReply != nil {
		t.Fatalf("subscribe: %+v", errReply.Error)
	}
	var restA, allB []reply
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	readAll(t, a, &wg, &restA, errs)
	readAll(t, b, &wg, &allB, errs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	allA := append(first, restA...)
	fa, fb := frames(t, allA), frames(t, allB)
	if st := checkStream(t, fa); st != a2a.StateCompleted {
		t.Fatalf("stream A ended %s", st)
	}
	if st := checkStream(t, fb); st != a2a.StateCompleted {
		t.Fatalf("stream B ended %s", st)
	}
	if len(allB) < 2 {
		t.Fatal("stream B has no updates")
	}
	start := -1
	for i := range allA {
		if bytes.Equal(allA[i].Result, allB[1].Result) {
			start = i
			break
		}
	}
	if start < 1 {
		t.Fatalf("stream B's first update is not in stream A: %s", allB[1].Result)
	}
	if len(allA)-start != len(allB)-1 {
		t.Fatalf("stream A has %d frames from B's first update on, B has %d", len(allA)-start, len(allB)-1)
	}
	for i := range allB[1:] {
		if !bytes.Equal(allA[start+i].Result, allB[1+i].Result) {
			t.Fatalf("frame %d differs:\nA %s\nB %s", i, allA[start+i].Result, allB[1+i].Result)
		}
	}
	// B's task snapshot plus its updates fold to what A folds to.
	if fA, fB := foldArtifacts(fa), foldArtifacts(fb); fmt.Sprint(fA) != fmt.Sprint(fB) {
		t.Fatalf("artifacts differ:\nA %v\nB %v", fA, fB)
	}
	// Parallel lanes interleave: some lane's chunks are split by another's.
	lastLane, switches, seen := "", 0, map[string]bool{}
	for _, f := range fa {
		if u := f.ArtifactUpdate; u != nil && u.Append {
			if id := u.Artifact.ArtifactID; id != lastLane {
				if seen[id] {
					switches++
				}
				seen[id], lastLane = true, id
			}
		}
	}
	if switches == 0 {
		t.Fatal("the lanes' chunks did not interleave")
	}
}

// TestHandler_Cancel: CancelTask during a stream ends the task CANCELED on
// both; afterwards the task refuses cancel, subscribe and messages.
func TestHandler_Cancel(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, a2a.Config{})
	ctx := ctxWatchdog(t)
	s, errReply := hs.stream(ctx, "SendStreamingMessage", map[string]any{"message": userText("q", map[string]any{
		"scenario": map[string]any{"nodes": 4, "waves": 1, "tokens": 200, "token_delay_ms": 5}})})
	if errReply != nil {
		t.Fatalf("error %+v", errReply.Error)
	}
	var got []reply
	for {
		r, err := s.next()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
		if frameOf(t, r).ArtifactUpdate != nil {
			break
		}
	}
	task := frameOf(t, got[0]).Task
	canceled := mustResult[a2a.Task](t, hs.call("CancelTask", map[string]any{"id": task.ID}))
	if canceled.Status.State != a2a.StateCanceled {
		t.Fatalf("CancelTask answered %s", canceled.Status.State)
	}
	got = append(got, s.all(t)...)
	if st := checkStream(t, frames(t, got)); st != a2a.StateCanceled {
		t.Fatalf("stream ended %s", st)
	}
	for _, c := range []struct {
		method string
		params any
		code   a2a.ErrorCode
	}{
		{"CancelTask", map[string]any{"id": task.ID}, a2a.CodeTaskNotCancelable},
		{"SubscribeToTask", map[string]any{"id": task.ID}, a2a.CodeUnsupportedOperation},
		{"SendMessage", map[string]any{"message": answer(task.ID, task.ContextID, map[string]any{"text": "approve"})}, a2a.CodeUnsupportedOperation},
	} {
		if r := hs.call(c.method, c.params); r.Error == nil || r.Error.Code != c.code {
			t.Fatalf("%s on a canceled task: %+v, want code %d", c.method, r.Error, c.code)
		}
	}
}

// TestHandler_SendMessage: the blocking call returns at completion, or at
// an interrupt; an answer by SendMessage carries on.
func TestHandler_SendMessage(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, a2a.Config{})
	res := mustResult[a2a.SendMessageResponse](t, hs.call("SendMessage", map[string]any{"message": userText("q", nil)}))
	if res.Task == nil || res.Task.Status.State != a2a.StateCompleted || len(res.Task.Artifacts) == 0 {
		t.Fatalf("SendMessage %+v", res.Task)
	}
	res = mustResult[a2a.SendMessageResponse](t, hs.call("SendMessage", map[string]any{"message": userText("q", map[string]any{"hitl": "plan"})}))
	if res.Task.Status.State != a2a.StateInputRequired || interruptsOf(t, res.Task.Status)[0].Reason != "plan_approval" {
		t.Fatalf("hitl plan: %s", res.Task.Status.State)
	}
	res = mustResult[a2a.SendMessageResponse](t, hs.call("SendMessage", map[string]any{
		"message": answer(res.Task.ID, "", map[string]any{"text": "approve"})}))
	if res.Task.Status.State != a2a.StateCompleted {
		t.Fatalf("after approving the plan: %s", res.Task.Status.State)
	}
	res = mustResult[a2a.SendMessageResponse](t, hs.call("SendMessage", map[string]any{"message": userText("q", map[string]any{
		"scenario": map[string]any{"tokens": 100, "token_delay_ms": 5}}), "configuration": map[string]any{"returnImmediately": true}}))
	if st := res.Task.Status.State; st.Terminal() {
		t.Fatalf("returnImmediately answered %s", st)
	}
	mustResult[a2a.Task](t, hs.call("CancelTask", map[string]any{"id": res.Task.ID}))

	// A data part is structured input: its JSON is part of the question.
	res = mustResult[a2a.SendMessageResponse](t, hs.call("SendMessage", map[string]any{"message": map[string]any{
		"messageId": "m-data", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "Plan a trip"}, map[string]any{"data": map[string]any{"city": "Oslo", "days": 3}}},
		"metadata": map[string]any{"scenario": map[string]any{"nodes": 1}}}}))
	if res.Task == nil || res.Task.Status.State != a2a.StateCompleted {
		t.Fatalf("a question with a data part: %+v", res.Task)
	}
	sum, err := hs.engine.Run("", messages.RunID(res.Task.ID))
	if err != nil || sum.Question != "Plan a trip\n{\"city\":\"Oslo\",\"days\":3}" {
		t.Fatalf("the question of a text and a data part: %q, %v", sum.Question, err)
	}
}

// TestHandler_ListTasks: pagination, filters and tenants.
func TestHandler_ListTasks(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, a2a.Config{Authenticate: func(r *http.Request) (messages.TenantID, error) {
		if v := r.Header.Get("X-Tenant"); v != "" {
			return messages.TenantID(v), nil
		}
		return "", errors.New("a bearer token is required")
	}})
	as := func(tenant, method string, params any) reply {
		return hs.raw(hs.body(method, params), map[string]string{"X-Tenant": tenant})
	}
	var ids []string
	var ctxID string
	for i := range 3 {
		msg := userText(fmt.Sprint("q", i), nil)
		if i == 2 {
			msg["contextId"] = ctxID
		}
		task := mustResult[a2a.SendMessageResponse](t, as("alice", "SendMessage", map[string]any{"message": msg})).Task
		ids = append(ids, task.ID)
		ctxID = task.ContextID
	}
	page := mustResult[a2a.ListTasksResponse](t, as("alice", "ListTasks", map[string]any{"pageSize": 2}))
	if len(page.Tasks) != 2 || page.TotalSize != 3 || page.PageSize != 2 || page.NextPageToken == "" {
		t.Fatalf("page 1: %+v", page)
	}
	if page.Tasks[0].ID != ids[2] || page.Tasks[1].ID != ids[1] { // most recent first
		t.Fatalf("order %s %s, created %v", page.Tasks[0].ID, page.Tasks[1].ID, ids)
	}
	page = mustResult[a2a.ListTasksResponse](t, as("alice", "ListTasks", map[string]any{"pageSize": 2, "pageToken": page.NextPageToken}))
	if len(page.Tasks) != 1 || page.Tasks[0].ID != ids[0] || page.NextPageToken != "" {
		t.Fatalf("page 2: %+v", page)
	}
	page = mustResult[a2a.ListTasksResponse](t, as("alice", "ListTasks", map[string]any{"contextId": ctxID, "status": "TASK_STATE_COMPLETED", "includeArtifacts": true}))
	if len(page.Tasks) != 2 || page.TotalSize != 2 || len(page.Tasks[0].Artifacts) == 0 {
		t.Fatalf("context filter: %+v", page)
	}
	page = mustResult[a2a.ListTasksResponse](t, as("alice", "ListTasks", map[string]any{"status": "TASK_STATE_WORKING"}))
	if len(page.Tasks) != 0 || page.TotalSize != 0 {
		t.Fatalf("status filter: %+v", page)
	}
	page = mustResult[a2a.ListTasksResponse](t, as("bob", "ListTasks", map[string]any{}))
	if len(page.Tasks) != 0 {
		t.Fatalf("bob sees alice's tasks: %+v", page)
	}
	if r := as("bob", "GetTask", map[string]any{"id": ids[0]}); r.Error == nil || r.Error.Code != a2a.CodeTaskNotFound {
		t.Fatalf("bob's GetTask of alice's task: %+v", r)
	}
	// Context ids are namespaced per tenant: bob using alice's context id
	// gets a context of his own; neither sees the other's tasks.
	if r := as("bob", "SendMessage", map[string]any{"message": map[string]any{"messageId": "m", "role": "ROLE_USER", "contextId": ctxID,
		"parts": []any{map[string]any{"text": "q"}}}}); r.Error != nil {
		t.Fatalf("bob's task with alice's context id: %+v", r.Error)
	}
	bobs := mustResult[a2a.ListTasksResponse](t, as("bob", "ListTasks", map[string]any{}))
	if len(bobs.Tasks) != 1 || slices.Contains(ids, bobs.Tasks[0].ID) {
		t.Fatalf("bob's tasks: %+v", bobs)
	}
	for _, task := range mustResult[a2a.ListTasksResponse](t, as("alice", "ListTasks", map[string]any{})).Tasks {
		if task.ID == bobs.Tasks[0].ID {
			t.Fatal("alice lists bob's task")
		}
	}
	if r := hs.raw(hs.body("ListTasks", map[string]any{}), nil); r.Status != http.StatusUnauthorized || r.Error == nil {
		t.Fatalf("no credentials: %d %+v", r.Status, r.Error)
	}
}

// TestHandler_Shutdown: Shutdown ends a live stream with an error frame
// and refuses new calls.
func TestHandler_Shutdown(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, a2a.Config{})
	ctx := ctxWatchdog(t)
	s, errReply := hs.stream(ctx, "SendStreamingMessage", map[string]any{"message": userText("q", map[string]any{
		"scenario": map[string]any{"tokens": 1000, "token_delay_ms": 5}})})
	if errReply != nil {
		t.Fatalf("error %+v", errReply.Error)
	}
	if _, err := s.next(); err != nil {
		t.Fatal(err)
	}
	if err := hs.h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var last reply
	for {
		r, err := s.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		last = r
	}
	s.close()
	if last.Error == nil || last.Error.Code != a2a.CodeInternal || !strings.Contains(last.Error.Message, "shutting down") {
		t.Fatalf("last frame %+v", last)
	}
	if r := hs.call("ListTasks", map[string]any{}); r.Status != http.StatusServiceUnavailable || r.Error == nil {
		t.Fatalf("after shutdown: %d %+v", r.Status, r.Error)
	}
}

// TestHandler_HeartbeatAndDisconnect: an idle stream carries comment
// heartbeats; a client that hangs up ends its call.
func TestHandler_HeartbeatAndDisconnect(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, a2a.Config{Heartbeat: 20 * time.Millisecond})
	ctx := ctxWatchdog(t)
	s, errReply := hs.stream(ctx, "SendStreamingMessage", map[string]any{"message": userText("q", map[string]any{
		"scenario": map[string]any{"nodes": 1, "tokens": 3, "token_delay_ms": 200}})})
	if errReply != nil {
		t.Fatalf("error %+v", errReply.Error)
	}
	pings := 0
	for pings == 0 {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == ": ping\n" {
			pings++
		}
	}
	s.close() // hang up mid-run: the next heartbeat finds the connection gone
	deadline := time.Now().Add(10 * time.Second)
	for hs.h.InFlight() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the hung-up stream is still being served")
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline, not synchronising
	}
}
