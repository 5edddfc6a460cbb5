package conclave_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests and
// examples: every engine, its handlers' streams included, must shut down
// completely. The one exception is protoactor's dead-letter throttle,
// which ends by itself after one interval (see actors/main_test.go).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}
