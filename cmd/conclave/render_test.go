package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

func nodeLane(id string) messages.Lane {
	return messages.RunLane().Child(messages.NodeStream(id))
}

// feed passes hand-built events of run r1 (and one of another run) to a
// renderer and returns it with the progress lines it produced.
func feed(t *testing.T, payloads ...any) (*renderer, []note) {
	t.Helper()
	r := newRenderer("r1")
	var notes []note
	for i, v := range payloads {
		env := &messages.Envelope{Seq: uint64(i + 1), RunID: "r1", Lane: messages.RunLane()}
		switch v := v.(type) {
		case messages.Payload:
			env.Payload = v
		case laned:
			env.Payload, env.Lane, env.AgentID = v.p, v.lane, v.agent
		case *messages.Envelope:
			env = v
		default:
			t.Fatalf("feed: %T", v)
		}
		env.Type = env.Payload.EventType()
		notes = r.Event(notes, env)
	}
	return r, notes
}

type laned struct {
	lane  messages.Lane
	agent string
	p     messages.Payload
}

func onNode(id string, p messages.Payload) laned { return laned{nodeLane(id), id, p} }

func texts(notes []note) string {
	var b strings.Builder
	for _, n := range notes {
		b.WriteString(n.text)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestRenderer_Progress(t *testing.T) {
	t.Parallel()
	r, notes := feed(t,
		&messages.RunStartedPayload{Question: "why"},
		&messages.PlanProposedPayload{
			Plan:  messages.Plan{Nodes: []messages.PlanNode{{ID: "n001"}, {ID: "n002"}, {ID: "n003", Deps: []string{"n001"}}}},
			Waves: [][]string{{"n001", "n002"}, {"n003"}},
		},
		&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"n001", "n002"}},
		onNode("n001", &messages.NodeStartedPayload{NodeID: "n001"}),
		onNode("n002", &messages.NodeStartedPayload{NodeID: "n002"}),
		onNode("n001", &messages.TextDeltaPayload{Delta: "a"}),
		onNode("n001", &messages.FilePayload{Path: "notes.md", Size: 5, Encoding: messages.FileEncodingUTF8, Content: "hello"}),
		onNode("n001", &messages.TokenUsagePayload{Turn: 1, Usage: messages.Usage{InputTokens: 10, OutputTokens: 1}}),
		onNode("n002", &messages.TokenUsagePayload{Turn: 1, Usage: messages.Usage{InputTokens: 10, OutputTokens: 7}}),
		onNode("n002", &messages.AgentRestartedPayload{Attempt: 2, Reason: "boom"}),
		onNode("n001", &messages.TokenUsagePayload{Turn: 2, Usage: messages.Usage{InputTokens: 20, OutputTokens: 1}}),
		// Another run's events change nothing.
		&messages.Envelope{RunID: "r2", Lane: nodeLane("n001"), Payload: &messages.TokenUsagePayload{Usage: messages.Usage{InputTokens: 99, OutputTokens: 99}}},
		laned{messages.RunLane().Child(messages.SynthesisStream), "synthesizer", &messages.TokenUsagePayload{Usage: messages.Usage{InputTokens: 5, OutputTokens: 3}}},
	)
	st := r.Status()
	want := []waveCounts{{Wave: 0, Running: 2}, {Wave: 1, Pending: 1}}
	if len(st.Waves) != 2 || st.Waves[0] != want[0] || st.Waves[1] != want[1] {
		t.Errorf("waves = %+v, want %+v", st.Waves, want)
	}
	// Every model turn of the run counts, the restarted attempt's too (its
	// tokens were spent): the same totals the terminal event carries.
	if want := (messages.Usage{InputTokens: 45, OutputTokens: 12}); st.Usage != want || st.Phase != "wave 0" {
		t.Errorf("usage %+v phase %q, want %+v and wave 0", st.Usage, st.Phase, want)
	}
	out := texts(notes)
	for _, line := range []string{"plan: 3 nodes in 2 waves", "wave 0 started: n001 n002", "node n002 restarted (attempt 2): boom", "n001 wrote notes.md (5 bytes)"} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("no line %q in\n%s", line, out)
		}
	}

	notes = notes[:0]
	for _, env := range []*messages.Envelope{
		{RunID: "r1", Lane: nodeLane("n001"), Payload: &messages.NodeCompletedPayload{NodeID: "n001", Attempts: 1}},
		{RunID: "r1", Lane: nodeLane("n002"), Payload: &messages.NodeFailedPayload{NodeID: "n002", Error: "bad", Attempts: 3, Panicked: true}},
		{RunID: "r1", Lane: messages.RunLane(), Payload: &messages.WaveCompletedPayload{Wave: 0, Completed: 1, Failed: 1}},
		{RunID: "r1", Lane: nodeLane("n003"), Payload: &messages.NodeSkippedPayload{NodeID: "n003", Reason: "dependency n002 failed", Dependency: "n002"}},
		{RunID: "r1", Lane: messages.RunLane(), Payload: &messages.RunErrorPayload{Code: messages.ErrCodeNodeFailed, Message: "node n002 failed", DurationMS: 1500,
			Nodes: messages.NodeCounts{Total: 3, Completed: 1, Failed: 1, Skipped: 1}}},
	} {
		env.Type = env.Payload.EventType()
		notes = r.Event(notes, env)
	}
	wantNotes := []note{
		{noteOK, "node n001 completed (2 tokens out)"},
		{noteBad, "node n002 failed after 3 attempts: bad"},
		{noteWarn, "wave 0 completed: 1 completed, 1 failed, 0 cancelled, 0 skipped"},
		{noteWarn, "node n003 skipped: dependency n002 failed"},
	}
	if texts(notes) != texts(wantNotes) {
		t.Errorf("lines:\n%s\nwant:\n%s", texts(notes), texts(wantNotes))
	}
	for i := range min(len(notes), len(wantNotes)) {
		if notes[i].kind != wantNotes[i].kind {
			t.Errorf("line %q has kind %d, want %d", notes[i].text, notes[i].kind, wantNotes[i].kind)
		}
	}
	st = r.Status()
	want = []waveCounts{{Wave: 0, Completed: 1, Failed: 1}, {Wave: 1, Skipped: 1}}
	if st.Waves[0] != want[0] || st.Waves[1] != want[1] || st.Phase != "failed: node_failed" {
		t.Errorf("status = %+v, want waves %+v and phase failed: node_failed", st, want)
	}
	sum := texts(r.Summary())
	for _, s := range []string{"run failed (node_failed): node n002 failed\n", "after 1.5s, 3 nodes: 1 completed, 1 failed, 0 cancelled, 1 skipped; 0 tokens in, 0 out\n"} {
		if !strings.Contains(sum, s) {
			t.Errorf("summary %q does not contain %q", sum, s)
		}
	}
}

