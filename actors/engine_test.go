package actors_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/feed"
	"github.com/conclave-ai/conclave/actors/runindex"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

func ptr[T any](v T) *T { return &v }

func terminal[T messages.Payload](t *testing.T, events []*messages.Envelope, run messages.RunID) T {
	t.Helper()
	env := testkit.Terminal(events, run)
	if env == nil {
		t.Fatal("run has no terminal event")
	}
	p, ok := env.Payload.(T)
	if !ok {
		t.Fatalf("terminal event is %s (%+v), want %T", env.Type, env.Payload, *new(T))
	}
	return p
}

func TestEngine_CouncilCompletes(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 9, Waves: 3, Tokens: 10, ReasoningTokens: 2, ToolsPerNode: 2, SubagentsPerNode: 1}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "why is the sky blue", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	if !strings.HasPrefix(fin.Answer, "Answer to: why is the sky blue") {
		t.Errorf("answer = %q", fin.Answer)
	}
	if fin.Nodes != (messages.NodeCounts{Total: 9, Completed: 9}) {
		t.Errorf("node counts = %+v", fin.Nodes)
	}
	if fin.Usage.OutputTokens == 0 {
		t.Error("no usage on run_finished")
	}
	for typ, want := range map[messages.EventType]int{
		messages.NodeStarted: 9, messages.SubagentStarted: 9, messages.SubagentFinished: 9,
		messages.ToolCallStarted: 27, messages.ToolCallFinished: 27, messages.WaveCompleted: 3,
	} {
		if got := testkit.Count(events, typ); got != want {
			t.Errorf("%s: %d events, want %d", typ, got, want)
		}
	}
	// Each node's output is passed as context to its dependents.
	for _, env := range events {
		if p, ok := env.Payload.(*messages.NodeStartedPayload); ok && len(p.Deps) > 0 {
			out := nodeOutput(events, p.NodeID)
			if !strings.Contains(out, fmt.Sprintf("Building on %d inputs.", len(p.Deps))) {
				t.Errorf("node %s output %q does not show its %d inputs", p.NodeID, out, len(p.Deps))
			}
		}
	}
}

func nodeOutput(events []*messages.Envelope, id string) string {
	for _, env := range events {
		if p, ok := env.Payload.(*messages.NodeCompletedPayload); ok && p.NodeID == id {
			return p.Output
		}
	}
	return ""
}

// TestEngine_PanickingNodesRestart: a 200-node council where 5 % of the
// nodes panic on their first attempt completes under the restart policy.
func TestEngine_PanickingNodesRestart(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{Concurrency: 16})
	sc := messages.Scenario{Nodes: 200, Waves: 8, Tokens: 6, ToolsPerNode: 1, PanicNodes: messages.NodeSelector{Fraction: 0.05}, Seed: 7}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	if fin.Nodes.Completed != 200 {
		t.Fatalf("completed %d of 200 nodes", fin.Nodes.Completed)
	}
	if got := testkit.Count(events, messages.AgentRestarted); got != 10 {
		t.Fatalf("agent_restarted = %d, want 10 (5%% of 200)", got)
	}
	for _, env := range events {
		if p, ok := env.Payload.(*messages.NodeCompletedPayload); ok && p.Attempts != 1 && p.Attempts != 2 {
			t.Errorf("node %s completed after %d attempts", p.NodeID, p.Attempts)
		}
	}
}

// TestEngine_PanicBeyondRestartLimit: a node that keeps panicking is stopped
// by its supervisor; the run fails and its dependents are skipped.
func TestEngine_PanicBeyondRestartLimit(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{RestartLimit: 2})
	sc := messages.Scenario{Nodes: 6, Waves: 3, FanIn: 2, Tokens: 4, PanicNodes: messages.NodeSelector{IDs: []string{"n001"}}, PanicAttempts: 10}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	runErr := terminal[*messages.RunErrorPayload](t, events, ref.RunID)
	if runErr.Code != messages.ErrCodeNodeFailed {
		t.Fatalf("run_error code = %q", runErr.Code)
	}
	var failed *messages.NodeFailedPayload
	for _, env := range events {
		if p, ok := env.Payload.(*messages.NodeFailedPayload); ok {
			failed = p
		}
	}
	if failed == nil || failed.NodeID != "n001" || !failed.Panicked || failed.Attempts != 3 {
		t.Fatalf("node_failed = %+v, want n001 panicked after 3 attempts", failed)
	}
	if testkit.Count(events, messages.AgentRestarted) != 2 {
		t.Fatalf("want 2 restarts before the stop")
	}
}

