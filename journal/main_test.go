package journal_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests: Close must
// stop the committer and the store's goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
