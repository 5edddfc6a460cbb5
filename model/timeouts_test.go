package model_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/model"
)

// feedModel streams what its test sends on chunks; Recv waits for the
// next one or for the turn's context, as a network stream does.
type feedModel struct {
	chunks chan model.Chunk // closed: io.EOF
	start  chan struct{}    // Stream waits for it (a server yet to answer); nil: at once
}

func (m *feedModel) Name() string { return "feed" }

func (m *feedModel) Stream(ctx context.Context, _ model.Request) (model.Stream, error) {
	if m.start != nil {
		select {
		case <-m.start:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &feedStream{ctx: ctx, chunks: m.chunks}, nil
}

type feedStream struct {
	ctx    context.Context
	chunks chan model.Chunk
}

func (s *feedStream) Recv() (model.Chunk, error) {
	if err := s.ctx.Err(); err != nil { // as a network stream: a cancelled turn reads nothing more
		return nil, err
	}
	select {
	case c, ok := <-s.chunks:
		if !ok {
			return nil, io.EOF
		}
		return c, nil
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

func (s *feedStream) Close() error { return nil }

// TestWithTimeouts_Idle: chunks 4s apart pass a 5s idle timeout (the
// timer restarts at each chunk); 5s of silence then ends the turn with a
// timeout Error, 5s after the last chunk.
func TestWithTimeouts_Idle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fm := &feedModel{chunks: make(chan model.Chunk)}
		m := model.WithTimeouts(fm, model.Timeouts{Idle: 5 * time.Second})
		st, err := m.Stream(t.Context(), model.Request{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		go func() { // owned by the bubble: ends after its three sends
			for range 3 {
				time.Sleep(4 * time.Second) // virtual time: the server's pace
				fm.chunks <- &model.Text{Text: "x"}
			}
		}()
		for range 3 {
			if _, err := st.Recv(); err != nil {
				t.Fatalf("a chunk within the idle timeout: %v", err)
			}
		}
		last := time.Now()
		_, err = st.Recv()
		if model.CodeOf(err) != model.CodeTimeout || !errors.Is(err, model.ErrModel) || errors.Is(err, model.ErrTransient) {
			t.Fatalf("Recv after silence: %v (code %q), want a non-transient model error with code timeout", err, model.CodeOf(err))
		}
		if d := time.Since(last); d != 5*time.Second {
			t.Fatalf("timed out after %v of silence, want 5s", d)
		}
	})
}

// TestWithTimeouts_IdleCountsOnlyTheWait: a caller that takes 10s over
// each chunk (a slow journal holding the turn back) is not timed out by a
// 5s idle timeout while the model has its next chunk ready.
func TestWithTimeouts_IdleCountsOnlyTheWait(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fm := &feedModel{chunks: make(chan model.Chunk, 3)}
		for range 3 {
			fm.chunks <- &model.Text{Text: "x"}
		}
		close(fm.chunks)
		st, err := model.WithTimeouts(fm, model.Timeouts{Idle: 5 * time.Second}).Stream(t.Context(), model.Request{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		for {
			time.Sleep(10 * time.Second) // virtual time: the caller's work on the chunk
			_, err := st.Recv()
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatalf("Recv: %v, want the chunks then io.EOF", err)
			}
		}
	})
}

// TestWithTimeouts_IdleBeforeFirstChunk: a Stream that gets no answer
// fails with the timeout Error after the idle timeout.
func TestWithTimeouts_IdleBeforeFirstChunk(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fm := &feedModel{chunks: make(chan model.Chunk), start: make(chan struct{})}
		m := model.WithTimeouts(fm, model.Timeouts{Idle: 5 * time.Second, Turn: time.Minute})
		start := time.Now()
		_, err := m.Stream(t.Context(), model.Request{})
		if model.CodeOf(err) != model.CodeTimeout {
			t.Fatalf("Stream: %v, want code timeout", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Fatalf("after %v, want 5s", d)
		}
	})
}

// TestWithTimeouts_Turn: a chunk every second never trips the idle
// timeout, but the turn deadline ends the turn.
func TestWithTimeouts_Turn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fm := &feedModel{chunks: make(chan model.Chunk)}
		m := model.WithTimeouts(fm, model.Timeouts{Idle: 5 * time.Second, Turn: 30 * time.Second})
		start := time.Now()
		st, err := m.Stream(t.Context(), model.Request{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		stop := make(chan struct{})
		defer close(stop)
		go func() { // owned by the test: ends when stop closes
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
				select {
				case fm.chunks <- &model.Text{Text: "x"}:
				case <-stop:
					return
				}
			}
		}()
		for {
			_, err := st.Recv()
			if err == nil {
				continue
			}
			if model.CodeOf(err) != model.CodeTimeout {
				t.Fatalf("Recv: %v, want code timeout", err)
			}
			break
		}
		if d := time.Since(start); d != 30*time.Second {
			t.Fatalf("turn ended after %v, want 30s", d)
		}
	})
}

// TestWithTimeouts_CallerCancel: the caller's cancellation is still the
// context's error, not a timeout.
func TestWithTimeouts_CallerCancel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fm := &feedModel{chunks: make(chan model.Chunk)}
		m := model.WithTimeouts(fm, model.Timeouts{Idle: 5 * time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		st, err := m.Stream(ctx, model.Request{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		time.AfterFunc(time.Second, cancel)
		if _, err := st.Recv(); !errors.Is(err, context.Canceled) || model.CodeOf(err) != "" {
			t.Fatalf("Recv after cancel: %v, want context.Canceled", err)
		}
	})
}

// TestWithTimeouts_Off: no bound returns the model itself.
func TestWithTimeouts_Off(t *testing.T) {
	t.Parallel()
	fm := &feedModel{}
	if m := model.WithTimeouts(fm, model.Timeouts{}); m != model.Model(fm) {
		t.Fatalf("WithTimeouts with no bound = %T, want the model itself", m)
	}
}
