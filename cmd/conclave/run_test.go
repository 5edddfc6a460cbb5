package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// TestMain fails the package if any goroutine outlives its test: every
// command must shut its engine down before it returns.
func TestMain(m *testing.M) {
	runCrashChild() // crash_test.go: as a child of TestCrash_KillNineRecovers, be `conclave` and exit
	runMCPChild()   // toolflags_test.go: as a --mcp server of a test, serve MCP over stdio and exit
	goleak.VerifyTestMain(m)
}

// watchdog bounds every command a test runs. When it fires, the command is
// interrupted (exit 130), so a hang fails the test instead of blocking it.
const watchdog = time.Minute

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the command line with stdout going to w (a buffer when nil)
// and an empty stdin.
func runCLI(t *testing.T, ctx context.Context, w io.Writer, tty bool, args ...string) result {
	t.Helper()
	return runCLIWith(t, ctx, cliIO{stdout: w, tty: tty}, args...)
}

// cliIO is what a command line reads and where it writes. A nil stdin is
// empty; a nil stdout or stderr is a buffer. The result holds what a
// buffer, or a writer with a String method, received.
type cliIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	tty            bool
	getenv         func(string) string // nil: an empty environment
}

func runCLIWith(t *testing.T, ctx context.Context, cio cliIO, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, watchdog)
	defer cancel()
	var out bytes.Buffer
	var errb testkit.LockedBuffer
	stdout, stderr, stdin := cio.stdout, cio.stderr, cio.stdin
	if stdout == nil {
		stdout = &out
	}
	if stderr == nil {
		stderr = &errb
	}
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, isTTY: func(io.Writer) bool { return cio.tty }, now: time.Now, getenv: cio.getenv}
	code := execute(ctx, a, args)
	r := result{code: code, stdout: out.String(), stderr: errb.String()}
	if s, ok := cio.stdout.(fmt.Stringer); ok {
		r.stdout = s.String()
	}
	if s, ok := cio.stderr.(fmt.Stringer); ok {
		r.stderr = s.String()
	}
	return r
}

// decodeJSONL decodes every line of out as an envelope.
func decodeJSONL(t *testing.T, out string) []*messages.Envelope {
	t.Helper()
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("output does not end with a newline: %q", tail(out))
	}
	var events []*messages.Envelope
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		env := new(messages.Envelope)
		if err := json.Unmarshal([]byte(line), env); err != nil {
			t.Fatalf("line %d is not an envelope: %v\n%s", i+1, err, line)
		}
		events = append(events, env)
	}
	return events
}

func tail(s string) string {
	if len(s) > 300 {
		return "…" + s[len(s)-300:]
	}
	return s
}

func assertNoViolations(t *testing.T, events []*messages.Envelope) {
	t.Helper()
	for _, v := range testkit.Check(events) {
		t.Errorf("violation: %s", v)
	}
}