// TestEngine_FailedNodeCancelsWaveAndSkipsDownstream runs in virtual time so
// the failing node's wave siblings are still streaming when it fails.
func TestEngine_FailedNodeCancelsWaveAndSkipsDownstream(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, actors.Config{Concurrency: 2})
		sc := messages.Scenario{Nodes: 8, Waves: 2, Tokens: 20, TokenDelayMS: 10, FailNodes: messages.NodeSelector{IDs: []string{"n001"}}}
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
		testkit.AssertInvariants(t, events)
		runErr := terminal[*messages.RunErrorPayload](t, events, ref.RunID)
		if runErr.Code != messages.ErrCodeNodeFailed || !strings.Contains(runErr.Message, "n001") {
			t.Fatalf("run_error = %+v", runErr)
		}
		want := messages.NodeCounts{Total: 8, Failed: 1, Cancelled: 1, Skipped: 6}
		if runErr.Nodes != want {
			t.Fatalf("node counts = %+v, want %+v", runErr.Nodes, want)
		}
		for _, env := range events {
			if p, ok := env.Payload.(*messages.NodeSkippedPayload); ok && p.NodeID > "n004" && p.Dependency == "" {
				t.Errorf("downstream node %s skipped without naming its failed dependency: %+v", p.NodeID, p)
			}
		}
	})
}

func TestEngine_AbortEndsWithOneTerminal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, actors.Config{})
		ctx := context.Background()
		sc := messages.Scenario{Nodes: 12, Waves: 3, Tokens: 50, TokenDelayMS: 20, ToolsPerNode: 1, SubagentsPerNode: 1}
		ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", Scenario: &sc})
		if err != nil {
			t.Fatal(err)
		}
		probe, err := testkit.NewProbe(ctx, e, ref.Tenant, ref.SessionID, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer probe.Close()
		// Abort once the first wave is streaming.
		_, err = probe.Until(ctx, func(env *messages.Envelope) bool {
			return env.Type == messages.TextDelta && strings.HasPrefix(string(env.Lane.StreamID), "node:")
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Abort(ctx, messages.AbortRun{RunID: ref.RunID}); err != nil {
			t.Fatal(err)
		}
		if _, err := probe.Until(ctx, testkit.TerminalOf(ref.RunID)); err != nil {
			t.Fatal(err)
		}
		events := probe.Seen()
		testkit.AssertInvariants(t, events)
		if p := terminal[*messages.RunErrorPayload](t, events, ref.RunID); p.Code != messages.ErrCodeAborted {
			t.Fatalf("code = %q, want aborted", p.Code)
		}
		if err := e.Abort(ctx, messages.AbortRun{RunID: ref.RunID}); !errors.Is(err, actors.ErrRunTerminal) {
			t.Fatalf("second abort = %v, want ErrRunTerminal", err)
		}
		if err := e.Abort(ctx, messages.AbortRun{RunID: "nope"}); !errors.Is(err, actors.ErrRunNotFound) {
			t.Fatalf("abort unknown = %v, want ErrRunNotFound", err)
		}
	})
}

// TestEngine_TokenDelayIsVirtual: delays run on the synctest clock, so the
// reported duration is exact.
func TestEngine_TokenDelayIsVirtual(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, actors.Config{})
		// One node per wave, so nothing overlaps: director (3 reasoning +
		// plan chunks), 3 nodes × 10 tokens, synthesis 1 + 5 tokens.
		sc := messages.Scenario{Nodes: 3, Waves: 3, Tokens: 10, SynthesisTokens: 5, TokenDelayMS: 100}
		start := time.Now()
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
		testkit.AssertInvariants(t, events)
		fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
		planChunks := testkit.Count(events, messages.TextDelta) - 30 - 6
		want := time.Duration(3+planChunks+30+6) * 100 * time.Millisecond
		if got := time.Since(start); got != want {
			t.Fatalf("virtual time = %v, want %v", got, want)
		}
		if time.Duration(fin.DurationMS)*time.Millisecond != want {
			t.Fatalf("duration_ms = %d, want %v", fin.DurationMS, want)
		}
	})
}

