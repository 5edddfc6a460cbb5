package actors

import (
	"github.com/conclave-ai/conclave/actors/runstate"
	"github.com/conclave-ai/conclave/messages"
)

// SetApplyHook makes f see every event a run or team supervisor applies to
// its state, with the supervisor's graph right after (nil before the
// plan). It returns the function that removes the hook. Tests that set it
// must not run in parallel with others.
func SetApplyHook(f func(run messages.RunID, graph messages.StreamID, p messages.Payload, g *runstate.Graph)) (remove func()) {
	testHookApplied.Store(&f)
	return func() { testHookApplied.Store(nil) }
}