func TestRenderer_SummaryAnswer(t *testing.T) {
	t.Parallel()
	r, _ := feed(t,
		&messages.RunStartedPayload{Question: "why"},
		&messages.RunFinishedPayload{Answer: "Because of Rayleigh scattering.", DurationMS: 42,
			Nodes: messages.NodeCounts{Total: 2, Completed: 2}, Usage: messages.Usage{InputTokens: 10, OutputTokens: 20}},
	)
	sum := texts(r.Summary())
	for _, s := range []string{"\nBecause of Rayleigh scattering.\n", "run finished in 42ms: 2/2 nodes completed, 10 tokens in, 20 out\n"} {
		if !strings.Contains(sum, s) {
			t.Errorf("summary %q does not contain %q", sum, s)
		}
	}
	// The status line's figures are the summary's.
	if st := r.Status(); st.Phase != "finished" || !strings.Contains(formatStatus(st, 0, false)[0], "· 10 tokens in, 20 out ·") {
		t.Errorf("status %+v: %q, want phase finished and the summary's token figures", st, formatStatus(st, 0, false))
	}
	if got := texts(newRenderer("r1").Summary()); got != "the run did not end\n" {
		t.Errorf("summary of a run without terminal event = %q", got)
	}
}

func TestFormatStatus(t *testing.T) {
	t.Parallel()
	st := status{Phase: "wave 1", Usage: messages.Usage{InputTokens: 300, OutputTokens: 120}, Waves: []waveCounts{
		{Wave: 0, Completed: 2}, {Wave: 1, Running: 1, Completed: 1, Failed: 1}, {Wave: 2, Pending: 2},
	}}
	plain := formatStatus(st, 1234*time.Millisecond, false)
	// Every wave line has the same columns, pending included.
	want := []string{
		"wave 0      0 pending    0 running    2 completed    0 failed    0 skipped",
		"wave 1      0 pending    1 running    1 completed    1 failed    0 skipped",
		"wave 2      2 pending    0 running    0 completed    0 failed    0 skipped",
		"wave 1 · 300 tokens in, 120 out · 1.2s",
	}
	if strings.Join(plain, "\n") != strings.Join(want, "\n") {
		t.Errorf("plain status:\n%s\nwant:\n%s", strings.Join(plain, "\n"), strings.Join(want, "\n"))
	}
	colored := formatStatus(st, time.Second, true)
	if !strings.Contains(strings.Join(colored, "\n"), sgrRed+"    1 failed"+sgrReset) {
		t.Errorf("coloured status has no red failure count: %q", colored)
	}

	// Many waves: a window of maxWaveLines starting at the first unfinished wave.
	st.Waves = nil
	for w := range 30 {
		c := waveCounts{Wave: w, Completed: 1}
		if w >= 12 {
			c = waveCounts{Wave: w, Pending: 1}
		}
		st.Waves = append(st.Waves, c)
	}
	lines := formatStatus(st, 0, false)
	if len(lines) != maxWaveLines+1 || !strings.HasPrefix(lines[0], "wave 12 ") || !strings.HasPrefix(lines[maxWaveLines], "waves 12-21 of 30 · ") {
		t.Errorf("windowed status:\n%s", strings.Join(lines, "\n"))
	}

	// Large counts and wave numbers, and a cancelled column: still aligned.
	st.Waves = []waveCounts{{Wave: 9, Completed: 12345}, {Wave: 1000, Cancelled: 1, Running: 7}}
	lines = formatStatus(st, 0, false)
	want = []string{
		"wave 9         0 pending      0 running  12345 completed      0 failed      0 cancelled      0 skipped",
		"wave 1000      0 pending      7 running      0 completed      0 failed      1 cancelled      0 skipped",
	}
	if strings.Join(lines[:2], "\n") != strings.Join(want, "\n") {
		t.Errorf("wide status:\n%s\nwant:\n%s", strings.Join(lines[:2], "\n"), strings.Join(want, "\n"))
	}
}

