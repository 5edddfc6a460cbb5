package retry_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/internal/retry"
)

var errDown = errors.New("down")

func TestUntil_RetriesWithBackoffUntilSuccess(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var log bytes.Buffer
		start := time.Now()
		var at []time.Duration
		err := retry.Until(context.Background(), start.Add(time.Minute), slog.New(slog.NewTextHandler(&log, nil)), "the stream", func(context.Context) error {
			at = append(at, time.Since(start))
			if len(at) < 5 {
				return errDown
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, 700 * time.Millisecond, 1500 * time.Millisecond}
		if len(at) != len(want) {
			t.Fatalf("attempts at %v, want %v", at, want)
		}
		for i := range want {
			if at[i] != want[i] {
				t.Fatalf("attempts at %v, want %v", at, want)
			}
		}
		if n := strings.Count(log.String(), "waiting for the stream"); n != 4 {
			t.Fatalf("logged %d waits, want 4:\n%s", n, log.String())
		}
	})
}

func TestUntil_GivesUpAtTheDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		attempts := 0
		err := retry.Until(context.Background(), start.Add(10*time.Second), slog.New(slog.DiscardHandler), "x", func(context.Context) error {
			attempts++
			return errDown
		})
		if !errors.Is(err, errDown) {
			t.Fatalf("err = %v, want errDown", err)
		}
		// 0, .1, .3, .7, 1.5, 3.1, 5.1, 7.1, 9.1, 10 (the last wait is cut at the deadline)
		if elapsed := time.Since(start); elapsed != 10*time.Second || attempts != 10 {
			t.Fatalf("gave up after %v and %d attempts, want 10s and 10", elapsed, attempts)
		}
	})
}

func TestUntil_PermanentErrorStopsAtOnce(t *testing.T) {
	t.Parallel()
	attempts := 0
	err := retry.Until(context.Background(), time.Now().Add(time.Hour), slog.New(slog.DiscardHandler), "x", func(context.Context) error {
		attempts++
		return retry.Permanent(errDown)
	})
	if err != errDown || attempts != 1 {
		t.Fatalf("Until = %v after %d attempts, want errDown after 1", err, attempts)
	}
}

func TestUntil_ContextEndsIt(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := retry.Until(ctx, start.Add(time.Hour), slog.New(slog.DiscardHandler), "x", func(context.Context) error { return errDown })
		if !errors.Is(err, errDown) || time.Since(start) != time.Second {
			t.Fatalf("Until = %v after %v, want errDown after 1s (the context's end)", err, time.Since(start))
		}
	})
}
