package delegation_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/conclave-ai/conclave/actors/delegation"
	"github.com/conclave-ai/conclave/messages"
)

func TestLimits_Check(t *testing.T) {
	t.Parallel()
	const (
		o = delegation.OK
		s = delegation.SoftLimit
		h = delegation.HardLimit
	)
	tests := []struct {
		soft int
		want [9]delegation.Verdict // rounds 0..8
	}{
		{1, [9]delegation.Verdict{o, s, h, h, h, h, h, h, h}},
		{2, [9]delegation.Verdict{o, o, s, s, h, h, h, h, h}},
		{3, [9]delegation.Verdict{o, o, o, s, s, s, h, h, h}},
		{0, [9]delegation.Verdict{o, o, o, s, s, s, h, h, h}},  // default 3
		{-1, [9]delegation.Verdict{o, o, o, s, s, s, h, h, h}}, // default 3
	}
	for _, tt := range tests {
		l := delegation.Limits{Soft: tt.soft}
		for round, want := range tt.want {
			if got := l.Check(round); got != want {
				t.Errorf("Limits{Soft: %d}.Check(%d) = %v, want %v", tt.soft, round, got, want)
			}
			err := l.Err(round)
			if (err != nil) != (want == delegation.HardLimit) {
				t.Errorf("Limits{Soft: %d}.Err(%d) = %v", tt.soft, round, err)
			}
			if err == nil {
				continue
			}
			var rle *delegation.RoundLimitError
			if !errors.As(err, &rle) || rle.Round != round || rle.SoftLimit != l.EffectiveSoft() {
				t.Errorf("Limits{Soft: %d}.Err(%d) = %#v", tt.soft, round, err)
			}
			if !errors.Is(err, delegation.ErrRoundLimit) {
				t.Errorf("Err(%d) does not match ErrRoundLimit", round)
			}
		}
	}
}

func TestLimits_Defaults(t *testing.T) {
	t.Parallel()
	var l delegation.Limits
	if l.EffectiveSoft() != messages.DefaultMaxDelegationRounds || l.Hard() != 2*messages.DefaultMaxDelegationRounds {
		t.Fatalf("zero Limits: soft %d hard %d", l.EffectiveSoft(), l.Hard())
	}
	if l := (delegation.Limits{Soft: 5}); l.EffectiveSoft() != 5 || l.Hard() != 10 {
		t.Fatalf("Soft 5: soft %d hard %d", l.EffectiveSoft(), l.Hard())
	}
}

func TestRoundLimitError(t *testing.T) {
	t.Parallel()
	err := delegation.Limits{}.Err(6)
	if got, want := err.Error(), "delegation round 6 reached the hard limit 2×3"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("agent n001: %w", err)
	var rle *delegation.RoundLimitError
	if !errors.Is(wrapped, delegation.ErrRoundLimit) || !errors.As(wrapped, &rle) || rle.Round != 6 {
		t.Fatalf("wrapped error does not match: %v", wrapped)
	}
	if errors.Is(errors.New("delegation round 6 reached the hard limit 2×3"), delegation.ErrRoundLimit) {
		t.Fatal("a look-alike error matches ErrRoundLimit")
	}
}

func TestVerdict_String(t *testing.T) {
	t.Parallel()
	for v, want := range map[delegation.Verdict]string{
		delegation.OK: "ok", delegation.SoftLimit: "soft_limit", delegation.HardLimit: "hard_limit", 7: "Verdict(7)",
	} {
		if got := v.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(v), got, want)
		}
	}
}

// TestLimits_Warns: a chain warns once, at the delegation that reaches the
// soft limit, not at every round between the soft and the hard limit.
func TestLimits_Warns(t *testing.T) {
	t.Parallel()
	l := delegation.Limits{Soft: 3}
	var warned []int
	for round := 1; round < l.Hard(); round++ {
		if l.Warns(round) {
			warned = append(warned, round)
		}
	}
	if len(warned) != 1 || warned[0] != 3 {
		t.Errorf("warned at rounds %v, want [3]", warned)
	}
	if !(delegation.Limits{}).Warns(messages.DefaultMaxDelegationRounds) {
		t.Error("the default soft limit does not warn")
	}
}
