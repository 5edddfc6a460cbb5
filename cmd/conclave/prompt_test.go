package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// human is a scripted person at a terminal. The command writes its
// prompts to it (it is the command's stderr, or its stdout with a status
// block), and each read of it answers the latest prompt (the last line
// written that ends in "? ") with reply. When reply has no answer, the
// read waits like a terminal nobody types on, until its read deadline:
// human is a deadliner, so the command's timeouts run as they would on a
// terminal.
type human struct {
	reply func(prompt string) (answer string, ok bool)

	mu       sync.Mutex
	all      bytes.Buffer // everything written
	from     int          // where the text not yet looked at for a prompt starts
	unread   []byte       // an answer not read yet
	deadline time.Time
	changed  chan struct{} // closed and replaced when the deadline changes
}

var _ deadliner = (*human)(nil)

func newHuman(reply func(prompt string) (string, bool)) *human {
	return &human{reply: reply, changed: make(chan struct{})}
}

func (h *human) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.all.Write(p)
}

func (h *human) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.all.String()
}

func (h *human) SetReadDeadline(d time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deadline = d
	close(h.changed)
	h.changed = make(chan struct{})
	return nil
}

func (h *human) Read(p []byte) (int, error) {
	for {
		h.mu.Lock()
		if len(h.unread) == 0 && h.all.Len() > h.from {
			text := h.all.String()[h.from:]
			h.from = h.all.Len()
			if prompt := lastPrompt(text); prompt != "" {
				if answer, ok := h.reply(prompt); ok {
					h.unread = []byte(answer + "\n")
				}
			}
		}
		if len(h.unread) > 0 {
			n := copy(p, h.unread)
			h.unread = h.unread[n:]
			h.mu.Unlock()
			return n, nil
		}
		d, changed := h.deadline, h.changed
		h.mu.Unlock()
		if d.IsZero() {
			<-changed
			continue
		}
		wait := time.Until(d)
		if wait <= 0 {
			return 0, os.ErrDeadlineExceeded
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
			return 0, os.ErrDeadlineExceeded
		case <-changed:
			timer.Stop()
		}
	}
}

// lastPrompt is the last line of text that asks something.
func lastPrompt(text string) string {
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasSuffix(lines[i], "? ") {
			return lines[i]
		}
	}
	return ""
}

// approveGates answers the plan and node prompts with approve, and passes
// the others to next.
func approveGates(next func(prompt string) (string, bool)) func(string) (string, bool) {
	return func(prompt string) (string, bool) {
		if strings.HasPrefix(prompt, "[a]pprove, [r]eject, [e]dit plan? ") || prompt == "[a]pprove, [r]eject? " {
			return "a", true
		}
		return next(prompt)
	}
}

func toolResults(events []*messages.Envelope) []*messages.ToolCallFinishedPayload {
	var out []*messages.ToolCallFinishedPayload
	for _, env := range events {
		if p, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok {
			out = append(out, p)
		}
	}
	return out
}

func lastEvent(t *testing.T, events []*messages.Envelope) *messages.Envelope {
	t.Helper()
	if len(events) == 0 {
		t.Fatal("no events")
	}
	return events[len(events)-1]
}