// TestFormatStatusWidth: in 80 columns no line of the status block wraps:
// wave lines too wide (a cancelled column, five-digit counts) switch to
// short count names, and a waiting label too long (a question) is cut with
// an ellipsis, keeping "(+N more)"; width 0 (unknown) changes nothing.
func TestFormatStatusWidth(t *testing.T) {
	t.Parallel()
	st := status{Phase: "wave 1", Usage: messages.Usage{InputTokens: 300, OutputTokens: 120},
		Waves:   []waveCounts{{Wave: 9, Completed: 12345}, {Wave: 1000, Cancelled: 1, Running: 7}},
		Waiting: []string{"question from n001: " + strings.Repeat("which source should I trust more? ", 4), "plan approval"}}
	if got, want := formatStatusWidth(st, time.Second, false, 0), formatStatus(st, time.Second, false); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("width 0 changed the block:\n%s", strings.Join(got, "\n"))
	}
	for _, color := range []bool{false, true} {
		lines := formatStatusWidth(st, time.Second, color, 80)
		for _, l := range lines {
			if cells(l) > 80 || rows(l, 80) != 1 {
				t.Errorf("color %t: a line of %d columns wraps in 80:\n%q", color, cells(l), l)
			}
		}
		plain := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(strings.Join(lines, "\n"), "")
		for _, want := range []string{"wave 9         0 pend      0 run  12345 done      0 fail      0 canc      0 skip",
			"waiting for you: question from n001: which source", "… (+1 more)\nwave 1 · 300 tokens in, 120 out · 1s"} {
			if !strings.Contains(plain, want) {
				t.Errorf("color %t: the block lacks %q:\n%s", color, want, plain)
			}
		}
		if cut := lines[len(lines)-2]; color && !strings.HasSuffix(cut, "… (+1 more)"+sgrReset) {
			t.Errorf("the cut waiting line: %q", cut)
		}
	}
	// A block that fits keeps its long names.
	if lines := formatStatusWidth(status{Phase: "wave 0", Waves: []waveCounts{{Wave: 0, Running: 3}}}, 0, false, 80); !strings.Contains(lines[0], " running ") {
		t.Errorf("a block that fits lost its long names: %q", lines)
	}
}

