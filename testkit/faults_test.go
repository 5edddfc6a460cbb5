package testkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/tool"
)

type echoArgs struct {
	Say string `json:"say"`
}

func echoTool(t *testing.T) tool.Tool {
	t.Helper()
	echo, err := tool.Func("echo", "Say it back.", func(_ context.Context, a echoArgs) (string, error) { return a.Say, nil })
	if err != nil {
		t.Fatal(err)
	}
	return echo
}

func TestFaultyTool_Call(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("the wiki is down")
		var calls []testkit.Call
		ft := testkit.NewFaultyTool(echoTool(t), func(c testkit.Call) testkit.Fault {
			calls = append(calls, c)
			switch c.N {
			case 1:
				return testkit.Fault{Err: boom}
			case 2:
				return testkit.Fault{Delay: 30 * time.Second}
			case 3:
				return testkit.Fault{Hang: true}
			}
			return testkit.Fault{}
		})
		if ft.Def().Name != "echo" {
			t.Fatalf("Def().Name = %q, want the inner tool's", ft.Def().Name)
		}
		ctx := tool.WithCallInfo(context.Background(), tool.CallInfo{RunID: "r1", AgentID: "n001", Attempt: 1, Turn: 2})
		args := json.RawMessage(`{"say":"hi"}`)

		if _, err := ft.Call(ctx, args); !errors.Is(err, boom) {
			t.Fatalf("call 1: err = %v, want the injected error", err)
		}
		start := time.Now()
		res, err := ft.Call(ctx, args)
		if err != nil || res.Content != "hi" {
			t.Fatalf("call 2: %+v, %v; want the inner tool's answer", res, err)
		}
		if d := time.Since(start); d != 30*time.Second {
			t.Fatalf("call 2 took %v of virtual time, want the 30s delay", d)
		}
		hctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		start = time.Now()
		if _, err := ft.Call(hctx, args); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call 3: err = %v, want the context's deadline", err)
		}
		if d := time.Since(start); d != time.Minute {
			t.Fatalf("call 3 hung for %v, want until its context ended (1m)", d)
		}
		if res, err := ft.Call(ctx, args); err != nil || res.Content != "hi" {
			t.Fatalf("call 4: %+v, %v; want the inner tool's answer", res, err)
		}
		want := testkit.Call{N: 4, RunID: "r1", AgentID: "n001", Attempt: 1, Turn: 2, Tool: "echo"}
		if len(calls) != 4 || calls[3] != want {
			t.Fatalf("Faults saw %+v, want 4 calls, the last %+v", calls, want)
		}
	})
}

// twoChunks streams "a", "b" per turn.
type twoChunks struct{}

func (twoChunks) Name() string { return "two" }
func (twoChunks) Stream(context.Context, model.Request) (model.Stream, error) {
	return &listStream{next: []model.Chunk{&model.Text{Text: "a"}, &model.Text{Text: "b"}}}, nil
}

type listStream struct{ next []model.Chunk }

func (s *listStream) Recv() (model.Chunk, error) {
	if len(s.next) == 0 {
		return nil, io.EOF
	}
	c := s.next[0]
	s.next = s.next[1:]
	return c, nil
}
func (s *listStream) Close() error { return nil }

// drain reads a stream to its end and returns its text and error.
func drain(s model.Stream) (string, error) {
	var text string
	for {
		c, err := s.Recv()
		if err == io.EOF {
			return text, nil
		}
		if err != nil {
			return text, err
		}
		text += c.(*model.Text).Text
	}
}

func TestFaultyModel_Stream(t *testing.T) {
	t.Parallel()
	boom := errors.New("rate limited")
	transient := model.ErrTransient
	fm := testkit.NewFaultyModel(twoChunks{}, func(c testkit.Call) testkit.Fault {
		switch c.N {
		case 1:
			return testkit.Fault{Err: boom}
		case 2:
			return testkit.Fault{Err: boom, AfterChunks: 1}
		case 3:
			return testkit.Fault{Err: transient}
		}
		return testkit.Fault{}
	})
	ctx := context.Background()
	req := model.Request{Role: model.RoleWorker, RunID: "r1", AgentID: "n001", Attempt: 1, Turn: 1}

	if _, err := fm.Stream(ctx, req); !errors.Is(err, model.ErrModel) || !errors.Is(err, boom) {
		t.Fatalf("turn 1: err = %v, want the injected error as a model.ErrModel", err)
	}
	s, err := fm.Stream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if text, err := drain(s); text != "a" || !errors.Is(err, model.ErrModel) {
		t.Fatalf("turn 2: %q, %v; want one chunk, then the model error", text, err)
	}
	if _, err := fm.Stream(ctx, req); !errors.Is(err, model.ErrTransient) || errors.Is(err, model.ErrModel) {
		t.Fatalf("turn 3: err = %v, want the transient error as it is", err)
	}
	s, err = fm.Stream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if text, err := drain(s); text != "ab" || err != nil {
		t.Fatalf("turn 4: %q, %v; want the inner model's whole turn", text, err)
	}
}

func TestFaultyModels_NumbersAllModelsTogether(t *testing.T) {
	t.Parallel()
	var seen []int
	f := testkit.FaultyModels(func(messages.Scenario) (model.Model, error) { return twoChunks{}, nil }, func(c testkit.Call) testkit.Fault {
		seen = append(seen, c.N)
		return testkit.Fault{}
	})
	for range 2 {
		m, err := f(messages.Scenario{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Stream(context.Background(), model.Request{}); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 2 || seen[1] != 2 {
		t.Fatalf("calls numbered %v, want 1, 2 across both models", seen)
	}
}

func TestOnCalls(t *testing.T) {
	t.Parallel()
	f := testkit.Fault{Hang: true}
	pick := testkit.OnCalls(f, 2, 4)
	for n, want := range map[int]bool{1: false, 2: true, 3: false, 4: true} {
		if got := pick(testkit.Call{N: n}) == f; got != want {
			t.Errorf("OnCalls(2, 4) on call %d: %v, want %v", n, got, want)
		}
	}
}
