package audit

import "github.com/conclave-ai/conclave/messages"

// RecordKey is recordKey, for the tests that tamper with the store.
func RecordKey(t messages.TenantID, index uint64) []byte { return recordKey(t, index) }

// HeadKey is headKey, for the tests that tamper with the store.
func HeadKey(t messages.TenantID) []byte { return headKey(t) }
