package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// followRun reads a run's stream to its terminal event and returns its
// run_started payload, and the terminal event's type and JSON.
func followRun(t *testing.T, streamURL string) (*messages.RunStartedPayload, messages.EventType, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, streamURL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := skipSSERetry(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := testkit.NewSSEReader(body)
	var started *messages.RunStartedPayload
	for {
		f, err := r.Next()
		if err != nil {
			t.Fatalf("the stream ended before the run: %v", err)
		}
		switch typ := messages.EventType(f.Event); typ {
		case messages.RunStarted:
			var env struct {
				Payload messages.RunStartedPayload `json:"payload"`
			}
			if err := json.Unmarshal([]byte(f.Data), &env); err != nil {
				t.Fatal(err)
			}
			started = &env.Payload
		case messages.RunFinished, messages.RunError:
			return started, typ, []byte(f.Data)
		}
	}
}

// TestServe_Supervision: serve --supervision is the server's choice (here
// workers stop: a panicking node fails its run), a run's supervision
// option applies over it (worker=restart: the node restarts and the run
// finishes), and run_started says what applied.
func TestServe_Supervision(t *testing.T) {
	t.Parallel()
	srv := startServe(t, 0, nil, "--memory", "--supervision", "worker=stop,subagent=all-for-one:2/30s")
	base := "http://" + srv.base
	sc := &messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4, PanicNodes: messages.NodeSelector{IDs: []string{"n001"}}}
	for _, tc := range []struct {
		sup      *messages.Supervision
		terminal messages.EventType
		echoed   string
	}{
		{nil, messages.RunError, "worker=stop,subagent=all-for-one:2/30s"},
		{&messages.Supervision{Worker: &messages.SupervisionPolicy{Strategy: messages.SupervisionOneForOne}}, messages.RunFinished,
			"worker=one-for-one,subagent=all-for-one:2/30s"},
	} {
		code, body, _ := postRun(t, base, messages.StartRun{Question: "q", Scenario: sc, Supervision: tc.sup})
		if code != http.StatusCreated {
			t.Fatalf("POST = %d %s", code, body)
		}
		var rc messages.RunCreated
		if err := json.Unmarshal(body, &rc); err != nil {
			t.Fatal(err)
		}
		started, terminal, _ := followRun(t, rc.StreamURL)
		if terminal != tc.terminal || started.Supervision.String() != tc.echoed {
			t.Errorf("run with supervision %s: %s, run_started supervision %q; want %s, %q", tc.sup, terminal, started.Supervision.String(), tc.terminal, tc.echoed)
		}
	}
	// A run's invalid choice is refused as any invalid field is.
	code, body, _ := postRun(t, base, messages.StartRun{Question: "q", Supervision: &messages.Supervision{Debater: &messages.SupervisionPolicy{Strategy: messages.SupervisionOneForOne}}})
	if code != http.StatusUnprocessableEntity || !bytes.Contains(body, []byte("supervision.debater.strategy")) {
		t.Fatalf("POST with debater=one-for-one = %d %s", code, body)
	}
}

func TestServe_BadSupervision(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	a := &app{stdout: &stdout, stderr: &stderr, isTTY: func(io.Writer) bool { return false }, now: time.Now}
	if c := execute(context.Background(), a, []string{"serve", "--memory", "--addr", "127.0.0.1:0", "--supervision", "team=sometimes"}); c != exitUsage {
		t.Fatalf("exit %d, want %d; stderr:\n%s", c, exitUsage, stderr.String())
	}
	if s := stderr.String(); !strings.Contains(s, "invalid --supervision") {
		t.Fatalf("stderr = %q", s)
	}
}