func TestEngine_SameSeedSameEvents(t *testing.T) {
	t.Parallel()
	sc := messages.Scenario{Nodes: 10, Waves: 3, Tokens: 8, ReasoningTokens: 2, ToolsPerNode: 1, SubagentsPerNode: 1, Seed: 42}
	run := func(concurrency int) []*messages.Envelope {
		e := testkit.NewEngine(t, actors.Config{})
		_, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc, Concurrency: concurrency})
		return events
	}
	// With concurrency 1 the run lane's sequence (waves, nodes in order)
	// repeats and so does every lane; a node's tool calls and its
	// sub-agent run at the same time, so their lanes interleave freely.
	a, b := byLane(run(1)), byLane(run(1))
	for lane, seq := range a {
		if strings.Join(seq, "\n") != strings.Join(b[lane], "\n") {
			t.Fatalf("lane %s differs between two runs with the same seed and concurrency 1:\n%s\n----\n%s", lane, strings.Join(seq, "\n"), strings.Join(b[lane], "\n"))
		}
	}
	// With parallel nodes, interleaving between lanes varies but every lane repeats.
	pa, pb := byLane(run(8)), byLane(run(8))
	for lane, seq := range pa {
		if strings.Join(seq, "\n") != strings.Join(pb[lane], "\n") {
			t.Fatalf("lane %s differs between two runs with the same seed", lane)
		}
	}
	if len(pa) != len(pb) {
		t.Fatalf("lane count differs: %d vs %d", len(pa), len(pb))
	}
}

// canonical strips what legitimately differs between runs: ids, timestamps,
// run/session ids and durations.
func canonical(events []*messages.Envelope) []string {
	out := make([]string, 0, len(events))
	for _, env := range events {
		switch p := env.Payload.(type) {
		case *messages.RunFinishedPayload:
			p.DurationMS, p.ConversationID = 0, "" // the session's id
			p.Citations = withoutSeenAt(p.Citations)
		case *messages.RunErrorPayload:
			p.DurationMS, p.ConversationID = 0, ""
		case *messages.ToolCallFinishedPayload: // wall-clock time of the call
			p.DurationMS, p.DurationDisplay = 0, ""
		case *messages.TokenUsagePayload: // wall-clock timing of the turn
			p.DurationMS, p.FirstTokenMS = 0, 0
		case *messages.NodeCompletedPayload: // wall-clock time a source was seen
			p.Citations = withoutSeenAt(p.Citations)
		case *messages.CitationAddedPayload:
			p.FirstSeenAt = time.Time{}
		}
		payload, _ := json.Marshal(env.Payload)
		out = append(out, fmt.Sprintf("%d %s %s %+v %s", env.Seq, env.Type, env.AgentID, env.Lane, payload))
	}
	return out
}

// withoutSeenAt returns cs without their first_seen_at.
func withoutSeenAt(cs []messages.Citation) []messages.Citation {
	out := slices.Clone(cs)
	for i := range out {
		out[i].FirstSeenAt = time.Time{}
	}
	return out
}

func byLane(events []*messages.Envelope) map[messages.StreamID][]string {
	out := map[messages.StreamID][]string{}
	for i, line := range canonical(events) {
		_, rest, _ := strings.Cut(line, " ") // drop seq
		out[events[i].Lane.StreamID] = append(out[events[i].Lane.StreamID], rest)
	}
	return out
}

