package actors

import (
	"testing"

	"github.com/conclave-ai/conclave/messages"
)

// TestOutcome_Claim: the first claim decides; an abort takes the place of
// a failure until the failure is sealed, and of nothing else.
func TestOutcome_Claim(t *testing.T) {
	t.Parallel()
	abort := func() decision {
		return decision{code: messages.ErrCodeAborted, msg: "aborted by request", abort: newAbortRecord("aborted by request")}
	}
	failed := decision{code: messages.ErrCodeNodeFailed, msg: "node n1 failed"}
	for _, tc := range []struct {
		name  string
		first *decision // nil: nothing decided
		seal  bool
		won   bool // the abort's claim
	}{
		{name: "undecided", won: true},
		{name: "failure being ended", first: &failed, won: true},
		{name: "failure sealed", first: &failed, seal: true},
		{name: "finished", first: &decision{}},
		{name: "budget", first: &decision{code: messages.ErrCodeBudgetExceeded, msg: "over budget"}, won: true},
		{name: "recovered abort", first: &decision{code: messages.ErrCodeAborted, msg: "journaled before a crash"}},
		{name: "another abort", first: func() *decision { d := abort(); return &d }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var o outcome
			if tc.first != nil {
				if _, won := o.claim(*tc.first); !won {
					t.Fatal("the first claim lost")
				}
			}
			if tc.seal {
				o.seal()
			}
			a := abort()
			got, won := o.claim(a)
			if won != tc.won {
				t.Fatalf("abort claim won = %v, want %v (standing: %s)", won, tc.won, got)
			}
			if !won && (got.code != tc.first.code || got.msg != tc.first.msg) {
				t.Fatalf("standing decision %+v, want %+v", got, *tc.first)
			}
			if won && got.abort != a.abort {
				t.Fatalf("standing decision %+v, want the abort", got)
			}
			sealed, ok := o.seal()
			if !ok || !sealed.sealed || (won && sealed.abort != a.abort) {
				t.Fatalf("seal = %+v, %v", sealed, ok)
			}
			if _, again := o.claim(abort()); again {
				t.Fatal("an abort took the place of a sealed decision")
			}
		})
	}
}