// TestRun_HITLToolsJSON answers every gate of --hitl tools at the prompt,
// whatever order the parallel nodes raise them in: the tool calls are
// approved, rejected with feedback, and edited, in the order asked.
func TestRun_HITLToolsJSON(t *testing.T) {
	t.Parallel()
	tools := 0
	h := newHuman(approveGates(func(prompt string) (string, bool) {
		switch prompt {
		case "[a]pprove, [r]eject, [e]dit args? ":
			tools++
			return []string{"a", "r", "e"}[(tools-1)%3], true
		case "feedback for the agent (optional)? ":
			return "no thanks", true
		case "new args, one JSON object on one line (empty: back)? ":
			return `{"query":"edited"}`, true
		}
		return "", false
	}))
	r := runCLIWith(t, t.Context(), cliIO{stdin: h, stderr: h}, "run", "why is the sky blue",
		"--hitl", "tools", "--approvals", "3", "--nodes", "3", "--waves", "1", "--tokens", "2", "--tools-per-node", "0", "--json")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	events := decodeJSONL(t, r.stdout) // stdout holds JSONL only
	assertNoViolations(t, events)
	if tools != 3 {
		t.Errorf("%d tool approvals asked, want 3; stderr:\n%s", tools, r.stderr)
	}
	results := toolResults(events)
	if len(results) != 3 {
		t.Fatalf("%d tool_call_finished, want 3", len(results))
	}
	var rejected, edited int
	for _, p := range results {
		if p.IsError && strings.Contains(p.Result, "no thanks") {
			rejected++
		}
		if !p.IsError && strings.Contains(p.Result, "edited") {
			edited++
		}
	}
	if rejected != 1 || edited != 1 {
		t.Errorf("results %+v: want one rejected with the feedback and one run with the edited args", results)
	}
	if got := testkit.Count(events, messages.InterruptResolved); got != 1+3+3 {
		t.Errorf("%d interrupt_resolved, want 7 (plan, 3 nodes, 3 tools)", got)
	}
	for _, want := range []string{
		"the plan needs your approval: 3 nodes in 1 wave", "  wave 0: n001 n002 n003",
		"✓ approved the plan", "✓ approved node n002", "✓ approved search {", "✗ rejected search: no thanks",
		`✓ approved with edits search {"query":"edited"}`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not contain %q:\n%s", want, r.stderr)
		}
	}
}

// TestRun_HITLScriptedStdin pipes a fixed script of answers, one per line,
// into a plain run: with --concurrency 1 the engine asks in a known order.
func TestRun_HITLScriptedStdin(t *testing.T) {
	t.Parallel()
	script := strings.Join([]string{
		"a",            // plan
		"a", "approve", // n001, its search
		"A", "r", "no thanks", // n002, its search: rejected with feedback
		"a", "e", "[1]", `{"query":"edited"}`, // n003, its search: edited (after an invalid try)
	}, "\n") + "\n"
	r := runCLIWith(t, t.Context(), cliIO{stdin: strings.NewReader(script)}, "run", "why is the sky blue",
		"--hitl", "tools", "--approvals", "3", "--nodes", "3", "--waves", "1", "--tokens", "2", "--tools-per-node", "0",
		"--concurrency", "1", "--token-delay-ms", "0")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s\nstdout:\n%s", r.code, r.stderr, r.stdout)
	}
	// Progress lines on stdout; prompts, echoed answers and confirmations on stderr.
	for _, want := range []string{
		"waiting for you: plan approval\n", "plan approval: approved\n",
		"waiting for you: approval to start node n002\n",
		"waiting for you: tool approval for n002 (search)\n", "tool approval for n002 (search): rejected\n",
		"tool approval for n003 (search): approved with edits\n", "run finished",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout does not contain %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "[a]pprove") {
		t.Errorf("prompts went to stdout, which is not a terminal:\n%s", r.stdout)
	}
	for _, want := range []string{
		"[a]pprove, [r]eject, [e]dit args? r\nfeedback for the agent (optional)? no thanks\n✗ rejected search: no thanks\n",
		"not a JSON object", `✓ approved with edits search {"query":"edited"}`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not contain %q:\n%s", want, r.stderr)
		}
	}
}

func TestRun_HITLInfoRequests(t *testing.T) {
	t.Parallel()
	// The empty line is no answer: the question is asked again.
	stdin := strings.NewReader("blue light scatters more\n\nviolet is absorbed high up\n")
	r := runCLIWith(t, t.Context(), cliIO{stdin: stdin}, "run", "why is the sky blue",
		"--info-requests", "2", "--nodes", "2", "--waves", "1", "--tokens", "2", "--tools-per-node", "0", "--json")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	assertNoViolations(t, events)
	got := map[string]bool{}
	for _, p := range toolResults(events) {
		if p.Tool == "ask_human" && !p.IsError {
			got[p.Result] = true
		}
	}
	if !got["blue light scatters more"] || !got["violet is absorbed high up"] || len(got) != 2 {
		t.Errorf("ask_human results %v, want the two answers", got)
	}
	if n := strings.Count(r.stderr, "answer? "); n != 3 {
		t.Errorf("asked %d times, want 3 (the empty answer is asked again):\n%s", n, r.stderr)
	}
}

