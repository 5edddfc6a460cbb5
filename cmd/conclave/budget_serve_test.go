package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// postRun starts a run on a real server and returns the answer's status,
// its body and its Retry-After header.
func postRun(t *testing.T, base string, req messages.StartRun) (int, []byte, string) {
	t.Helper()
	body, _ := json.Marshal(req)
	resp, err := http.Post(base+"/api/v1/runs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header.Get("Retry-After")
}

// runError follows a run's stream to its terminal event and returns it,
// which must be a run_error.
func runError(t *testing.T, streamURL string) messages.RunErrorPayload {
	t.Helper()
	_, typ, data := followRun(t, streamURL)
	if typ != messages.RunError {
		t.Fatalf("the run finished: %s", data)
	}
	var env struct {
		Payload messages.RunErrorPayload `json:"payload"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatal(err)
	}
	return env.Payload
}

// TestServe_DailyBudgetSurvivesKillNine: against a real `conclave serve`
// with --tokens-per-day (and a cost budget, the scripted model priced by
// --prices), the run that crosses the day's budget ends with run_error
// budget_exceeded, the next POST is refused 429 insufficient_budget with
// Retry-After, and so it is still after a kill -9 and a restart: the
// day's spend is rebuilt from the journal.
func TestServe_DailyBudgetSurvivesKillNine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prices := filepath.Join(dir, "prices.json")
	if err := os.WriteFile(prices, []byte(`{"scripted": {"input": 1, "output": 1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--data", filepath.Join(dir, "data"), "--tokens-per-day", "300", "--cost-per-run", "5", "--prices", prices}
	srv := startServe(t, 0, nil, args...)
	base := "http://" + srv.base
	code, body, _ := postRun(t, base, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 6, Waves: 3, Tokens: 40}})
	if code != http.StatusCreated {
		t.Fatalf("POST = %d %s", code, body)
	}
	var rc messages.RunCreated
	if err := json.Unmarshal(body, &rc); err != nil {
		t.Fatal(err)
	}
	if re := runError(t, rc.StreamURL); re.Code != messages.ErrCodeBudgetExceeded || !strings.Contains(re.Message, "tokens_per_day") {
		t.Fatalf("run_error = %+v, want budget_exceeded for tokens_per_day", re)
	}
	refused := func(when string) {
		t.Helper()
		code, body, retry := postRun(t, base, messages.StartRun{Question: "q"})
		var eb messages.ErrorBody
		_ = json.Unmarshal(body, &eb)
		if code != http.StatusTooManyRequests || eb.Error.Code != "insufficient_budget" || retry == "" {
			t.Fatalf("%s: POST = %d %s (Retry-After %q), want 429 insufficient_budget", when, code, body, retry)
		}
	}
	refused("after the run")
	if err := srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	srv.reap()
	srv = startServe(t, 0, nil, args...)
	base = "http://" + srv.base
	refused("after kill -9 and a restart")
}

// TestServe_CostBudgetNeedsPrices: a cost budget with a model that has no
// price is refused at start, naming the model and --prices.
func TestServe_CostBudgetNeedsPrices(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	a := &app{stdout: &stdout, stderr: &stderr, isTTY: func(io.Writer) bool { return false }, now: time.Now}
	if c := execute(context.Background(), a, []string{"serve", "--memory", "--addr", "127.0.0.1:0", "--cost-per-day", "2"}); c != exitUsage {
		t.Fatalf("exit %d, want %d; stderr:\n%s", c, exitUsage, stderr.String())
	}
	if s := stderr.String(); !strings.Contains(s, "scripted has none") || !strings.Contains(s, "--prices") {
		t.Fatalf("stderr = %q", s)
	}
}
