package actors_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives its test: every
// engine a test starts must shut down completely. One exception: when
// dead letters are logged, protoactor's throttle starts a goroutine that
// waits out one throttle interval (actor/throttler.go) and then ends; it is
// not ours to stop and it stops by itself.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}