// TestRun_HITLChoices: a choice is a numbered prompt; an answer naming
// no option is asked again; options are chosen by number or by label; a
// third choice is declined with feedback. --auto-approve never picks an
// option: it declines.
func TestRun_HITLChoices(t *testing.T) {
	t.Parallel()
	stdin := strings.NewReader("purple\n2\nbroad survey\nr\nnot now\n")
	r := runCLIWith(t, t.Context(), cliIO{stdin: stdin}, "run", "why is the sky blue",
		"--choices", "3", "--nodes", "3", "--waves", "1", "--tokens", "2", "--tools-per-node", "0", "--concurrency", "1", "--json")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	assertNoViolations(t, events)
	var got []string
	for _, p := range toolResults(events) {
		if p.Tool == "ask_choice" {
			got = append(got, p.Result)
		}
	}
	want := []string{`{"choices":["deep"],"labels":["Deep dive"]}`, `{"choices":["broad"],"labels":["Broad survey"]}`,
		"the human declined to choose: not now"}
	if !slices.Equal(got, want) {
		t.Errorf("ask_choice results %q, want %q", got, want)
	}
	for _, w := range []string{"n001 asks you to choose: ", "  1. Broad survey [broad]: Cover every source briefly\n  2. Deep dive [deep]",
		"choose 1-3, or [r]eject? purple\nplease answer with option numbers, ids or labels, or r\n",
		"✓ chose for n001: Deep dive", "✓ chose for n002: Broad survey", "✗ declined the choice of n003: not now"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not contain %q:\n%s", w, r.stderr)
		}
	}

	r = runCLI(t, t.Context(), nil, false, "run", "q", "--auto-approve", "--choices", "1", "--multiple-choice", "--nodes", "1", "--tools-per-node", "0", "--json")
	if r.code != exitOK {
		t.Fatalf("auto: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	res := toolResults(decodeJSONL(t, r.stdout))
	if len(res) != 1 || !res[0].IsError || !strings.Contains(res[0].Result, "declined") ||
		!strings.Contains(r.stderr, "✗ auto-declined the choice of n001: auto-approval picks no option") {
		t.Errorf("auto: results %+v; stderr:\n%s", res, r.stderr)
	}
}

// TestRun_HITLPlanReplan: a rejected plan is planned again (the default
// --max-replans), the new plan is asked about, approved, and runs.
func TestRun_HITLPlanReplan(t *testing.T) {
	t.Parallel()
	r := runCLIWith(t, t.Context(), cliIO{stdin: strings.NewReader("r\nfewer nodes\na\n")},
		"run", "q", "--hitl", "plan", "--nodes", "3", "--json")
	if r.code != exitOK {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitOK, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	assertNoViolations(t, events)
	if _, ok := lastEvent(t, events).Payload.(*messages.RunFinishedPayload); !ok {
		t.Fatalf("last event %+v, want run_finished", lastEvent(t, events).Payload)
	}
	if n := strings.Count(r.stderr, "the plan needs your approval"); n != 2 {
		t.Errorf("asked about %d plans, want 2:\n%s", n, r.stderr)
	}
}

func TestRun_HITLPlanReject(t *testing.T) {
	t.Parallel()
	r := runCLIWith(t, t.Context(), cliIO{stdin: strings.NewReader("r\ntoo broad\n")},
		"run", "q", "--hitl", "plan", "--nodes", "3", "--json", "--max-replans", "0")
	if r.code != exitFailed {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitFailed, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	assertNoViolations(t, events)
	p, ok := lastEvent(t, events).Payload.(*messages.RunErrorPayload)
	if !ok || p.Code != messages.ErrCodePlanRejected || !strings.Contains(p.Message, "too broad") {
		t.Fatalf("last event %+v, want run_error plan_rejected with the reason", lastEvent(t, events).Payload)
	}
	if !strings.Contains(r.stderr, "✗ rejected the plan: too broad") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

func TestRun_HITLPlanEdit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cyclic := write("cyclic.json", `{"nodes":[{"id":"x","goal":"a","deps":["y"]},{"id":"y","goal":"b","deps":["x"]}]}`)
	good := write("good.json", `{"nodes":[{"id":"x","goal":"only this"},{"id":"y","goal":"then this","deps":["x"]}]}`)
	stdin := strings.Join([]string{
		"e", filepath.Join(dir, "missing.json"), cyclic, // decodes, but the engine refuses the cycle
		"e", good,
	}, "\n") + "\n"
	r := runCLIWith(t, t.Context(), cliIO{stdin: strings.NewReader(stdin)}, "run", "q", "--hitl", "plan", "--json")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	assertNoViolations(t, events)
	fin, ok := lastEvent(t, events).Payload.(*messages.RunFinishedPayload)
	if !ok || fin.Nodes.Total != 2 {
		t.Fatalf("last event %+v, want run_finished with the 2 nodes of the edited plan", lastEvent(t, events).Payload)
	}
	for _, want := range []string{"missing.json", "try again", "the engine refused that answer", "cycle",
		"✓ approved with edits the plan: 2 nodes in 2 waves"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not contain %q:\n%s", want, r.stderr)
		}
	}
}

func TestRun_HITLAutoApprove(t *testing.T) {
	t.Parallel()
	r := runCLI(t, t.Context(), nil, false, "run", "q", "--auto-approve", "--hitl", "tools", "--approvals", "2",
		"--info-requests", "1", "--nodes", "2", "--tools-per-node", "0", "--json")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	assertNoViolations(t, events)
	for _, want := range []string{"✓ auto-approved the plan", "✓ auto-approved node n002", "✓ auto-approved search {", "✓ auto-answered n001: ok"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not contain %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "? ") {
		t.Errorf("--auto-approve asked something:\n%s", r.stderr)
	}
}

// TestRun_HITLNoInput: at the end of stdin, approvals are rejected with
// "no input".
func TestRun_HITLNoInput(t *testing.T) {
	t.Parallel()
	r := runCLI(t, t.Context(), nil, false, "run", "q", "--hitl", "plan", "--json")
	if r.code != exitFailed {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitFailed, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	if p, ok := lastEvent(t, events).Payload.(*messages.RunErrorPayload); !ok || p.Code != messages.ErrCodePlanRejected {
		t.Fatalf("last event %+v, want run_error plan_rejected", lastEvent(t, events).Payload)
	}
	if !strings.Contains(r.stderr, "✗ rejected the plan: no input") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

// TestRun_HITLTimeout runs the whole command in a synctest bubble: the
// tool approval nobody answers expires after exactly the 30 s of
// --approval-timeout (virtual time), the prompt gives up and the run
// carries on with the timeout action.
func TestRun_HITLTimeout(t *testing.T) {
	t.Parallel()
	for _, action := range []messages.Decision{messages.DecisionReject, messages.DecisionApprove} {
		t.Run(string(action), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				h := newHuman(approveGates(func(string) (string, bool) { return "", false }))
				r := runCLIWith(t, t.Context(), cliIO{stdin: h, stderr: h}, "run", "q",
					"--hitl", "tools", "--approvals", "1", "--nodes", "1", "--tools-per-node", "0", "--tokens", "2",
					"--approval-timeout", "30s", "--approval-timeout-action", string(action), "--json")
				if r.code != exitOK {
					t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
				}
				events := decodeJSONL(t, r.stdout)
				assertNoViolations(t, events)
				if !strings.Contains(r.stderr, "[a]pprove, [r]eject, [e]dit args? \napproval timed out: "+string(action)+"\n") {
					t.Errorf("the prompt did not give up with the timeout line:\n%s", r.stderr)
				}
				var raised, expired *messages.Envelope
				for _, env := range events {
					switch p := env.Payload.(type) {
					case *messages.InterruptRaisedPayload:
						if p.Kind == messages.InterruptToolApproval {
							raised = env
						}
					case *messages.InterruptExpiredPayload:
						if expired != nil || p.Action != action {
							t.Errorf("interrupt_expired %+v, want one with action %s", p, action)
						}
						expired = env
					}
				}
				if raised == nil || expired == nil {
					t.Fatalf("raised %v, expired %v", raised, expired)
				}
				if d := expired.Timestamp.Sub(raised.Timestamp); d != 30*time.Second {
					t.Errorf("expired %v after it was raised, want the 30s of --approval-timeout", d)
				}
				res := toolResults(events)
				if len(res) != 1 || res[0].IsError != (action == messages.DecisionReject) {
					t.Errorf("tool results %+v after %s", res, action)
				}
			})
		})
	}
}

// TestRun_HITLPromptGivesUpWhenRunFails: while n001's tool approval is
// asked, n002 panics until its restart limit and fails the run, which
// cancels the approval; the prompt notices and gives up.
func TestRun_HITLPromptGivesUpWhenRunFails(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newHuman(approveGates(func(string) (string, bool) { return "", false }))
		r := runCLIWith(t, t.Context(), cliIO{stdin: h, stderr: h}, "run", "q",
			"--hitl", "tools", "--approvals", "1", "--nodes", "2", "--waves", "1", "--tools-per-node", "0",
			"--tokens", "20", "--token-delay-ms", "10", "--panic-nodes", "n002", "--panic-attempts", "100", "--json")
		if r.code != exitFailed {
			t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitFailed, r.stderr)
		}
		events := decodeJSONL(t, r.stdout)
		assertNoViolations(t, events)
		if p, ok := lastEvent(t, events).Payload.(*messages.RunErrorPayload); !ok || p.Code != messages.ErrCodeNodeFailed {
			t.Fatalf("last event %+v, want run_error node_failed", lastEvent(t, events).Payload)
		}
		if !strings.Contains(r.stderr, "[a]pprove, [r]eject, [e]dit args? \nno longer waiting: answered elsewhere, or the run stopped\n") {
			t.Errorf("the prompt did not give up:\n%s", r.stderr)
		}
	})
}

