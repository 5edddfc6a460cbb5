package openai_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/openai"
	"github.com/conclave-ai/conclave/model/openai/openaitest"
)

// noWait is a Sleep that does not wait (the classes, not the backoff).
func noWait(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// TestModel_ErrorClasses: each way a server says no is a *model.Error of
// its class with upstream's words, not a transient error (no supervisor
// restart: "panicked" is for panics), after as many requests as the
// retry policy says: one for a class that retrying cannot help.
func TestModel_ErrorClasses(t *testing.T) {
	t.Parallel()
	reply := func(status int, msg string) openaitest.Reply { return openaitest.Reply{Status: status, Message: msg} }
	times := func(n int, r openaitest.Reply) []openaitest.Reply {
		out := make([]openaitest.Reply, n)
		for i := range out {
			out[i] = r
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		replies []openaitest.Reply
		code    model.Code
		served  int
		says    string
	}{
		{"401", times(1, reply(http.StatusUnauthorized, "Incorrect API key provided: sk-...abcd.")), model.CodeAuth, 1, "Incorrect API key"},
		{"403", times(1, reply(http.StatusForbidden, "Project does not have access to model.")), model.CodeAuth, 1, "does not have access"},
		{"400", times(1, reply(http.StatusBadRequest, "Invalid 'messages[2].content': string too long.")), model.CodeBadRequest, 1, "string too long"},
		{"404", times(1, reply(http.StatusNotFound, "The model `gpt-9` does not exist or you do not have access to it.")), model.CodeBadRequest, 1, "does not exist"},
		{"context too long", times(1, reply(http.StatusBadRequest, "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.")),
			model.CodeContextTooLong, 1, "maximum context length"},
		{"content filtered", times(1, reply(http.StatusBadRequest, "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.")),
			model.CodeContentFiltered, 1, "content management policy"},
		{"429", times(openai.DefaultMaxAttempts, openaitest.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}, Message: "Rate limit reached for requests"}),
			model.CodeRateLimited, openai.DefaultMaxAttempts, "Rate limit reached"},
		{"500", times(openai.DefaultMaxAttempts, reply(http.StatusInternalServerError, "The server had an error while processing your request.")),
			model.CodeServerError, openai.DefaultMaxAttempts, "had an error"},
		{"malformed", []openaitest.Reply{{Raw: []string{"{not json"}}}, model.CodeMalformedStream, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := openaitest.NewServer(t, openaitest.Config{Replies: append(tc.replies, okReply)})
			m := newModel(t, srv, openai.Config{Sleep: noWait, BreakerThreshold: -1})
			_, err := m.Stream(t.Context(), workerReq())
			if model.CodeOf(err) != tc.code || !errors.Is(err, model.ErrModel) || errors.Is(err, model.ErrTransient) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err %v (class %q), want class %s saying %q, not transient", err, model.CodeOf(err), tc.code, tc.says)
			}
			if n := srv.Served(); n != tc.served {
				t.Fatalf("%d requests, want %d", n, tc.served)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close() // nothing listens there now: connection refused
		m, err := openai.New(openai.Config{BaseURL: "http://" + addr + "/v1", Model: "m", Sleep: noWait, BreakerThreshold: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if _, err := m.Stream(t.Context(), workerReq()); model.CodeOf(err) != model.CodeUnreachable || errors.Is(err, model.ErrTransient) {
			t.Fatalf("err %v, want class unreachable", err)
		}
	})
}

// TestModel_Breaker: an endpoint that keeps failing opens its breaker:
// the next turns fail at once with model_unavailable, sending nothing,
// and Unavailable says why; a probe (GET /models) with backoff sees it
// answer again and closes the breaker by itself, and the next turn
// succeeds. Virtual time.
func TestModel_Breaker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		srv, err := openaitest.New(openaitest.Config{Replies: []openaitest.Reply{okReply}})
		if err != nil {
			t.Fatal(err)
		}
		m, stop := inMemory(t, srv, openai.Config{MaxAttempts: 2, BreakerThreshold: 3})
		defer stop()
		defer m.Close()
		srv.SetDown(true)
		for turn := 1; turn <= 2; turn++ {
			if _, err := m.Stream(t.Context(), workerReq()); model.CodeOf(err) != model.CodeServerError && model.CodeOf(err) != model.CodeUnavailable {
				t.Fatalf("turn %d: %v", turn, err)
			}
		}
		if m.Unavailable() == "" || srv.Refused() != 3 { // the third failure opened it: turn 2's second attempt was not sent
			t.Fatalf("after 2 failing turns: unavailable %q, %d requests refused; want open after 3", m.Unavailable(), srv.Refused())
		}
		start := time.Now()
		_, err = m.Stream(t.Context(), workerReq())
		if model.CodeOf(err) != model.CodeUnavailable || time.Since(start) != 0 || srv.Refused() != 3 {
			t.Fatalf("a turn while open: %v after %v, %d refused; want model_unavailable at once, nothing sent", err, time.Since(start), srv.Refused())
		}
		srv.SetDown(false)
		time.Sleep(time.Minute) // the probe's backoff: 1 s, 2 s, 4 s…
		synctest.Wait()
		if why := m.Unavailable(); why != "" {
			t.Fatalf("the endpoint answers, the breaker is still open: %s", why)
		}
		st, err := m.Stream(t.Context(), workerReq())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := collect(t, st); err != nil {
			t.Fatal(err)
		}
	})
}

