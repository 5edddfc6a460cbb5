package conclavetest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests: a
// harness shuts down its engines and ends its probes. protoactor's
// dead-letter throttle ends by itself after one interval (see
// actors/main_test.go).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}
