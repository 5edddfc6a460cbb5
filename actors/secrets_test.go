package actors_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/internal/redact"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/tool"
)

// leakyModel is the scripted model whose every turn first says the
// secret, and which records the requests it gets.
type leakyModel struct {
	inner  model.Model
	secret string
	mu     sync.Mutex
	reqs   []model.Request
}

func (m *leakyModel) Name() string { return "leaky" }

func (m *leakyModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	st, err := m.inner.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	return &leakyStream{Stream: st, secret: m.secret}, nil
}

type leakyStream struct {
	model.Stream
	secret string
	said   bool
}

func (s *leakyStream) Recv() (model.Chunk, error) {
	if !s.said {
		s.said = true
		return &model.Text{Text: "my key is " + s.secret + ". "}, nil
	}
	return s.Stream.Recv()
}

// TestSecrets_NeverRecorded: with Config.Secrets, a secret a tool
// returns reaches neither the journal and stream (tool_call_finished) nor
// the model's next request; one the model says is masked in its deltas
// and answer; one in a log line is masked.
func TestSecrets_NeverRecorded(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-0f1e2d3c4b5a6978"
	leak, err := tool.Func("leak", "Prints the environment.", func(context.Context, struct{}) (string, error) {
		return "OPENAI_API_KEY=" + secret + "\nHOME=/root", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sc := messages.Scenario{Nodes: 2, Tokens: 3, Calls: []string{"leak"}}
	sm, err := scripted.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	m := &leakyModel{inner: sm, secret: secret}
	var logs bytes.Buffer
	set, err := tool.NewSet(leak)
	if err != nil {
		t.Fatal(err)
	}
	e := testkit.NewEngine(t, actors.Config{Secrets: []string{secret}, Tools: set,
		Logger: slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil)),
		Models: func(messages.Scenario) (model.Model, error) { return m, nil }})
	ref, err := e.StartRun(context.Background(), messages.StartRun{Question: "q", Scenario: &sc})
	if err != nil {
		t.Fatal(err)
	}
	events, err := testkit.Follow(context.Background(), e, ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	testkit.AssertInvariants(t, events)
	terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	var results, masked int
	for _, env := range events {
		b, err := env.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("seq %d %s carries the secret: %s", env.Seq, env.Type, b)
		}
		masked += bytes.Count(b, []byte(redact.Mask))
		if p, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok && p.Tool == "leak" {
			results++
			if !strings.Contains(p.Result, "OPENAI_API_KEY="+redact.Mask) {
				t.Errorf("tool result %q", p.Result)
			}
		}
	}
	if results != 2 || masked < 4 {
		t.Fatalf("%d leak results, %d masks: want 2 results and the model's words masked too", results, masked)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, req := range m.reqs {
		for _, r := range req.ToolResults {
			if strings.Contains(r.Content, secret) {
				t.Fatalf("the model read the secret in a tool result: %q", r.Content)
			}
		}
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatalf("logs:\n%s", logs.String())
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
