package fanout

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives its test: every
// server, client and publisher the harness starts must stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
