package fanout

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives its test: every
// server, client and publisher the harness starts must stop. One exception,
// as in the actors package: when dead letters are logged, protoactor's
// throttle starts a goroutine that waits out one throttle interval
// (actor/throttler.go) and then ends; it is not ours to stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}