func TestRows(t *testing.T) {
	t.Parallel()
	line := formatStatus(status{Phase: "wave 0", Waves: []waveCounts{{Wave: 0, Running: 3}}}, 0, true)[0]
	plain := formatStatus(status{Phase: "wave 0", Waves: []waveCounts{{Wave: 0, Running: 3}}}, 0, false)[0]
	n := len(plain)
	for _, tc := range []struct{ width, want int }{{0, 1}, {n, 1}, {n + 10, 1}, {n - 1, 2}, {(n + 2) / 3, 3}} {
		if got := rows(line, tc.width); got != tc.want {
			t.Errorf("rows(%d-column line, width %d) = %d, want %d", n, tc.width, got, tc.want)
		}
	}
	if got := rows("a · b", 5); got != 1 {
		t.Errorf("rows counts bytes, not cells: %d", got)
	}
	// Terminal cells, not runes: wide characters take two, combining marks none.
	for _, tc := range []struct {
		s    string
		want int
	}{
		{"abc", 3}, {"a · b", 5}, {"漢字", 4}, {"e\u0301", 1}, {"👍🏽", 2}, {"\x1b[1;33m漢\x1b[0m!", 3}, {"\x1b[2", 0},
	} {
		if got := cells(tc.s); got != tc.want {
			t.Errorf("cells(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
	if got := rows("漢字漢字漢", 9); got != 2 {
		t.Errorf("rows of 10 cells at width 9 = %d, want 2", got)
	}
}

func TestRenderer_Interrupts(t *testing.T) {
	t.Parallel()
	plan := messages.Plan{Nodes: []messages.PlanNode{{ID: "n001"}, {ID: "n002"}}}
	r, notes := feed(t,
		&messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptPlanApproval, Plan: &plan},
		&messages.InterruptResolvedPayload{InterruptID: "i1", Kind: messages.InterruptPlanApproval, Decision: messages.DecisionApprove},
		&messages.InterruptRaisedPayload{InterruptID: "i2", Kind: messages.InterruptNodeApproval, NodeID: "n001"},
		onNode("n002", &messages.InterruptRaisedPayload{InterruptID: "i3", Kind: messages.InterruptToolApproval, ToolName: "search"}),
		onNode("n001", &messages.InterruptRaisedPayload{InterruptID: "i4", Kind: messages.InterruptInfoRequest, Question: "which?"}),
	)
	if got, want := r.Status().Waiting, []string{"approval to start node n001", "tool approval for n002 (search)", "question from n001"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("waiting = %q, want %q", got, want)
	}
	lines := formatStatus(r.Status(), 0, false)
	if len(lines) < 2 || lines[len(lines)-2] != "waiting for you: approval to start node n001 (+2 more)" {
		t.Errorf("status block:\n%s", strings.Join(lines, "\n"))
	}
	for _, env := range []*messages.Envelope{
		{RunID: "r1", Lane: messages.RunLane(), Payload: &messages.InterruptResolvedPayload{InterruptID: "i2", Kind: messages.InterruptNodeApproval, Decision: messages.DecisionReject}},
		{RunID: "r1", Lane: nodeLane("n002"), AgentID: "n002", Payload: &messages.InterruptExpiredPayload{InterruptID: "i3", Kind: messages.InterruptToolApproval, Action: messages.DecisionReject}},
		{RunID: "r1", Lane: nodeLane("n001"), AgentID: "n001", Payload: &messages.InterruptResolvedPayload{InterruptID: "i4", Kind: messages.InterruptInfoRequest, Decision: messages.DecisionApprove}},
		// Raised before the renderer was watching: labelled from the event itself.
		{RunID: "r1", Lane: nodeLane("n002"), AgentID: "n002", Payload: &messages.InterruptResolvedPayload{InterruptID: "i0", Kind: messages.InterruptToolApproval, Decision: messages.DecisionCancel}},
	} {
		env.Type = env.Payload.EventType()
		notes = r.Event(notes, env)
	}
	want := []note{
		{noteWaiting, "waiting for you: plan approval"},
		{noteInfo, "plan approval: approved"},
		{noteWaiting, "waiting for you: approval to start node n001"},
		{noteWaiting, "waiting for you: tool approval for n002 (search)"},
		{noteWaiting, "waiting for you: question from n001"},
		{noteInfo, "approval to start node n001: rejected"},
		{noteWarn, "tool approval for n002 (search) timed out: rejected"},
		{noteInfo, "question from n001 answered"},
		{noteWarn, "tool approval for n002 cancelled"},
	}
	if texts(notes) != texts(want) {
		t.Errorf("lines:\n%s\nwant:\n%s", texts(notes), texts(want))
	}
	for i := range min(len(notes), len(want)) {
		if notes[i].kind != want[i].kind {
			t.Errorf("line %q has kind %d, want %d", notes[i].text, notes[i].kind, want[i].kind)
		}
	}
	if st := r.Status(); len(st.Waiting) != 0 {
		t.Errorf("still waiting for %q", st.Waiting)
	}
	if lines := formatStatus(r.Status(), 0, false); strings.Contains(strings.Join(lines, "\n"), "waiting") {
		t.Errorf("status block without open interrupts:\n%s", strings.Join(lines, "\n"))
	}
}

// TestRenderer_Labels: the lines a newcomer read as wrong (issue 20).
func TestRenderer_Labels(t *testing.T) {
	t.Parallel()
	_, notes := feed(t,
		onNode("n001", &messages.AdvisorPayload{Kind: messages.AdvisorContinue}),
		onNode("n002", &messages.AdvisorPayload{Kind: messages.AdvisorRedirect, Detail: "look at costs"}),
		&messages.RunCostEstimatePayload{NodeCount: 6, EstTokens: 12000, EstWallSeconds: 240},
	)
	want := []string{
		"advisor on n001: continue",
		"advisor on n002: redirect look at costs",
		"estimate for a real model: 6 agents, about 12000 tokens, about 4m0s (2000 tokens per agent at 50 tokens/s; the scripted model is faster)",
	}
	if got := texts(notes); got != strings.Join(want, "\n")+"\n" {
		t.Errorf("lines:\n%q\nwant:\n%q", got, want)
	}
}

// TestRenderer_NoNodeCompleted: a run none of whose nodes completed says
// so, whichever terminal event the engine ends it with.
func TestRenderer_NoNodeCompleted(t *testing.T) {
	t.Parallel()
	none := messages.NodeCounts{Total: 2, Skipped: 2}
	r, _ := feed(t, &messages.RunFinishedPayload{Answer: "from nothing ", Nodes: none})
	sum := texts(r.Summary())
	if !strings.Contains(sum, "\nfrom nothing\n") || !strings.Contains(sum, "no node completed (0 completed, 0 failed, 0 cancelled, 2 skipped): the answer has no input\n") {
		t.Errorf("summary of a finished run without completed nodes:\n%s", sum)
	}
	r, _ = feed(t, &messages.RunErrorPayload{Code: messages.ErrCodeNoNodesCompleted, Message: "no node of the plan completed", Nodes: none})
	sum = texts(r.Summary())
	for _, s := range []string{"run failed (no_nodes_completed): no node of the plan completed\n", "so nothing was synthesised\n", "2 nodes: 0 completed, 0 failed, 0 cancelled, 2 skipped"} {
		if !strings.Contains(sum, s) {
			t.Errorf("summary %q does not contain %q", sum, s)
		}
	}
}

// TestOutcome: every run_error is exit status 1, no_nodes_completed
// included; --json says why on stderr.
func TestOutcome(t *testing.T) {
	t.Parallel()
	fin := &messages.Envelope{RunID: "r1", Payload: &messages.RunFinishedPayload{}}
	if err := outcome(fin, false); err != nil {
		t.Errorf("outcome(run_finished) = %v", err)
	}
	for _, code := range []messages.ErrorCode{messages.ErrCodeNoNodesCompleted, messages.ErrCodeNodeFailed} {
		term := &messages.Envelope{RunID: "r1", Payload: &messages.RunErrorPayload{Code: code, Message: "why"}}
		for _, jsonOut := range []bool{false, true} {
			var ee *exitError
			if err := outcome(term, jsonOut); !errors.As(err, &ee) || ee.code != exitFailed || (ee.err != nil) != jsonOut {
				t.Errorf("outcome(run_error %s, json %t) = %#v", code, jsonOut, err)
			} else if jsonOut && ee.err.Error() != "run r1 failed ("+string(code)+"): why" {
				t.Errorf("outcome(run_error %s) says %q", code, ee.err)
			}
		}
	}
}

// TestTTYOutput_Screen: the terminal output's escape sequences.
func TestTTYOutput_Screen(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	now := time.Unix(100, 0)
	o := &ttyOutput{w: bufio.NewWriter(&b), r: newRenderer("r1"), now: func() time.Time { return now }, start: now, width: 80}
	o.r.Event(nil, &messages.Envelope{RunID: "r1", Type: messages.PlanProposed, Payload: &messages.PlanProposedPayload{
		Plan: messages.Plan{Nodes: []messages.PlanNode{{ID: "n001"}}}, Waves: [][]string{{"n001"}}}})
	if err := o.idle(); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); strings.Contains(got, "\x1b[") {
		t.Errorf("without colour (NO_COLOR) the block has escape sequences: %q", got)
	}
	b.Reset()
	now = now.Add(time.Second)
	_ = o.idle()
	// The redraw goes back to the first column before moving up (the
	// terminal may have echoed ^C at the cursor), then overwrites each row,
	// clearing the rest of it. Never "clear to the end of the screen": from
	// the first row (after a `clear`) it clears the whole screen, which tmux
	// copies into the scrollback first, once per redraw.
	if got := b.String(); !strings.HasPrefix(got, "\r\x1b[2A") || strings.Contains(got, "\x1b[J") || strings.Count(got, "\x1b[K\n") != 2 {
		t.Errorf("redraw = %q, want \\r, up 2, and two rows each ended with ESC[K, no ESC[J", got)
	}
	// A prompt leaves the block on screen: the next draw does not erase it.
	b.Reset()
	_ = o.prompt("i1")
	if got := b.String(); !strings.HasPrefix(got, "\r\x1b[2A") || !strings.Contains(got, "wave 0 ") {
		t.Errorf("prompt drew %q, want the block redrawn", got)
	}
	b.Reset()
	_ = o.idle()
	if got := b.String(); strings.Contains(got, "\x1b[2A") || !strings.Contains(got, "wave 0 ") {
		t.Errorf("the draw after a prompt = %q, want a new block below, the old one kept", got)
	}
	// With colour on, colours.
	o.color = true
	b.Reset()
	_ = o.idle()
	if got := b.String(); !strings.Contains(got, sgrBold) {
		t.Errorf("with colour the block has no SGR: %q", got)
	}
}

// TestTTYOutput_WaitingOnce: at a terminal, "waiting for you" is on
// screen once, in the status block, not also as a line above it (the
// plain output, which has no block, prints the line).
func TestTTYOutput_WaitingOnce(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	now := time.Unix(100, 0)
	o := &ttyOutput{w: bufio.NewWriter(&b), r: newRenderer("r1"), now: func() time.Time { return now }, start: now, width: 80}
	plan := messages.Plan{Nodes: []messages.PlanNode{{ID: "n001"}}}
	o.event(nil, &messages.Envelope{RunID: "r1", Type: messages.PlanProposed, Payload: &messages.PlanProposedPayload{Plan: plan, Waves: [][]string{{"n001"}}}})
	o.event(nil, &messages.Envelope{RunID: "r1", Lane: messages.RunLane(), Type: messages.InterruptRaised,
		Payload: &messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptPlanApproval, Plan: &plan}})
	if err := o.prompt("i1"); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "waiting for you: plan approval"); n != 1 {
		t.Errorf("the terminal shows %q %d times, want once:\n%s", "waiting for you: plan approval", n, b.String())
	}
	var p bytes.Buffer
	plain := &plainOutput{w: bufio.NewWriter(&p), r: newRenderer("r1")}
	plain.event(nil, &messages.Envelope{RunID: "r1", Lane: messages.RunLane(), Type: messages.InterruptRaised,
		Payload: &messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptPlanApproval, Plan: &plan}})
	_ = plain.flush()
	if p.String() != "waiting for you: plan approval\n" {
		t.Errorf("the plain output wrote %q, want the waiting line", p.String())
	}
}

