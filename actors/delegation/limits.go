// Package delegation holds the bookkeeping of agents that delegate: the
// round limits of a delegation chain (Limits) and a supervisor's table of
// async tasks (AsyncTasks).
//
// Round limits follow SynthOrg's coordination service: a chain of Soft
// rounds or more gets a warning, one of twice Soft or more is aborted with a
// *RoundLimitError.
package delegation

import (
	"errors"
	"fmt"

	"github.com/conclave-ai/conclave/messages"
)

// ErrRoundLimit matches every *RoundLimitError through errors.Is.
var ErrRoundLimit = errors.New("delegation: round limit reached")

// Verdict is what Limits.Check says about a delegation round.
type Verdict int

// Verdicts, in increasing severity.
const (
	// OK: below the soft limit.
	OK Verdict = iota
	// SoftLimit: at or above the soft limit; delegate, with a warning.
	SoftLimit
	// HardLimit: at or above twice the soft limit; abort.
	HardLimit
)

func (v Verdict) String() string {
	switch v {
	case OK:
		return "ok"
	case SoftLimit:
		return "soft_limit"
	case HardLimit:
		return "hard_limit"
	default:
		return fmt.Sprintf("Verdict(%d)", int(v))
	}
}

// Limits are the delegation round limits of a run. The zero value uses
// messages.DefaultMaxDelegationRounds.
type Limits struct {
	// Soft is the soft limit; Soft <= 0 means
	// messages.DefaultMaxDelegationRounds. The hard limit is 2×Soft.
	Soft int
}

// EffectiveSoft is the soft limit in force: Soft, or the default.
func (l Limits) EffectiveSoft() int {
	if l.Soft <= 0 {
		return messages.DefaultMaxDelegationRounds
	}
	return l.Soft
}

// Hard is the hard limit in force: twice EffectiveSoft.
func (l Limits) Hard() int { return 2 * l.EffectiveSoft() }

// Check classifies a delegation round: the length of the delegation chain
// that delegating again would make (SynthOrg counts len(delegation_chain)).
func (l Limits) Check(round int) Verdict {
	switch {
	case round >= l.Hard():
		return HardLimit
	case round >= l.EffectiveSoft():
		return SoftLimit
	default:
		return OK
	}
}

// Warns reports whether a delegation reaching round warns: only the one
// that makes its chain reach the soft limit, so a chain that goes deeper
// warns once, not at every round up to the hard limit.
func (l Limits) Warns(round int) bool { return round == l.EffectiveSoft() }

// Err returns a *RoundLimitError for a round at the hard limit or above,
// and nil for any other round.
func (l Limits) Err(round int) error {
	if l.Check(round) != HardLimit {
		return nil
	}
	return &RoundLimitError{Round: round, SoftLimit: l.EffectiveSoft()}
}

// RoundLimitError aborts a delegation that reached the hard limit, twice the
// soft limit. errors.Is(err, ErrRoundLimit) matches it.
type RoundLimitError struct {
	Round     int
	SoftLimit int
}

func (e *RoundLimitError) Error() string {
	return fmt.Sprintf("delegation round %d reached the hard limit 2×%d", e.Round, e.SoftLimit)
}

// Is reports whether target is ErrRoundLimit.
func (e *RoundLimitError) Is(target error) bool { return target == ErrRoundLimit }
