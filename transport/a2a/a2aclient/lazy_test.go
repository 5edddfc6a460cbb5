package a2aclient_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/remote"
	"github.com/conclave-ai/conclave/transport/a2a"
	"github.com/conclave-ai/conclave/transport/a2a/a2aclient"
)

// TestLazy_Run: an agent unreachable at start is reached once it is up:
// a call within RedialAfter of the last fetch fails without fetching the
// card (ErrUnavailable), the next one after it fetches the card and runs
// the task; afterwards no card is fetched again.
func TestLazy_Run(t *testing.T) {
	t.Parallel()
	f, _ := newFake(t, sampleSubmitted+sampleWorking+sampleChunk1+sampleChunk2+sampleCompleted)
	var down atomic.Bool
	down.Store(true)
	var cards atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == a2a.CardPath {
			cards.Add(1)
			if down.Load() {
				http.Error(w, "starting", http.StatusServiceUnavailable)
				return
			}
		}
		f.handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	clock := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	cfg := a2aclient.Config{Header: http.Header{"Authorization": {"Bearer s3cret-token"}}}
	_, firstErr := a2aclient.Dial(t.Context(), srv.URL+a2a.CardPath, cfg)
	if firstErr == nil {
		t.Fatal("the card of an agent that is down was fetched")
	}
	l := a2aclient.NewLazy("research", srv.URL+a2a.CardPath, cfg, firstErr, 10*time.Second, now)
	var c collect
	if _, err := l.Run(t.Context(), remote.Request{Text: "goal"}, c.emit); !errors.Is(err, remote.ErrUnavailable) || cards.Load() != 1 {
		t.Fatalf("within RedialAfter: %v, %d card fetches (want ErrUnavailable, no new fetch)", err, cards.Load())
	}
	clock = clock.Add(10 * time.Second)
	if _, err := l.Run(t.Context(), remote.Request{Text: "goal"}, c.emit); !errors.Is(err, remote.ErrUnavailable) || cards.Load() != 2 {
		t.Fatalf("still down: %v, %d card fetches (want ErrUnavailable, one new fetch)", err, cards.Load())
	}
	down.Store(false)
	if _, err := l.Run(t.Context(), remote.Request{Text: "goal"}, c.emit); !errors.Is(err, remote.ErrUnavailable) || cards.Load() != 2 {
		t.Fatalf("up, within RedialAfter: %v, %d card fetches", err, cards.Load())
	}
	clock = clock.Add(10 * time.Second)
	res, err := l.Run(t.Context(), remote.Request{Text: "goal"}, c.emit)
	if err != nil || res.Outcome != remote.Completed || res.Output != "Hello world" || cards.Load() != 3 {
		t.Fatalf("up: %+v, %v, %d card fetches", res, err, cards.Load())
	}
	clock = clock.Add(time.Hour)
	if err := l.Cancel(t.Context(), "r-1"); err == nil || cards.Load() != 3 {
		// The fake has no CancelTask answer scripted: an RPC error, but no new card fetch.
		t.Fatalf("cancel after the fetch: %v, %d card fetches", err, cards.Load())
	}
}