// TestEngine_ThousandSubscribers: 1,000 subscribers attach at random
// moments during a 1,000-node run, each with its own cursor; each sees
// every seq from its cursor to the end exactly once, in order.
func TestEngine_ThousandSubscribers(t *testing.T) {
	t.Parallel()
	const subscribers = 1000
	e := testkit.NewEngine(t, actors.Config{SubscriberQueue: 64, Concurrency: 32})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	sc := messages.Scenario{Nodes: 1000, Waves: 10, Tokens: 2, Seed: 3}
	ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", Scenario: &sc})
	if err != nil {
		t.Fatal(err)
	}
	driver, err := e.Subscribe(ctx, messages.Subscribe{SessionID: ref.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	defer driver.Close()

	// Attach points: subscriber i attaches once the driver has seen seq
	// attachAt[i], with a cursor anywhere up to that point.
	rng := rand.New(rand.NewPCG(1, 2))
	attachAt := make([]uint64, subscribers)
	for i := range attachAt {
		attachAt[i] = rng.Uint64N(6000)
	}
	var wg sync.WaitGroup
	results := make([]error, subscribers)
	attach := func(i int, seen uint64) {
		after := rng.Uint64N(seen) // < seen <= the terminal's seq, so there is always something to see
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = followFrom(ctx, e, ref, after)
		}()
	}
	next := 0
	order := make([]int, subscribers)
	for i := range order {
		order[i] = i
	}
	slicesSortBy(order, attachAt)
	var buf []*messages.Encoded
	var endSeq uint64
	for endSeq == 0 {
		buf, err = driver.Next(ctx, buf, 256)
		if err != nil {
			t.Fatal(err)
		}
		for _, enc := range buf {
			for next < subscribers && attachAt[order[next]] <= enc.Seq {
				attach(order[next], enc.Seq)
				next++
			}
			if enc.RunID == ref.RunID && enc.Type.Terminal() {
				endSeq = enc.Seq
			}
		}
	}
	for ; next < subscribers; next++ { // attach points past the end: attach after the run
		attach(order[next], endSeq)
	}
	wg.Wait()
	for i, err := range results {
		if err != nil {
			t.Fatalf("subscriber %d: %v", i, err)
		}
	}
}

func slicesSortBy(order []int, key []uint64) {
	for i := 1; i < len(order); i++ { // insertion sort keeps this dependency-free and stable
		for j := i; j > 0 && key[order[j]] < key[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
}

func followFrom(ctx context.Context, e *actors.Engine, ref actors.RunRef, after uint64) error {
	sub, err := e.Subscribe(ctx, messages.Subscribe{SessionID: ref.SessionID, After: after})
	if err != nil {
		return err
	}
	defer sub.Close()
	want := after + 1
	var buf []*messages.Encoded
	for {
		buf, err = sub.Next(ctx, buf, 256)
		if err != nil {
			head, _ := e.Head(context.Background(), "", ref.SessionID)
			return fmt.Errorf("cursor %d, at %d, head %d, dropped %d: %w", after, sub.Cursor(), head, sub.Dropped(), err)
		}
		for _, enc := range buf {
			if enc.Seq != want {
				return fmt.Errorf("cursor %d: got seq %d, want %d", after, enc.Seq, want)
			}
			want++
			if enc.RunID == ref.RunID && enc.Type.Terminal() {
				return nil
			}
		}
	}
}

func TestEngine_ShutdownInterruptsRuns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e, err := actors.New(actors.Config{Logger: testkit.TestLogger(t, 0)})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		sc := messages.Scenario{Nodes: 4, Tokens: 100, TokenDelayMS: 50}
		ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", Scenario: &sc})
		if err != nil {
			t.Fatal(err)
		}
		probe, err := testkit.NewProbe(ctx, e, ref.Tenant, ref.SessionID, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer probe.Close()
		if _, err := probe.Until(ctx, func(env *messages.Envelope) bool { return env.Type == messages.NodeStarted }); err != nil {
			t.Fatal(err)
		}
		if err := e.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.Shutdown(ctx); err != nil {
			t.Fatalf("second Shutdown = %v", err)
		}
		if _, err := probe.Until(ctx, testkit.TerminalOf(ref.RunID)); err != nil {
			t.Fatal(err)
		}
		events := probe.Seen()
		testkit.AssertInvariants(t, events)
		if p, ok := events[len(events)-1].Payload.(*messages.RunErrorPayload); !ok || p.Code != messages.ErrCodeInterrupted {
			t.Fatalf("last event %+v, want run_error interrupted", events[len(events)-1].Payload)
		}
		if _, err := probe.Until(ctx, func(*messages.Envelope) bool { return false }); !errors.Is(err, feed.ErrClosed) {
			t.Fatalf("reading after shutdown = %v, want feed.ErrClosed", err)
		}
		if _, err := e.StartRun(ctx, messages.StartRun{Question: "q"}); !errors.Is(err, actors.ErrShuttingDown) {
			t.Fatalf("StartRun after shutdown = %v", err)
		}
		testkit.SettleDeadLetters()
	})
}

func TestEngine_BadRequests(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	ctx := context.Background()
	for name, cmd := range map[string]messages.StartRun{
		"no question":    {},
		"bad session":    {Question: "q", SessionID: "has space"},
		"bad hitl":       {Question: "q", HITL: "always"},
		"bad timeout":    {Question: "q", ApprovalTimeoutSeconds: -1},
		"bad action":     {Question: "q", ApprovalTimeoutAction: messages.DecisionRevise},
		"bad scenario":   {Question: "q", Scenario: &messages.Scenario{Nodes: -1}},
		"too many waves": {Question: "q", Scenario: &messages.Scenario{Nodes: 2, Waves: 5}},
		"concurrency":    {Question: "q", Concurrency: -3},
		"huge question":  {Question: strings.Repeat("x", messages.MaxQuestionBytes+1)},
	} {
		if _, err := e.StartRun(ctx, cmd); !errors.Is(err, actors.ErrInvalidRequest) {
			t.Errorf("%s: StartRun = %v, want ErrInvalidRequest", name, err)
		}
	}
	if _, err := e.Subscribe(ctx, messages.Subscribe{SessionID: "unknown"}); !errors.Is(err, actors.ErrSessionNotFound) {
		t.Errorf("Subscribe unknown = %v", err)
	}
	ref, _ := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Seed: ptr(int64(1))})
	head, err := e.Head(ctx, "", ref.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Subscribe(ctx, messages.Subscribe{SessionID: ref.SessionID, After: head + 1}); !errors.Is(err, actors.ErrCursorAhead) {
		t.Errorf("Subscribe past head = %v, want ErrCursorAhead", err)
	}
}