func TestRun_JSON(t *testing.T) {
	t.Parallel()
	r := runCLI(t, t.Context(), nil, false, "run", "why is the sky blue", "--json", "--nodes", "5", "--tokens", "3", "--seed", "1")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if r.stderr != "" {
		t.Errorf("stderr is not empty:\n%s", r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	finished := 0
	for i, env := range events {
		if want := uint64(i + 1); env.Seq != want {
			t.Fatalf("line %d has seq %d, want %d", i+1, env.Seq, want)
		}
		if env.Type == messages.RunFinished {
			finished++
		}
	}
	if finished != 1 || events[len(events)-1].Type != messages.RunFinished {
		t.Fatalf("%d run_finished events, last event %s; want exactly one, last", finished, events[len(events)-1].Type)
	}
	assertNoViolations(t, events)
	if got := testkit.Count(events, messages.NodeStarted); got != 5 {
		t.Errorf("%d nodes started, want 5", got)
	}
	// Each line is the wire JSON exactly: re-encoding the decoded envelope gives it back.
	first, _ := strings.CutSuffix(strings.SplitN(r.stdout, "\n", 2)[0], "\n")
	if b, err := events[0].MarshalJSON(); err != nil || string(b) != first {
		t.Errorf("line 1 is not the wire JSON:\n got %s\nwant %s (%v)", first, b, err)
	}
}

func TestRun_JSONFailedNode(t *testing.T) {
	t.Parallel()
	// --concurrency 1: the sibling n002 is still queued when n001 fails, so
	// it is skipped. With siblings running, the engine may advance to the
	// next wave when a sibling's completion arrives after the failure (an
	// engine race: runActor.advance ignores failCode).
	r := runCLI(t, t.Context(), nil, false, "run", "why is the sky blue", "--fail-nodes", "n001", "--json", "--concurrency", "1")
	if r.code != exitFailed {
		t.Fatalf("exit %d, want %d; stderr:\n%s\nstdout:\n%s", r.code, exitFailed, r.stderr, r.stdout)
	}
	events := decodeJSONL(t, r.stdout)
	last := events[len(events)-1]
	p, ok := last.Payload.(*messages.RunErrorPayload)
	if !ok {
		t.Fatalf("last event is %s, want run_error", last.Type)
	}
	if p.Code != messages.ErrCodeNodeFailed {
		t.Errorf("code = %s, want %s", p.Code, messages.ErrCodeNodeFailed)
	}
	assertNoViolations(t, events)
	if !strings.Contains(r.stderr, "node_failed") {
		t.Errorf("stderr does not say how the run failed:\n%s", r.stderr)
	}
}

func TestRun_BadUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		args    []string
		mention string // stderr must contain it
	}{
		{"negative nodes", []string{"run", "q", "--nodes", "-1"}, "--nodes"},
		{"zero tokens", []string{"run", "q", "--tokens", "0"}, "--tokens"},
		{"waves above nodes", []string{"run", "q", "--nodes", "2", "--waves", "3"}, "waves"},
		{"empty id in list", []string{"run", "q", "--fail-nodes", "x,,"}, "--fail-nodes"},
		{"fraction above one", []string{"run", "q", "--fail-nodes", "2"}, "--fail-nodes"},
		{"bad panic nodes", []string{"run", "q", "--panic-nodes", "n001,n 2"}, "--panic-nodes"},
		{"bad supervision role", []string{"run", "q", "--supervision", "boss=stop"}, "invalid --supervision"},
		{"bad supervision limit", []string{"run", "q", "--supervision", "worker=restart:0"}, "invalid --supervision"},
		{"panic member of no team", []string{"run", "q", "--teams", "1", "--panic-team-member", "n002"}, "invalid --panic-team-member \"n002\": node 2 is not a team node"},
		{"bad panic member", []string{"run", "q", "--panic-team-member", "m1"}, "invalid --panic-team-member"},
		{"not a number", []string{"run", "q", "--nodes", "many"}, "--nodes"},
		{"unknown flag", []string{"run", "q", "--bogus"}, "--bogus"},
		{"missing question", []string{"run"}, "question"},
		{"two questions", []string{"run", "why", "blue"}, "question"},
		{"empty question", []string{"run", ""}, "question"},
		{"bad hitl", []string{"run", "q", "--hitl", "sometimes"}, "hitl"},
		{"bad session", []string{"run", "q", "--session", "no spaces"}, "session"},
		{"bad concurrency", []string{"run", "q", "--concurrency", "-1"}, "invalid --concurrency: must be in 1..1024, got -1"},
		{"zero concurrency", []string{"run", "q", "--concurrency", "0"}, "--concurrency"},
		{"delegation cap above the limit", []string{"run", "q", "--max-delegation-rounds", "99"}, "invalid --max-delegation-rounds: must be in 1..32"},
		{"zero approval timeout", []string{"run", "q", "--approval-timeout", "0s"}, "--approval-timeout"},
		{"fractional approval timeout", []string{"run", "q", "--approval-timeout", "1500ms"}, "--approval-timeout"},
		{"approval timeout above a week", []string{"run", "q", "--approval-timeout", "169h"}, "--approval-timeout"},
		{"unparsable approval timeout", []string{"run", "q", "--approval-timeout", "soon"}, "--approval-timeout"},
		{"bad timeout action", []string{"run", "q", "--approval-timeout-action", "maybe"}, "--approval-timeout-action"},
		{"negative approvals", []string{"run", "q", "--approvals", "-1"}, "--approvals"},
		{"negative info requests", []string{"run", "q", "--info-requests", "-1"}, "--info-requests"},
		{"bad log level", []string{"run", "q", "--log-level", "loud"}, "--log-level"},
		{"missing scenario file", []string{"run", "q", "--scenario", filepath.Join(t.TempDir(), "nope.json")}, "--scenario"},
		{"negative budget", []string{"run", "q", "--budget-tokens", "-5"}, "invalid --budget-tokens: must be 0"},
		{"cost budget without a price", []string{"run", "q", "--budget-usd", "1"}, "--budget-usd needs a price for every model, and scripted has none"},
		{"bad prices file", []string{"run", "q", "--prices", filepath.Join(t.TempDir(), "nope.json")}, "--prices"},
		{"no command", nil, "command"},
		{"unknown command", []string{"walk"}, "walk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, t.Context(), nil, false, tc.args...)
			if r.code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitUsage, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.mention) {
				t.Errorf("stderr does not mention %q:\n%s", tc.mention, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout is not empty:\n%s", r.stdout)
			}
		})
	}
}