// TestRun_HITLInterruptAtPrompt: Ctrl-C while a prompt waits ends the
// prompt at once and aborts the run (exit 130), which cancels the
// interrupt.
func TestRun_HITLInterruptAtPrompt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h := newHuman(approveGates(func(string) (string, bool) {
		cancel() // the signal arrives while the tool approval waits
		return "", false
	}))
	r := runCLIWith(t, ctx, cliIO{stdin: h, stderr: h}, "run", "q",
		"--hitl", "tools", "--approvals", "1", "--nodes", "1", "--tools-per-node", "0", "--json")
	if r.code != exitInterrupted {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitInterrupted, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	assertNoViolations(t, events)
	if p, ok := lastEvent(t, events).Payload.(*messages.RunErrorPayload); !ok || p.Code != messages.ErrCodeAborted {
		t.Fatalf("last event %+v, want run_error aborted", lastEvent(t, events).Payload)
	}
	cancelled := false
	for _, env := range events {
		if p, ok := env.Payload.(*messages.InterruptResolvedPayload); ok && p.Decision == messages.DecisionCancel {
			cancelled = true
		}
	}
	if !cancelled {
		t.Error("no interrupt_resolved{cancel}")
	}
}

// TestRun_HITLTerminal: on a terminal the prompts go to stdout, around the
// status block.
func TestRun_HITLTerminal(t *testing.T) {
	t.Parallel()
	h := newHuman(approveGates(func(string) (string, bool) { return "", false }))
	r := runCLIWith(t, t.Context(), cliIO{stdin: h, stdout: h, tty: true}, "run", "why is the sky blue",
		"--hitl", "node", "--nodes", "2", "--waves", "1", "--token-delay-ms", "0")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"\x1b[", "[a]pprove, [r]eject? a\n✓ approved node n001\n", "✓ approved node n002\n", "Answer to: why is the sky blue"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output does not contain %q:\n%q", want, r.stdout)
		}
	}
	if strings.Contains(r.stderr, "[a]pprove") {
		t.Errorf("prompts went to stderr:\n%s", r.stderr)
	}
}