// TestModel_BreakerWaits: with WaitWhenUnavailable a turn that meets the
// open breaker waits for the probe to see the endpoint answer and then
// succeeds, instead of failing at once; a turn whose context ends first
// (the engine's turn timeout) fails with model_unavailable, saying it
// waited. Virtual time.
func TestModel_BreakerWaits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		srv, err := openaitest.New(openaitest.Config{Replies: []openaitest.Reply{okReply}})
		if err != nil {
			t.Fatal(err)
		}
		m, stop := inMemory(t, srv, openai.Config{MaxAttempts: 1, BreakerThreshold: 2, WaitWhenUnavailable: true})
		defer stop()
		defer m.Close()
		srv.SetDown(true)
		for range 2 {
			if _, err := m.Stream(t.Context(), workerReq()); model.CodeOf(err) != model.CodeServerError {
				t.Fatalf("a failing turn: %v", err)
			}
		}
		if m.Unavailable() == "" {
			t.Fatal("the breaker did not open")
		}
		// A turn bounded at 500 ms while the endpoint is down.
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		start := time.Now()
		_, err = m.Stream(ctx, workerReq())
		cancel()
		if model.CodeOf(err) != model.CodeUnavailable || !strings.Contains(err.Error(), "waited") || time.Since(start) != 500*time.Millisecond {
			t.Fatalf("a bounded turn while down: %v after %v; want model_unavailable after 500ms", err, time.Since(start))
		}
		// A turn that waits while the endpoint comes back.
		done := make(chan error, 1)
		start = time.Now()
		go func() {
			st, err := m.Stream(t.Context(), workerReq())
			if err == nil {
				_, err = collect(t, st)
			}
			done <- err
		}()
		synctest.Wait() // the turn waits on the breaker
		select {
		case err := <-done:
			t.Fatalf("the turn did not wait: %v", err)
		default:
		}
		if srv.Refused() != 2 {
			t.Fatalf("%d requests refused: the waiting turn sent one", srv.Refused())
		}
		srv.SetDown(false)
		if err := <-done; err != nil {
			t.Fatalf("the turn after the endpoint came back: %v", err)
		}
		if waited := time.Since(start); waited <= 0 || waited > probeMaxForTest {
			t.Fatalf("the turn waited %v", waited)
		}
	})
}

// probeMaxForTest bounds how long the probe takes to see an endpoint that
// is back: its backoff is at most 30 s.
const probeMaxForTest = 31 * time.Second
