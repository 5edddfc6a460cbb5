package cluster

import (
	"errors"
	"testing"
	"time"
)

// A member is late once its key showed no new revision for 3/4 of a
// lease, counted from the first read or the last new revision; a new
// revision restarts the count, and a key that is gone is late at once.
func TestRenewals_Observe(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newRenewals(4 * time.Second) // late after 3 s
	steps := []struct {
		at      time.Duration
		rev     uint64
		present bool
		late    bool
	}{
		{0, 7, true, false},
		{2 * time.Second, 7, true, false},
		{2999 * time.Millisecond, 7, true, false},
		{3 * time.Second, 8, true, false}, // renewed: the count restarts
		{5 * time.Second, 8, true, false},
		{6 * time.Second, 8, true, true},
	}
	for _, s := range steps {
		err := r.observe(t0.Add(s.at), s.rev, s.present)
		if (err != nil) != s.late || err != nil && !errors.Is(err, ErrOwnerLate) {
			t.Fatalf("at %v rev %d: %v, want late %v", s.at, s.rev, err, s.late)
		}
	}
	if err := newRenewals(4*time.Second).observe(t0, 0, false); !errors.Is(err, ErrOwnerLate) {
		t.Fatalf("a key that is gone: %v, want ErrOwnerLate", err)
	}
}

func TestRetryAfter(t *testing.T) {
	for lease, want := range map[time.Duration]int{time.Second: 1, 2 * time.Second: 1, 3 * time.Second: 2, 10 * time.Second: 5} {
		if got := retryAfter(lease); got != want {
			t.Errorf("retryAfter(%v) = %d, want %d", lease, got, want)
		}
	}
}