// TestRun_NoColor: NO_COLOR turns the terminal output's colours off (and
// only them: the status block is still redrawn in place).
func TestRun_NoColor(t *testing.T) {
	t.Parallel()
	for _, noColor := range []string{"", "1"} {
		var out bytes.Buffer
		a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: io.Discard, isTTY: func(io.Writer) bool { return true },
			now: time.Now, getenv: func(k string) string {
				if k == "NO_COLOR" {
					return noColor
				}
				return ""
			}}
		ctx, cancel := context.WithTimeout(t.Context(), watchdog)
		code := execute(ctx, a, []string{"run", "q", "--nodes", "2", "--tokens", "2", "--token-delay-ms", "0"})
		cancel()
		if code != exitOK {
			t.Fatalf("NO_COLOR=%q: exit %d", noColor, code)
		}
		colored := strings.Contains(out.String(), sgrReset)
		if colored != (noColor == "") {
			t.Errorf("NO_COLOR=%q: colours %t in %q", noColor, colored, tail(out.String()))
		}
	}
}

func TestNodesInWaves(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		nodes, waves int
		want         string
	}{{1, 1, "1 node in 1 wave"}, {3, 2, "3 nodes in 2 waves"}, {0, 0, "0 nodes in 0 waves"}, {2, 1, "2 nodes in 1 wave"}} {
		if got := nodesInWaves(tc.nodes, tc.waves); got != tc.want {
			t.Errorf("nodesInWaves(%d, %d) = %q, want %q", tc.nodes, tc.waves, got, tc.want)
		}
	}
}