// TestEngine_SessionSharedByRuns: two runs in one session share one gapless seq.
func TestEngine_SessionSharedByRuns(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	r1, err := e.StartRun(ctx, messages.StartRun{Question: "one", SessionID: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := e.StartRun(ctx, messages.StartRun{Question: "two", SessionID: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	probe, err := testkit.NewProbe(ctx, e, "", "shared", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	ended := 0
	events, err := probe.Until(ctx, func(env *messages.Envelope) bool {
		if env.Type.Terminal() {
			ended++
		}
		return ended == 2
	})
	if err != nil {
		t.Fatal(err)
	}
	testkit.AssertInvariants(t, events)
	if testkit.Terminal(events, r1.RunID) == nil || testkit.Terminal(events, r2.RunID) == nil {
		t.Fatal("both runs must end")
	}
}

func TestEngine_RunIndexAndTenants(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	ctx := context.Background()
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Tenant: "acme", Question: "q", SessionID: "s-acme"})
	sum, err := e.Run("acme", ref.RunID)
	if err != nil {
		t.Fatal(err)
	}
	fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	if sum.Status != messages.StatusFinished || sum.Answer != fin.Answer || sum.Nodes != fin.Nodes || sum.Running != 0 || sum.EndedAt == nil {
		t.Fatalf("summary = %+v", sum)
	}
	if sum.LastSeq != events[len(events)-1].Seq {
		t.Fatalf("last_seq = %d, want %d", sum.LastSeq, events[len(events)-1].Seq)
	}
	// Another tenant sees nothing of acme's.
	if _, err := e.Run("other", ref.RunID); !errors.Is(err, actors.ErrRunNotFound) {
		t.Fatalf("other tenant Run = %v", err)
	}
	if _, err := e.Subscribe(ctx, messages.Subscribe{Tenant: "other", SessionID: "s-acme"}); !errors.Is(err, actors.ErrSessionNotFound) {
		t.Fatalf("other tenant Subscribe = %v", err)
	}
	// Session ids are namespaced per tenant: "other" using the same id
	// gets a session of its own, and acme's is untouched.
	acmeHead, _ := e.Head(ctx, "acme", "s-acme")
	otherRef, otherEvents := testkit.RunCouncil(t, e, messages.StartRun{Tenant: "other", Question: "q", SessionID: "s-acme", Scenario: &messages.Scenario{Nodes: 1}})
	if otherRef.SessionID != "s-acme" || otherEvents[0].Seq != 1 {
		t.Fatalf("other tenant's session %s starts at seq %d, want its own session from seq 1", otherRef.SessionID, otherEvents[0].Seq)
	}
	if h, _ := e.Head(ctx, "acme", "s-acme"); h != acmeHead {
		t.Fatalf("acme's head moved from %d to %d", acmeHead, h)
	}
	if err := e.Abort(ctx, messages.AbortRun{Tenant: "other", RunID: ref.RunID}); !errors.Is(err, actors.ErrRunNotFound) {
		t.Fatalf("other tenant Abort = %v", err)
	}
	if runs, _, _ := e.Runs(context.Background(), runindex.Filter{Tenant: "other", Limit: 10}); len(runs) != 1 || runs[0].RunID != otherRef.RunID {
		t.Fatalf("other tenant lists %+v, want only its own run", runs)
	}
	// Pagination.
	for range 4 {
		testkit.RunCouncil(t, e, messages.StartRun{Tenant: "acme", Question: "again", SessionID: "s-acme", Scenario: &messages.Scenario{Nodes: 1}})
	}
	var all []messages.RunSummary
	var after messages.RunID
	for {
		page, next, _ := e.Runs(context.Background(), runindex.Filter{Tenant: "acme", Session: "s-acme", Limit: 2, After: after})
		all = append(all, page...)
		if next == "" {
			break
		}
		after = next
	}
	if len(all) != 5 || all[0].RunID != ref.RunID {
		t.Fatalf("paged %d runs, want 5 starting with the first", len(all))
	}
	if got := e.RunsByStatus()[messages.StatusFinished]; got != 6 { // acme's 5 and other's 1
		t.Fatalf("finished runs = %d, want 6", got)
	}
}

// TestEngine_FailureRacesSiblingCompletion: siblings of a failing node that
// complete right after it must not start the next wave (regression: a late
// AgentDone used to advance the failing run).
func TestEngine_FailureRacesSiblingCompletion(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{Concurrency: 8})
	for i := range 30 {
		sc := messages.Scenario{Nodes: 12, Waves: 3, Tokens: 2, FailNodes: messages.NodeSelector{IDs: []string{"n001"}}, Seed: int64(i)}
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
		testkit.AssertInvariants(t, events)
		if p := terminal[*messages.RunErrorPayload](t, events, ref.RunID); p.Code != messages.ErrCodeNodeFailed {
			t.Fatalf("iteration %d: run_error code %q", i, p.Code)
		}
		if t.Failed() {
			t.Fatalf("iteration %d failed", i)
		}
	}
}

// TestEngine_ReplayTruncated: a cursor older than what retention kept gets
// an explicit replay_truncated event before the earliest retained event.
func TestEngine_ReplayTruncated(t *testing.T) {
	t.Parallel()
	j := journal.NewMemory()
	e := testkit.NewEngine(t, actors.Config{Journal: j})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 2, Tokens: 3}})
	ctx := context.Background()
	if err := j.Trim(ctx, actors.JournalKey("", ref.SessionID), 10); err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, e, "", ref.SessionID, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, err := p.Until(ctx, testkit.TerminalOf(ref.RunID))
	if err != nil {
		t.Fatal(err)
	}
	tr, ok := got[0].Payload.(*messages.ReplayTruncatedPayload)
	if !ok || got[0].Seq != 9 || tr.After != 3 || tr.FirstRetained != 10 || got[0].RunID != "" {
		t.Fatalf("first event %s seq %d %+v, want replay_truncated seq 9 {after 3, first_retained 10}", got[0].Type, got[0].Seq, got[0].Payload)
	}
	if got[1].Seq != 10 || len(got) != len(events)-9+1 {
		t.Fatalf("then seq %d and %d events, want 10 and %d", got[1].Seq, len(got), len(events)-9+1)
	}
	if v := testkit.CheckPartial(got); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
	// A cursor inside the retained history sees no truncation.
	p2, err := testkit.NewProbe(ctx, e, "", ref.SessionID, 12)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if got, err := p2.Until(ctx, testkit.TerminalOf(ref.RunID)); err != nil || got[0].Seq != 13 {
		t.Fatalf("cursor 12: first seq %d, %v", got[0].Seq, err)
	}
}

