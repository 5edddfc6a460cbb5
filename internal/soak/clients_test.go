package soak

import (
	"errors"
	"testing"

	"github.com/conclave-ai/conclave/messages"
)

func TestStreamCheck(t *testing.T) {
	t.Parallel()
	type ev struct {
		seq uint64
		typ messages.EventType
	}
	const td, tr = messages.TextDelta, messages.ReplayTruncated
	for _, tc := range []struct {
		name   string
		cursor uint64
		events []ev
		gaps   []GapError
	}{
		{"from the start", 0, []ev{{1, td}, {2, td}, {3, messages.RunFinished}}, nil},
		{"from a cursor", 40, []ev{{41, td}, {42, td}}, nil},
		{"first event missing", 0, []ev{{2, td}, {3, td}}, []GapError{{0, 2}}},
		{"a hole, counted once", 5, []ev{{6, td}, {9, td}, {10, td}}, []GapError{{6, 9}}},
		{"a repeat", 0, []ev{{1, td}, {2, td}, {2, td}, {3, td}}, []GapError{{2, 2}}},
		{"replay_truncated jumps", 3, []ev{{99, tr}, {100, td}, {101, td}}, nil},
		{"replay_truncated at the next seq", 3, []ev{{4, tr}, {5, td}}, nil},
		{"a gap after replay_truncated", 3, []ev{{99, tr}, {101, td}}, []GapError{{99, 101}}},
		{"replay_truncated going back", 10, []ev{{11, td}, {5, tr}}, []GapError{{11, 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := streamCheck{last: tc.cursor}
			var gaps []GapError
			for _, e := range tc.events {
				if err := c.observe(e.seq, e.typ); err != nil {
					var ge *GapError
					if !errors.As(err, &ge) {
						t.Fatalf("error %v is not a GapError", err)
					}
					gaps = append(gaps, *ge)
				}
			}
			if len(gaps) != len(tc.gaps) {
				t.Fatalf("gaps %v, want %v", gaps, tc.gaps)
			}
			for i := range gaps {
				if gaps[i] != tc.gaps[i] {
					t.Errorf("gap %d = %v, want %v", i, gaps[i], tc.gaps[i])
				}
			}
		})
	}
}

func TestGapError(t *testing.T) {
	t.Parallel()
	if got := (&GapError{After: 6, Got: 9}).Error(); got != "seq 9 after seq 6: 2 events missing" {
		t.Errorf("got %q", got)
	}
	if got := (&GapError{After: 6, Got: 6}).Error(); got != "seq 6 after seq 6: a repeat or out of order" {
		t.Errorf("got %q", got)
	}
}
