package main

import (
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
		onNode("n002", &messages.TextDeltaPayload{Delta: "b"}),
		onNode("n002", &messages.AgentRestartedPayload{Attempt: 2, Reason: "boom"}),
		onNode("n001", &messages.TextDeltaPayload{Delta: "c"}),
		// Another run's events change nothing.
		&messages.Envelope{RunID: "r2", Lane: nodeLane("n001"), Payload: &messages.TextDeltaPayload{Delta: "x"}},
		laned{messages.RunLane().Child(messages.SynthesisStream), "synthesizer", &messages.TextDeltaPayload{Delta: "d"}},
	)
	st := r.Status()
	want := []waveCounts{{Wave: 0, Running: 2}, {Wave: 1, Pending: 1}}
	if len(st.Waves) != 2 || st.Waves[0] != want[0] || st.Waves[1] != want[1] {
		t.Errorf("waves = %+v, want %+v", st.Waves, want)
	}
	if st.Tokens != 4 || st.Phase != "wave 0" {
		t.Errorf("tokens %d phase %q, want 4 and wave 0", st.Tokens, st.Phase)
	}
	out := texts(notes)
	for _, line := range []string{"plan: 3 nodes in 2 waves", "wave 0 started: n001 n002", "node n002 restarted (attempt 2): boom"} {
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
		{noteOK, "node n001 completed (2 tokens)"},
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
	for _, s := range []string{"run failed (node_failed): node n002 failed\n", "after 1.5s, 3 nodes: 1 completed, 1 failed, 0 cancelled, 1 skipped\n"} {
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
	if st := r.Status(); st.Phase != "finished" {
		t.Errorf("phase %q, want finished", st.Phase)
	}
	if got := texts(newRenderer("r1").Summary()); got != "the run did not end\n" {
		t.Errorf("summary of a run without terminal event = %q", got)
	}
}

func TestFormatStatus(t *testing.T) {
	t.Parallel()
	st := status{Phase: "wave 1", Tokens: 120, Waves: []waveCounts{
		{Wave: 0, Completed: 2}, {Wave: 1, Running: 1, Completed: 1, Failed: 1}, {Wave: 2, Pending: 2},
	}}
	plain := formatStatus(st, 1234*time.Millisecond, false)
	want := []string{
		"wave 0      0 running    2 completed    0 failed    0 skipped",
		"wave 1      1 running    1 completed    1 failed    0 skipped",
		"wave 2      2 pending    0 running    0 completed    0 failed    0 skipped",
		"wave 1 · 120 tokens · 1.2s",
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
		t.Errorf("rows counts bytes, not runes: %d", got)
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
		{noteWarn, "waiting for you: plan approval"},
		{noteInfo, "plan approval: approved"},
		{noteWarn, "waiting for you: approval to start node n001"},
		{noteWarn, "waiting for you: tool approval for n002 (search)"},
		{noteWarn, "waiting for you: question from n001"},
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
