package journal_test

import (
	"testing"

	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/testkit"
)

func TestMemory_Conformance(t *testing.T) {
	testkit.RunJournalSuite(t, func(*testing.T) journal.Journal { return journal.NewMemory() })
}