func TestRun_Help(t *testing.T) {
	t.Parallel()
	r := runCLI(t, t.Context(), nil, false, "run", "--help")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"--fail-nodes", "--scenario", "--token-delay-ms", "0 by default with --json", "(default 15)",
		"--hitl", "--approval-timeout", "--approval-timeout-action", "--approvals", "--info-requests", "--auto-approve"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help does not mention %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "only none") {
		t.Errorf("help still says only --hitl none is implemented:\n%s", r.stdout)
	}
}

func TestRun_HumanPlain(t *testing.T) {
	t.Parallel()
	r := runCLI(t, t.Context(), nil, false, "run", "why is the sky blue", "--nodes", "4", "--token-delay-ms", "1")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("plain output holds ANSI escapes:\n%q", r.stdout)
	}
	for _, want := range []string{"wave 0 started: n001", "node n001 completed (28 tokens out)", "\nAnswer to: why is the sky blue", "run finished"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output does not contain %q:\n%s", want, r.stdout)
		}
	}
}

func TestRun_HumanPanicRestart(t *testing.T) {
	t.Parallel()
	r := runCLI(t, t.Context(), nil, false, "run", "why is the sky blue", "--panic-nodes", "n002", "--token-delay-ms", "0")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"node n002 restarted (attempt 2)", "node n002 completed (28 tokens out, 2 attempts)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output does not contain %q:\n%s", want, r.stdout)
		}
	}
}

// TestRun_SupervisionAllForOne is the acceptance of issue 32: with
// --supervision team=all-for-one, a team member's panic restarts the
// whole team, every member that was running (the first wave of team
// n002: m1 and m2; m3 waits for them), and the run finishes. Without
// --supervision only the member that panicked restarts. Tokens stream
// slowly so that m2 is still running when m1 panics after its first
// token.
func TestRun_SupervisionAllForOne(t *testing.T) {
	t.Parallel()
	args := []string{"run", "why is the sky blue", "--panic-team-member", "n002", "--token-delay-ms", "20", "--nodes", "2", "--waves", "1"}
	r := runCLI(t, t.Context(), nil, false, append(args, "--supervision", "team=all-for-one")...)
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"node n002/m1 restarted (attempt 2): scripted: panic of node n002/m1 on attempt 1",
		"node n002/m2 restarted (attempt 2): all-for-one: n002/m1 failed: scripted: panic of node n002/m1 on attempt 1",
		"node n002/m1 completed (28 tokens out, 2 attempts)",
		"node n002/m2 completed (28 tokens out, 2 attempts)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output does not contain %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "n002/m3 restarted") || strings.Contains(r.stdout, "n001/m1 restarted") {
		t.Errorf("a member that was not running, or of another team, restarted:\n%s", r.stdout)
	}
	r = runCLI(t, t.Context(), nil, false, args...)
	if r.code != exitOK || !strings.Contains(r.stdout, "node n002/m1 restarted (attempt 2)") || strings.Contains(r.stdout, "n002/m2 restarted") {
		t.Fatalf("one-for-one by default: exit %d; stdout:\n%s", r.code, r.stdout)
	}
}