// TestRenderer_Spend: the status block shows the run's spend against its
// budget (run_started's), the cost from token_usage's cost_usd, "cost
// unknown" once a turn had none, and nothing for a run without a budget
// or a price.
func TestRenderer_Spend(t *testing.T) {
	t.Parallel()
	c := func(v float64) *float64 { return &v }
	r, _ := feed(t,
		&messages.RunStartedPayload{Question: "why", Budget: &messages.RunBudget{Tokens: 5000, CostUSD: 1}},
		onNode("n001", &messages.TokenUsagePayload{Turn: 1, Usage: messages.Usage{InputTokens: 1000, OutputTokens: 234}, CostUSD: c(0.0123)}),
		onNode("n002", &messages.TokenUsagePayload{Turn: 1, Usage: messages.Usage{}, CostUSD: c(0.5)}),
	)
	if got := r.Status().Spend; got != "budget 1234 of 5000 tokens, $0.51 of $1.00" {
		t.Fatalf("spend %q", got)
	}
	st := r.Status()
	if lines := formatStatus(st, time.Second, false); !strings.Contains(strings.Join(lines, "\n"), "1000 tokens in, 234 out · budget 1234 of 5000 tokens, $0.51 of $1.00") {
		t.Fatalf("status block:\n%s", strings.Join(lines, "\n"))
	}
	r.Event(nil, &messages.Envelope{Seq: 9, RunID: "r1", Lane: nodeLane("n001"), Type: messages.TokenUsage,
		Payload: &messages.TokenUsagePayload{Turn: 2, Model: "llama", Usage: messages.Usage{InputTokens: 6}}})
	if got := r.Status().Spend; got != "budget 1240 of 5000 tokens, cost unknown" {
		t.Fatalf("spend after an unpriced turn %q", got)
	}
	plain, _ := feed(t, &messages.RunStartedPayload{Question: "why"},
		onNode("n001", &messages.TokenUsagePayload{Turn: 1, Usage: messages.Usage{InputTokens: 10, OutputTokens: 1}}))
	if got := plain.Status().Spend; got != "" {
		t.Fatalf("a run without budget or price: spend %q", got)
	}
	priced, _ := feed(t, &messages.RunStartedPayload{Question: "why"},
		onNode("n001", &messages.TokenUsagePayload{Turn: 1, Usage: messages.Usage{InputTokens: 10}, CostUSD: c(0.002)}))
	if got := priced.Status().Spend; got != "$0.0020" {
		t.Fatalf("a priced run without budget: spend %q", got)
	}
}

