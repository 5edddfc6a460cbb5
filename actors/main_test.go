package actors_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives its test: every
// engine a test starts must shut down completely.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