// TestEngine_ReplayTruncatedMarkerID: a replay_truncated marker takes its
// id from Config.MarkerID, not NewID: a subscriber reading an old cursor
// does not shift the ids of the events journaled after it.
func TestEngine_ReplayTruncatedMarkerID(t *testing.T) {
	t.Parallel()
	j := journal.NewMemory()
	var events, markers atomic.Uint64
	counter := func(n *atomic.Uint64, hi byte) func() uuid.UUID {
		return func() uuid.UUID {
			var id uuid.UUID
			id[0] = hi
			binary.BigEndian.PutUint64(id[8:], n.Add(1))
			return id
		}
	}
	e := testkit.NewEngine(t, actors.Config{Journal: j, NewID: counter(&events, 1), MarkerID: counter(&markers, 2)})
	ref, _ := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, Tokens: 2}})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	if err := j.Trim(ctx, actors.JournalKey("", ref.SessionID), 5); err != nil {
		t.Fatal(err)
	}
	drawn := events.Load()
	p, err := testkit.NewProbe(ctx, e, "", ref.SessionID, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, err := p.Until(ctx, testkit.TerminalOf(ref.RunID))
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Type != messages.ReplayTruncated || got[0].ID[0] != 2 {
		t.Fatalf("first event %s id %s, want replay_truncated with an id of MarkerID", got[0].Type, got[0].ID)
	}
	if n := events.Load(); n != drawn {
		t.Fatalf("NewID was called %d times for the replay, want 0", n-drawn)
	}
}