// TestRenderer_ToolProgress: a running call's progress is a line of the
// status block (a bar when the total is known) until its
// tool_call_finished; the plain output logs each report.
func TestRenderer_ToolProgress(t *testing.T) {
	t.Parallel()
	r, notes := feed(t,
		&messages.RunStartedPayload{Question: "q"},
		onNode("n001", &messages.ToolCallStartedPayload{CallID: "c1", Tool: "search"}),
		onNode("n001", messages.NewToolCallProgress("c1", "search", 1, 4, "reading source 1 of 4")),
		onNode("n002", messages.NewToolCallProgress("c9", "crawl", 7, 0, "")),
		onNode("n001", messages.NewToolCallProgress("c1", "search", 2, 4, "reading source 2 of 4")),
	)
	want := []string{"n001 search [#####-----] 2/4 reading source 2 of 4", "n002 crawl 7"}
	if got := r.Status().Tools; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("status tools %q, want %q", got, want)
	}
	if !strings.Contains(texts(notes), "n001 search [##--------] 1/4 reading source 1 of 4\n") {
		t.Errorf("progress lines:\n%s", texts(notes))
	}
	lines := formatStatus(r.Status(), 0, false)
	if !strings.Contains(strings.Join(lines, "\n"), "  n001 search [#####-----] 2/4 reading source 2 of 4\n  n002 crawl 7") {
		t.Errorf("status block:\n%s", strings.Join(lines, "\n"))
	}
	r.Event(nil, &messages.Envelope{RunID: "r1", Type: messages.ToolCallFinished, Lane: nodeLane("n001"), AgentID: "n001",
		Payload: &messages.ToolCallFinishedPayload{CallID: "c1", Tool: "search", Result: "ok"}})
	if got := r.Status().Tools; len(got) != 1 || got[0] != "n002 crawl 7" {
		t.Errorf("after the call finished: %q", got)
	}
	// Many calls: at most maxToolLines lines, then how many more.
	st := status{Phase: "wave 0", Tools: []string{"a", "b", "c", "d", "e"}}
	lines = formatStatus(st, 0, false)
	if got := strings.Join(lines, "\n"); !strings.Contains(got, "  c\n  (+2 more tool calls)") || strings.Contains(got, "  d") {
		t.Errorf("many tools:\n%s", got)
	}
}

