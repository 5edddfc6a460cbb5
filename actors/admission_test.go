package actors

import (
	"errors"
	"testing"
	"time"
)

func TestAdmission_ConcurrentRuns(t *testing.T) {
	t.Parallel()
	a := newAdmission()
	now := time.Unix(1000, 0)
	l := Limits{ConcurrentRuns: 2, RunsPerSecond: -1}
	if err := a.admit("t1", l, now, 1); err != nil {
		t.Fatal(err)
	}
	var q *QuotaError
	if err := a.admit("t1", l, now, 2); !errors.As(err, &q) || q.Code != QuotaTooManyRuns || q.RetryAfter <= 0 || !errors.Is(err, ErrQuota) {
		t.Fatalf("third run: %v", err)
	}
	if err := a.admit("t1", Limits{ConcurrentRuns: -1, RunsPerSecond: -1}, now, 1000); err != nil {
		t.Fatalf("no limit: %v", err)
	}
}

func TestAdmission_RateAndRetryAfter(t *testing.T) {
	t.Parallel()
	a := newAdmission()
	now := time.Unix(1000, 0)
	l := Limits{RunsPerSecond: 2, RunBurst: 3}
	for i := range 3 {
		if err := a.admit("t", l, now, 0); err != nil {
			t.Fatalf("run %d within the burst: %v", i, err)
		}
	}
	if err := a.admit("other", l, now, 0); err != nil {
		t.Fatalf("another tenant has its own bucket: %v", err)
	}
	var q *QuotaError
	if err := a.admit("t", l, now, 0); !errors.As(err, &q) || q.Code != QuotaRateLimited {
		t.Fatalf("over the burst: %v", err)
	}
	if q.RetryAfter <= 0 || q.RetryAfter > 500*time.Millisecond {
		t.Fatalf("RetryAfter = %v, want (0, 500ms]", q.RetryAfter)
	}
	// A refused request does not use up a token: after RetryAfter exactly one more fits.
	later := now.Add(q.RetryAfter)
	if err := a.admit("t", l, later, 0); err != nil {
		t.Fatalf("after RetryAfter: %v", err)
	}
	if err := a.admit("t", l, later, 0); !errors.As(err, &q) {
		t.Fatal("second one after RetryAfter was admitted")
	}
}

func TestAdmission_FullBucketsArePruned(t *testing.T) {
	t.Parallel()
	a := newAdmission()
	now := time.Unix(1000, 0)
	l := Limits{RunsPerSecond: 1000, RunBurst: 10}
	for i := range pruneEvery - 1 {
		_ = a.admit("t", l, now.Add(time.Duration(i)*time.Millisecond), 0)
	}
	if len(a.limiters) != 1 {
		t.Fatalf("limiters = %d", len(a.limiters))
	}
	_ = a.admit("u", Limits{RunsPerSecond: -1}, now.Add(time.Hour), 0) // the pruning admission
	if len(a.limiters) != 0 {
		t.Fatalf("limiters after an idle hour = %d, want 0", len(a.limiters))
	}
}