// TestEngine_ReplayTruncatedEverything: when retention removed every event,
// a subscriber behind still learns it (and does not wait forever).
func TestEngine_ReplayTruncatedEverything(t *testing.T) {
	t.Parallel()
	j := journal.NewMemory()
	e := testkit.NewEngine(t, actors.Config{Journal: j})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, Tokens: 1}})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	head := events[len(events)-1].Seq
	if err := j.Trim(ctx, actors.JournalKey("", ref.SessionID), head+1); err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, e, "", ref.SessionID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, err := p.Until(ctx, func(env *messages.Envelope) bool { return env.Type == messages.ReplayTruncated })
	if err != nil {
		t.Fatal(err)
	}
	if tr := got[0].Payload.(*messages.ReplayTruncatedPayload); got[0].Seq != head || tr.FirstRetained != head+1 {
		t.Fatalf("replay_truncated seq %d %+v, want seq %d first_retained %d", got[0].Seq, tr, head, head+1)
	}
}

// TestEngine_Rewind: rewinding an ended run to wave k starts a new run in
// the same session that reuses the earlier waves and re-runs the rest with
// the note; seqs continue, and the whole session passes the invariants.
func TestEngine_Rewind(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	ctx := context.Background()
	ref, _ := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", SessionID: "rw", Scenario: &messages.Scenario{Nodes: 6, Waves: 3, Tokens: 3}})
	if _, err := e.Rewind(ctx, messages.Rewind{RunID: ref.RunID, Wave: 5}); !errors.Is(err, actors.ErrInvalidRequest) {
		t.Fatalf("rewind to a wave that does not exist = %v", err)
	}
	re, err := e.Rewind(ctx, messages.Rewind{RunID: ref.RunID, Wave: 1, Note: "focus on sunsets"})
	if err != nil {
		t.Fatal(err)
	}
	if re.SessionID != ref.SessionID || re.RunID == ref.RunID {
		t.Fatalf("rewound run %+v", re)
	}
	events, err := testkit.Follow(ctx, e, re, 0)
	if err != nil {
		t.Fatal(err)
	}
	testkit.AssertInvariants(t, events)
	var rw *messages.RunRewoundPayload
	nodesRun := map[string]bool{}
	for _, env := range events {
		if env.RunID != re.RunID {
			continue
		}
		switch p := env.Payload.(type) {
		case *messages.RunRewoundPayload:
			rw = p
		case *messages.NodeStartedPayload:
			nodesRun[p.NodeID] = true
		}
	}
	if rw == nil || rw.From != ref.RunID || rw.Wave != 1 || len(rw.Reused) != 2 {
		t.Fatalf("run_rewound = %+v", rw)
	}
	for _, n := range rw.Reused {
		if nodesRun[n.NodeID] {
			t.Fatalf("reused node %s ran again", n.NodeID)
		}
	}
	if len(nodesRun) != 4 {
		t.Fatalf("%d nodes ran again, want the 4 of waves 2 and 3", len(nodesRun))
	}
	fin := terminal[*messages.RunFinishedPayload](t, events, re.RunID)
	if fin.Nodes.Completed != 6 {
		t.Fatalf("counts %+v", fin.Nodes)
	}
	// Still-running runs cannot be rewound.
	live, err := e.StartRun(ctx, messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Rewind(ctx, messages.Rewind{RunID: live.RunID, Wave: 0}); !errors.Is(err, actors.ErrRunNotEnded) {
		t.Fatalf("rewind of a live run = %v", err)
	}
	if err := e.Abort(ctx, messages.AbortRun{RunID: live.RunID}); err != nil {
		t.Fatal(err)
	}
}

// drainAll reads sub until it ends and returns the count and the error it ended with.
func drainAll(ctx context.Context, sub *actors.Subscription) (int, error) {
	n := 0
	for {
		evs, err := sub.Next(ctx, nil, 16)
		n += len(evs)
		if err != nil {
			return n, err
		}
	}
}

// TestEngine_LateSubscriberDrainsAfterShutdown: a subscription still
// replaying from the (default, engine-made) journal when Shutdown runs gets
// every event and then feed.ErrClosed, not journal.ErrClosed.
func TestEngine_LateSubscriberDrainsAfterShutdown(t *testing.T) {
	t.Parallel()
	e, err := actors.New(actors.Config{Logger: testkit.TestLogger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 3}
	ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", Scenario: &sc})
	if err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, e, "", ref.SessionID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Until(ctx, testkit.TerminalOf(ref.RunID)); err != nil {
		t.Fatal(err)
	}
	want := len(p.Seen())
	p.Close()
	sub, err := e.Subscribe(ctx, messages.Subscribe{SessionID: ref.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := drainAll(ctx, sub); n != want || !errors.Is(err, feed.ErrClosed) {
		t.Fatalf("late subscriber got %d events and %v, want %d and feed.ErrClosed", n, err, want)
	}
}

// TestEngine_SubscribeRacingShutdown: subscriptions made while Shutdown
// runs are either refused or attached and then closed; none is left
// hanging (the engine actor attaches them before it poisons the hubs).
func TestEngine_SubscribeRacingShutdown(t *testing.T) {
	t.Parallel()
	j := journal.NewMemory()
	defer j.Close()
	e, err := actors.New(actors.Config{Journal: j, Logger: testkit.TestLogger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	var sessions []messages.SessionID
	for range 8 {
		sc := messages.Scenario{Nodes: 1, Waves: 1, Tokens: 1}
		ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", Scenario: &sc})
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, ref.SessionID)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var subs []*actors.Subscription
	stop := make(chan struct{})
	var first sync.WaitGroup // every loop made one subscription before Shutdown starts
	first.Add(len(sessions))
	for _, s := range sessions {
		wg.Go(func() {
			for i := 0; ; i++ {
				if i == 1 {
					first.Done()
				}
				select {
				case <-stop:
					return
				default:
				}
				sub, err := e.Subscribe(ctx, messages.Subscribe{SessionID: s})
				if err != nil {
					if i == 0 {
						t.Errorf("first Subscribe: %v", err)
						first.Done()
					}
					return // refused: the engine is shutting down
				}
				mu.Lock()
				subs = append(subs, sub)
				mu.Unlock()
			}
		})
	}
	first.Wait()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	for i, sub := range subs {
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := drainAll(dctx, sub)
		dcancel()
		if !errors.Is(err, feed.ErrClosed) {
			t.Fatalf("after %d events (cursor %d, lag %d) subscription %d of %d ended with %v, want feed.ErrClosed", n, sub.Cursor(), sub.Lag(), i, len(subs), err)
		}
	}
}

// failingJournal refuses every append, like a full or broken disk.
type failingJournal struct{ *journal.Memory }

func (failingJournal) Append(context.Context, messages.SessionID, []*messages.Encoded) error {
	return journal.ErrWriteFailed
}

// TestEngine_StartRunFailsWhenJournalFails: a start the journal cannot
// record is refused at once with the journal's error, not after the
// caller's deadline.
func TestEngine_StartRunFailsWhenJournalFails(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{Journal: failingJournal{journal.NewMemory()}})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	for range 2 { // the second start finds the session's hub already failed
		sc := messages.Scenario{Nodes: 1, Waves: 1, Tokens: 1}
		ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "s1", Scenario: &sc})
		if !errors.Is(err, journal.ErrWriteFailed) {
			t.Fatalf("StartRun = %+v, %v; want journal.ErrWriteFailed", ref, err)
		}
		if ctx.Err() != nil {
			t.Fatal("StartRun waited for the deadline")
		}
	}
}