// TestRenderer_SummaryFiles: the summary lists the files the run wrote
// (a path written twice once, with its last size and writer) and the
// terminal event's files_bytes; a run that wrote none lists nothing.
func TestRenderer_SummaryFiles(t *testing.T) {
	t.Parallel()
	onNode := func(id string, p messages.Payload) laned { return laned{nodeLane(id), id, p} }
	r, _ := feed(t,
		&messages.RunStartedPayload{Question: "why"},
		onNode("n001", &messages.FilePayload{Path: "notes.md", Size: 5, Encoding: messages.FileEncodingUTF8, Content: "hello"}),
		onNode("n002", &messages.FilePayload{Path: "out/report.md", Size: 1200, Encoding: messages.FileEncodingUTF8}),
		onNode("n002", &messages.FilePayload{Path: "notes.md", Size: 7, Encoding: messages.FileEncodingUTF8, Content: "hello!!"}),
		&messages.RunFinishedPayload{Answer: "A.", DurationMS: 42, FilesBytes: 1212, Nodes: messages.NodeCounts{Total: 2, Completed: 2}},
	)
	sum := texts(r.Summary())
	want := "files written: 2 (1212 bytes written in all)\n" +
		"  notes.md             7 bytes  by n002\n" +
		"  out/report.md     1200 bytes  by n002\n"
	if !strings.HasSuffix(sum, want) {
		t.Errorf("summary:\n%s\nwant it to end with:\n%s", sum, want)
	}
	r, _ = feed(t, &messages.RunStartedPayload{Question: "why"}, &messages.RunFinishedPayload{Answer: "A."})
	if sum := texts(r.Summary()); strings.Contains(sum, "files written") {
		t.Errorf("a run without files: %q", sum)
	}
}

// TestRenderer_RemoteTask: a remote agent's task is shown when it is named
// and at each state other than working; a working task's status texts are not.
func TestRenderer_RemoteTask(t *testing.T) {
	t.Parallel()
	rt := func(state, msg string) laned {
		return onNode("n001", &messages.RemoteTaskPayload{Agent: "helper", TaskID: "t1", State: state, Message: msg})
	}
	_, notes := feed(t, rt("TASK_STATE_SUBMITTED", ""), rt("TASK_STATE_WORKING", "n001 started"),
		rt("TASK_STATE_INPUT_REQUIRED", "which one?"), rt("TASK_STATE_COMPLETED", "42"))
	want := "n001: remote agent helper, task t1: submitted\nn001: remote agent helper, task t1: input_required\nn001: remote agent helper, task t1: completed\n"
	if got := texts(notes); got != want {
		t.Fatalf("notes:\n%s\nwant:\n%s", got, want)
	}
}

// TestRenderer_Choices: a choice is "choice from <agent>"; its answer
// names the ids chosen, a decline says declined, an expiry that nothing
// was chosen.
func TestRenderer_Choices(t *testing.T) {
	t.Parallel()
	opts := []messages.ChoiceOption{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}}
	r, notes := feed(t,
		onNode("n001", &messages.InterruptRaisedPayload{InterruptID: "c1", Kind: messages.InterruptChoice, Question: "which?", Options: opts}),
		onNode("n002", &messages.InterruptRaisedPayload{InterruptID: "c2", Kind: messages.InterruptChoice, Question: "which?", Options: opts}),
		onNode("n003", &messages.InterruptRaisedPayload{InterruptID: "c3", Kind: messages.InterruptChoice, Question: "which?", Options: opts}),
	)
	for _, env := range []*messages.Envelope{
		{RunID: "r1", Lane: nodeLane("n001"), AgentID: "n001", Payload: &messages.InterruptResolvedPayload{InterruptID: "c1", Kind: messages.InterruptChoice, Decision: messages.DecisionApprove, Choices: []string{"b", "a"}}},
		{RunID: "r1", Lane: nodeLane("n002"), AgentID: "n002", Payload: &messages.InterruptResolvedPayload{InterruptID: "c2", Kind: messages.InterruptChoice, Decision: messages.DecisionReject}},
		{RunID: "r1", Lane: nodeLane("n003"), AgentID: "n003", Payload: &messages.InterruptExpiredPayload{InterruptID: "c3", Kind: messages.InterruptChoice, Action: messages.DecisionReject}},
	} {
		env.Type = env.Payload.EventType()
		notes = r.Event(notes, env)
	}
	want := []note{
		{noteWaiting, "waiting for you: choice from n001"},
		{noteWaiting, "waiting for you: choice from n002"},
		{noteWaiting, "waiting for you: choice from n003"},
		{noteInfo, "choice from n001 answered: b, a"},
		{noteInfo, "choice from n002: declined"},
		{noteWarn, "choice from n003 timed out: nothing chosen"},
	}
	if texts(notes) != texts(want) {
		t.Errorf("lines:\n%s\nwant:\n%s", texts(notes), texts(want))
	}
}
