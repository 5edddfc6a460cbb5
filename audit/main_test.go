package audit_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives its test: every log
// a test opens must be closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
