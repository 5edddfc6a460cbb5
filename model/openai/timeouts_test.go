package openai_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/openai"
	"github.com/conclave-ai/conclave/model/openai/openaitest"
)

// silentTimeouts are the bounds of the silent-server tests: the idle
// timeout fires first.
var silentTimeouts = model.Timeouts{Idle: 30 * time.Second, Turn: 10 * time.Minute}

// wantTimeout checks err is the idle timeout's *model.Error, took after
// the idle timeout of virtual time.
func wantTimeout(t *testing.T, err error, took time.Duration) {
	t.Helper()
	var me *model.Error
	if !errors.As(err, &me) || me.Code != model.CodeTimeout || !errors.Is(err, model.ErrModel) {
		t.Fatalf("error %v, want a *model.Error with code timeout", err)
	}
	if took != silentTimeouts.Idle {
		t.Fatalf("failed after %v of virtual time, want the idle timeout %v", took, silentTimeouts.Idle)
	}
}

// TestModel_IdleTimeoutAfterFirstChunk: a server that hangs after its
// first chunk ends the turn with a timeout 30s later (before: Recv waited
// for ever).
func TestModel_IdleTimeoutAfterFirstChunk(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		srv, err := openaitest.New(openaitest.Config{Replies: []openaitest.Reply{
			{Chunks: []openaitest.Chunk{openaitest.TextChunk("Half ")}, Hold: make(chan struct{})},
		}})
		if err != nil {
			t.Fatal(err)
		}
		m, stop := inMemory(t, srv, openai.Config{})
		defer stop()
		st, err := model.WithTimeouts(m, silentTimeouts).Stream(t.Context(), workerReq())
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if c, err := st.Recv(); err != nil || c.(*model.Text).Text != "Half " {
			t.Fatalf("first chunk %v, %v", c, err)
		}
		start := time.Now()
		_, err = st.Recv()
		wantTimeout(t, err, time.Since(start))
	})
}

// TestModel_IdleTimeoutKeepAliveOnly: a server that answers 200 and then
// sends only ": ping" comments every 10s is still silent: the turn fails
// with a timeout at the idle timeout, not retried.
func TestModel_IdleTimeoutKeepAliveOnly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		srv, err := openaitest.New(openaitest.Config{Replies: []openaitest.Reply{
			{Hold: make(chan struct{}), KeepAlive: 10 * time.Second},
		}})
		if err != nil {
			t.Fatal(err)
		}
		m, stop := inMemory(t, srv, openai.Config{})
		defer stop()
		start := time.Now()
		_, err = model.WithTimeouts(m, silentTimeouts).Stream(t.Context(), workerReq())
		wantTimeout(t, err, time.Since(start))
		if n := srv.Served(); n != 1 {
			t.Fatalf("%d requests, want 1 (a timeout is not retried)", n)
		}
	})
}

// TestModel_IdleTimeoutNoHeaders: a server that never sends its headers
// fails the turn at the idle timeout (before: only the default client's
// 5-minute header timeout bounded it, and a given client had none).
func TestModel_IdleTimeoutNoHeaders(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		srv, err := openaitest.New(openaitest.Config{Replies: []openaitest.Reply{{NoHeaders: true}}})
		if err != nil {
			t.Fatal(err)
		}
		m, stop := inMemory(t, srv, openai.Config{})
		defer stop()
		start := time.Now()
		_, err = model.WithTimeouts(m, silentTimeouts).Stream(t.Context(), workerReq())
		wantTimeout(t, err, time.Since(start))
	})
}

// TestModel_TurnDeadline: without an idle timeout, a held stream is cut
// at the turn deadline.
func TestModel_TurnDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		srv, err := openaitest.New(openaitest.Config{Replies: []openaitest.Reply{
			{Chunks: []openaitest.Chunk{openaitest.TextChunk("a")}, Hold: make(chan struct{})},
		}})
		if err != nil {
			t.Fatal(err)
		}
		m, stop := inMemory(t, srv, openai.Config{})
		defer stop()
		start := time.Now()
		st, err := model.WithTimeouts(m, model.Timeouts{Turn: 45 * time.Second}).Stream(t.Context(), workerReq())
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		_, err = st.Recv()
		if model.CodeOf(err) != model.CodeTimeout {
			t.Fatalf("Recv: %v, want code timeout", err)
		}
		if d := time.Since(start); d != 45*time.Second {
			t.Fatalf("turn ended after %v, want 45s", d)
		}
	})
}