// TestRun_Budget: --budget-tokens ends the run with budget_exceeded, and
// --prices prices the scripted model for --budget-usd; the run's end says
// which budget.
func TestRun_Budget(t *testing.T) {
	t.Parallel()
	r := runCLI(t, t.Context(), nil, false, "run", "why is the sky blue", "--budget-tokens", "100", "--token-delay-ms", "0")
	if r.code != exitFailed || !strings.Contains(r.stdout, "run failed (budget_exceeded): ") || !strings.Contains(r.stdout, "budget.tokens") {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	prices := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(prices, []byte(`{"scripted": {"input": 100, "output": 100}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, t.Context(), nil, false, "run", "why is the sky blue", "--prices", prices, "--budget-usd", "0.01", "--token-delay-ms", "0")
	if r.code != exitFailed || !strings.Contains(r.stdout, "budget.cost_usd") {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestRun_HumanFailed(t *testing.T) {
	t.Parallel()
	r := runCLI(t, t.Context(), nil, false, "run", "why is the sky blue", "--fail-nodes", "n003", "--token-delay-ms", "0", "--concurrency", "1")
	if r.code != exitFailed {
		t.Fatalf("exit %d, want %d; stderr:\n%s\nstdout:\n%s", r.code, exitFailed, r.stderr, r.stdout)
	}
	for _, want := range []string{"node n003 failed: ", "run failed (node_failed): "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output does not contain %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "Answer to:") {
		t.Errorf("a failed run shows an answer:\n%s", r.stdout)
	}
}

func TestRun_TTY(t *testing.T) {
	t.Parallel()
	r := runCLI(t, t.Context(), nil, true, "run", "why is the sky blue", "--nodes", "3", "--token-delay-ms", "0")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"\x1b[", "wave 0", "finished", "Answer to: why is the sky blue"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output does not contain %q:\n%q", want, r.stdout)
		}
	}
}

func TestRun_UnknownNodeWarns(t *testing.T) {
	t.Parallel()
	r := runCLI(t, t.Context(), nil, false, "run", "q", "--json", "--fail-nodes", "n1")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, `"n1" is not a node of the plan`) {
		t.Errorf("no warning about n1 on stderr:\n%s", r.stderr)
	}
}

func writeScenario(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scenario.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func runStartedScenario(t *testing.T, events []*messages.Envelope) messages.Scenario {
	t.Helper()
	p, ok := events[0].Payload.(*messages.RunStartedPayload)
	if !ok || p.Scenario == nil {
		t.Fatalf("first event is %s without a scenario", events[0].Type)
	}
	return *p.Scenario
}

func TestRun_ScenarioFileWithOverrides(t *testing.T) {
	t.Parallel()
	path := writeScenario(t, `{"nodes": 4, "waves": 2, "tokens": 2, "fail_nodes": ["n004"], "seed": 3}`)
	r := runCLI(t, t.Context(), nil, false, "run", "q", "--scenario", path, "--json", "--tokens", "3", "--fail-nodes", "0")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	assertNoViolations(t, events)
	got := runStartedScenario(t, events)
	// From the file: nodes, waves, seed. From the flags: tokens, fail_nodes.
	// Not from the CLI defaults: reasoning_tokens and tools_per_node stay 0.
	want := messages.Scenario{Nodes: 4, Waves: 2, Tokens: 3, Seed: 3}.WithDefaults()
	if gj, wj := mustJSON(t, got), mustJSON(t, want); gj != wj {
		t.Errorf("scenario = %s, want %s", gj, wj)
	}
	if n := testkit.Count(events, messages.TextDelta); n < 4*3 {
		t.Errorf("%d text deltas, want at least 12 (4 nodes x 3)", n)
	}
}

func TestRun_ScenarioFileWavesFollowNodes(t *testing.T) {
	t.Parallel()
	// A file without waves and --nodes 2: waves default to min(3, 2).
	path := writeScenario(t, `{"nodes": 10}`)
	r := runCLI(t, t.Context(), nil, false, "run", "q", "--scenario", path, "--json", "--nodes", "2")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if sc := runStartedScenario(t, decodeJSONL(t, r.stdout)); sc.Nodes != 2 || sc.Waves != 2 {
		t.Errorf("nodes %d waves %d, want 2 and 2", sc.Nodes, sc.Waves)
	}
}

func TestRun_BadScenarioFile(t *testing.T) {
	t.Parallel()
	path := writeScenario(t, `{"nodes": 4, "colour": "blue"}`)
	r := runCLI(t, t.Context(), nil, false, "run", "q", "--scenario", path)
	if r.code != exitUsage || !strings.Contains(r.stderr, "colour") {
		t.Fatalf("exit %d, want %d naming the unknown field; stderr:\n%s", r.code, exitUsage, r.stderr)
	}
}

func TestRun_CLIDefaults(t *testing.T) {
	t.Parallel()
	r := runCLI(t, t.Context(), nil, false, "run", "q", "--json")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	got := runStartedScenario(t, decodeJSONL(t, r.stdout))
	want := messages.Scenario{Nodes: 6, Waves: 3, Tokens: 24, ReasoningTokens: 4, ToolsPerNode: 1}.WithDefaults()
	if gj, wj := mustJSON(t, got), mustJSON(t, want); gj != wj {
		t.Errorf("scenario = %s, want %s", gj, wj)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cancelOn is stdout that cancels the command's context once it has
// written marker: a Ctrl-C at a known moment of the run.
type cancelOn struct {
	bytes.Buffer
	marker []byte
	cancel context.CancelFunc
}

func (w *cancelOn) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if bytes.Contains(w.Bytes(), w.marker) {
		w.cancel()
	}
	return n, err
}

func TestRun_InterruptAborts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Nodes stream slowly, so the run is still going when it is interrupted.
	w := &cancelOn{marker: []byte(`"type":"node_started"`), cancel: cancel}
	r := runCLI(t, ctx, w, false, "run", "q", "--json", "--token-delay-ms", "200")
	if r.code != exitInterrupted {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitInterrupted, r.stderr)
	}
	events := decodeJSONL(t, w.String())
	last := events[len(events)-1]
	if p, ok := last.Payload.(*messages.RunErrorPayload); !ok || p.Code != messages.ErrCodeAborted {
		t.Fatalf("last event is %s %+v, want run_error aborted", last.Type, last.Payload)
	}
	assertNoViolations(t, events)
}

func TestParseSelector(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want messages.NodeSelector
		err  bool
	}{
		{in: "n001", want: messages.NodeSelector{IDs: []string{"n001"}}},
		{in: "n001, n007", want: messages.NodeSelector{IDs: []string{"n001", "n007"}}},
		{in: "0.05", want: messages.NodeSelector{Fraction: 0.05}},
		{in: "1", want: messages.NodeSelector{Fraction: 1}},
		{in: "0", want: messages.NodeSelector{}},
		{in: "", err: true},
		{in: "x,,", err: true},
		{in: ",n001", err: true},
		{in: "2", err: true},
		{in: "-0.1", err: true},
		{in: "NaN", err: true},
		{in: "n0 1", err: true},
	} {
		got, err := parseSelector(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("parseSelector(%q) error = %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if !tc.err && mustJSON(t, got) != mustJSON(t, tc.want) {
			t.Errorf("parseSelector(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// TestRun_AdvisorConsults: --advisor-consults puts the advisor in consult
// mode and has each scripted worker consult it; --max-consults is the
// budget, past which consult_advisor answers that it is spent.
func TestRun_AdvisorConsults(t *testing.T) {
	t.Parallel()
	r := runCLI(t, t.Context(), nil, false, "run", "q", "--advisor-consults", "2", "--max-consults", "1",
		"--nodes", "1", "--tools-per-node", "0", "--json")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	assertNoViolations(t, events)
	var got []string
	for _, p := range toolResults(events) {
		if p.Tool == "consult_advisor" {
			got = append(got, fmt.Sprintf("%v %s", p.IsError, p.Result))
		}
	}
	// The refusal is published at once; the advice when the advisor's turn ends.
	slices.Sort(got)
	if len(got) != 2 || !strings.HasPrefix(got[0], "false Advice for n001: ") || !strings.Contains(got[1], "true advisor: consult budget spent") {
		t.Fatalf("consult_advisor results %q", got)
	}
}

// TestRun_DebateTools: --debate-tools gives the debaters tools; each
// debater's turn calls them on its own lane before it argues.
func TestRun_DebateTools(t *testing.T) {
	t.Parallel()
	r := runCLI(t, t.Context(), nil, false, "run", "q", "--debate", "--debate-agents", "2", "--debate-rounds", "1",
		"--debate-tools", "search", "--nodes", "1", "--tools-per-node", "0", "--json")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	assertNoViolations(t, events)
	lanes := map[messages.StreamID]bool{}
	for _, env := range events {
		if p, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok && p.Tool == "search" && !p.IsError {
			lanes[env.Lane.StreamID] = true
		}
	}
	if !lanes[messages.DebateTurnStream("n001", 1, "a1")] || !lanes[messages.DebateTurnStream("n001", 1, "a2")] || len(lanes) != 2 {
		t.Fatalf("search results on lanes %v, want the two debaters' turn lanes", lanes)
	}
}
