package actors_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/testkit"
)

// slowModel is the scripted model whose streams wait first before their
// first chunk and usage more before their usage report.
type slowModel struct {
	*scripted.Model
	first, usage time.Duration
}

func (m slowModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	s, err := m.Model.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	return &slowStream{Stream: s, m: m}, nil
}

type slowStream struct {
	model.Stream
	m       slowModel
	started bool
}

func (s *slowStream) Recv() (model.Chunk, error) {
	if !s.started {
		s.started = true
		time.Sleep(s.m.first)
	}
	c, err := s.Stream.Recv()
	if _, ok := c.(*model.Usage); ok {
		time.Sleep(s.m.usage)
	}
	return c, err
}

// TestTurnRunner_TimesTheTurn: every token_usage carries the turn's
// duration up to the usage report and its time to first token, on the
// engine's clock (virtual here: the model waits 2 s before its first
// chunk and 3 s more before its usage). Before, token_usage had neither.
func TestTurnRunner_TimesTheTurn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4}
		sm, err := scripted.New(sc)
		if err != nil {
			t.Fatal(err)
		}
		e := testkit.NewEngine(t, actors.Config{
			Models: func(messages.Scenario) (model.Model, error) {
				return slowModel{Model: sm, first: 2 * time.Second, usage: 3 * time.Second}, nil
			}})
		_, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
		testkit.AssertInvariants(t, events)
		usages := payloads[*messages.TokenUsagePayload](events)
		if len(usages) < 4 { // director, two workers, synthesiser
			t.Fatalf("%d token_usage events", len(usages))
		}
		for _, u := range usages {
			if u.FirstTokenMS != 2000 || u.DurationMS != 5000 {
				t.Errorf("token_usage %+v: want first_token_ms 2000, duration_ms 5000", u)
			}
		}
	})
}
