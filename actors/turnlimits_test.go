package actors_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/testkit"
)

// hugeModel is the scripted model whose workers answer with one chunk of
// text (then a tool call it may never get to make, and usage).
type hugeModel struct {
	*scripted.Model
	text   string
	noCall bool // one turn: no tool call after the text
}

func (m hugeModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if req.Role != model.RoleWorker {
		return m.Model.Stream(ctx, req)
	}
	chunks := []model.Chunk{&model.Text{Text: m.text}}
	if req.Turn == 1 && !m.noCall {
		chunks = append(chunks, &model.Call{Call: model.ToolCall{ID: req.AgentID + "-c1", Name: model.ToolSearch, Args: []byte(`{"query":"q"}`)}})
	}
	return &sliceStream{chunks: append(chunks, &model.Usage{Model: "huge"})}, nil
}

type sliceStream struct{ chunks []model.Chunk }

func (s *sliceStream) Recv() (model.Chunk, error) {
	if len(s.chunks) == 0 {
		return nil, io.EOF
	}
	c := s.chunks[0]
	s.chunks = s.chunks[1:]
	return c, nil
}
func (s *sliceStream) Close() error { return nil }

func hugeEngine(t *testing.T, text string, cfg actors.Config) (messages.StartRun, *actors.Engine) {
	t.Helper()
	sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4}
	sm, err := scripted.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Models = func(messages.Scenario) (model.Model, error) { return hugeModel{Model: sm, text: text}, nil }
	return messages.StartRun{Question: "q", Scenario: &sc}, testkit.NewEngine(t, cfg)
}

// TestTurn_SplitsLargeDeltas: a worker's 1 MiB chunk (multi-byte runes
// included) is published as text_delta events of at most 64 KiB each that
// add up to the chunk; before, it was one 1 MiB event.
func TestTurn_SplitsLargeDeltas(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("abcdéfgh€", (1<<20)/12)
	start, e := hugeEngine(t, text, actors.Config{})
	ref, events := testkit.RunCouncil(t, e, start)
	testkit.AssertInvariants(t, events)
	if env := testkit.Terminal(events, ref.RunID); env.Type != messages.RunFinished {
		t.Fatalf("terminal %+v", env.Payload)
	}
	var got strings.Builder
	n := 0
	for _, env := range events {
		if p, ok := env.Payload.(*messages.TextDeltaPayload); ok && env.Lane.StreamID == messages.NodeStream("n001") {
			if len(p.Delta) > actors.DefaultMaxDeltaBytes {
				t.Fatalf("a text_delta of %d bytes, over %d", len(p.Delta), actors.DefaultMaxDeltaBytes)
			}
			got.WriteString(p.Delta)
			n++
		}
	}
	// Turn 1's text, then turn 2's (after the search call).
	if got.String() != text+text {
		t.Fatalf("the deltas add up to %d bytes, want %d", got.Len(), 2*len(text))
	}
	if want := 2 * ((len(text) + actors.DefaultMaxDeltaBytes - 1) / actors.DefaultMaxDeltaBytes); n != want {
		t.Fatalf("%d text_delta events, want %d", n, want)
	}
}

// TestTurn_OutputBound: a turn past MaxTurnOutputBytes is cut there: its
// text up to the bound is the node's output, a warning output_truncated
// says so, and the tool call after the text is not made; before, the
// whole chunk was published and kept.
func TestTurn_OutputBound(t *testing.T) {
	t.Parallel()
	const bound = 100 << 10
	text := strings.Repeat("x", 300<<10)
	start, e := hugeEngine(t, text, actors.Config{MaxTurnOutputBytes: bound})
	ref, events := testkit.RunCouncil(t, e, start)
	testkit.AssertInvariants(t, events)
	if env := testkit.Terminal(events, ref.RunID); env.Type != messages.RunFinished {
		t.Fatalf("terminal %+v", env.Payload)
	}
	if out := nodeOutput(events, "n001"); out != text[:bound] {
		t.Fatalf("n001's output is %d bytes, want the first %d", len(out), bound)
	}
	warned := 0
	for _, env := range events {
		switch p := env.Payload.(type) {
		case *messages.WarningPayload:
			if p.Code == messages.WarnOutputTruncated && env.Lane.StreamID == messages.NodeStream("n001") {
				warned++
			}
		case *messages.ToolCallStartedPayload:
			t.Fatalf("tool call %+v made after a cut turn", p)
		}
	}
	if warned != 1 {
		t.Fatalf("%d output_truncated warnings on n001's lane, want 1", warned)
	}
}