func TestChoice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"a", "approve"}, {"A", "approve"}, {"approve", "approve"}, {"r", "reject"}, {"Reject", "reject"},
		{"e", "edit"}, {"", ""}, {"x", ""}, {"appr", ""},
		{"y", "approve"}, {"Yes", "approve"}, {"n", "reject"}, {"NO", "reject"}, {"ye", ""},
	} {
		if got := choice(tc.in, "approve", "reject", "edit"); got != tc.want {
			t.Errorf("choice(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRun_HITLNodeOrderAndYesNo: the node approvals of a wave are asked in
// plan order, however the parallel nodes raised them, and y/n answer them
// as a/r do.
func TestRun_HITLNodeOrderAndYesNo(t *testing.T) {
	t.Parallel()
	var asked []string
	h := newHuman(func(prompt string) (string, bool) {
		switch prompt {
		case "[a]pprove, [r]eject, [e]dit plan? ":
			return "y", true
		case "[a]pprove, [r]eject? ":
			asked = append(asked, "")
			return []string{"y", "n", "yes"}[(len(asked)-1)%3], true
		}
		return "", false
	})
	r := runCLIWith(t, t.Context(), cliIO{stdin: h, stderr: h}, "run", "q",
		"--hitl", "node", "--nodes", "3", "--waves", "1", "--tokens", "2", "--json")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	assertNoViolations(t, decodeJSONL(t, r.stdout))
	var order []string
	for _, line := range strings.Split(r.stderr, "\n") {
		if id, ok := strings.CutPrefix(line, "node "); ok && strings.Contains(id, " is ready to start") {
			order = append(order, id[:4])
		}
	}
	if strings.Join(order, " ") != "n001 n002 n003" {
		t.Errorf("node prompts in the order %q, want n001 n002 n003:\n%s", order, r.stderr)
	}
	for _, want := range []string{"✓ approved the plan", "✓ approved node n001", "✗ rejected node n002", "✓ approved node n003"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not contain %q:\n%s", want, r.stderr)
		}
	}
}

// TestAsker_Order: the plan first, then the plan's nodes in plan order
// (node approvals and their agents' own interrupts alike), then the rest,
// each in the order raised.
func TestAsker_Order(t *testing.T) {
	t.Parallel()
	a := &asker{}
	a.setGoals(&messages.Plan{Nodes: []messages.PlanNode{{ID: "n001"}, {ID: "n002"}, {ID: "n003"}}})
	raise := func(id string, kind messages.InterruptKind, node, agent string) {
		a.queue = append(a.queue, queued{raised: &messages.InterruptRaisedPayload{InterruptID: id, Kind: kind, NodeID: node}, agent: agent})
	}
	raise("spawn-x", messages.InterruptSpawnApproval, "T/x", "supervisor")
	raise("tool-3", messages.InterruptToolApproval, "", "n003")
	raise("node-2", messages.InterruptNodeApproval, "n002", "n002")
	raise("info-sub1", messages.InterruptInfoRequest, "", "n001/sub1")
	raise("other", messages.InterruptToolApproval, "", "steerer")
	raise("plan", messages.InterruptPlanApproval, "", "supervisor")
	var got []string
	for len(a.queue) > 0 {
		i := a.next()
		got = append(got, a.queue[i].raised.InterruptID)
		a.queue = slices.Delete(a.queue, i, i+1)
	}
	if want := "plan info-sub1 node-2 tool-3 spawn-x other"; strings.Join(got, " ") != want {
		t.Errorf("asked %q, want %q", got, want)
	}
}
