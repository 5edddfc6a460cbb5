package fanout

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

func TestParseTimestamp_MatchesTimeFormat(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	// Unix nanoseconds reach from 1677 to 2262.
	lo := time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(2200, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
	for i := range 20000 {
		ts := time.Unix(lo+r.Int64N(hi-lo), r.Int64N(1e9)).UTC()
		switch i % 4 { // trimmed fractions: none, milliseconds, microseconds
		case 1:
			ts = ts.Truncate(time.Second)
		case 2:
			ts = ts.Truncate(time.Millisecond)
		case 3:
			ts = ts.Truncate(time.Microsecond)
		}
		s := ts.Format(time.RFC3339Nano)
		if got, ok := parseUTC([]byte(s)); !ok || got != ts.UnixNano() {
			t.Fatalf("parseUTC(%s) = %d, %v; want %d", s, got, ok, ts.UnixNano())
		}
	}
}

func TestParseTimestamp_Forms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1970-01-01T00:00:00Z", 0, true},
		{"1970-01-01T00:00:00.000000001Z", 1, true},
		{"2026-02-28T23:59:59.5Z", time.Date(2026, 2, 28, 23, 59, 59, 5e8, time.UTC).UnixNano(), true},
		{"2024-02-29T12:00:00Z", time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC).UnixNano(), true},
		{"2026-11-21T10:34:41.123+02:00", time.Date(2026, 11, 21, 8, 34, 41, 123e6, time.UTC).UnixNano(), true}, // slow path
		{"2025-02-29T12:00:00Z", 0, false},
		{"2026-13-01T00:00:00Z", 0, false},
		{"2026-11-21T08:34:41.Z", 0, false},
		{"2026-11-21 08:34:41Z", 0, false},
		{"2026-11-21T08:34:4xZ", 0, false},
		{"", 0, false},
	} {
		got, ok := ParseTimestamp([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseTimestamp(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestFindTimestamp_Envelope reads the timestamp of a real encoded envelope,
// whose payload holds a look-alike key.
func TestFindTimestamp_Envelope(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 8, 34, 41, 123456700, time.UTC)
	emit := &messages.Emit{RunID: "r", AgentID: "a", Lane: messages.Lane{StreamID: "s"},
		Payload: &messages.TextDeltaPayload{Delta: `,"timestamp":"1999-01-01T00:00:00Z"`}}
	enc, err := messages.Encode(emit.Stamp([16]byte{1}, 42, at, "bench"))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := FindTimestamp(enc.JSON)
	if !ok || got != at.UnixNano() {
		t.Errorf("FindTimestamp = %d, %v; want %d in %s", got, ok, at.UnixNano(), enc.JSON)
	}
	if seq, ok := FindSeq(enc.JSON); !ok || seq != 42 {
		t.Errorf("FindSeq = %d, %v", seq, ok)
	}
	for _, b := range []string{`{"seq":1}`, `{"seq":1,"timestamp":"2026-11-21T08:34:41Z`} {
		if _, ok := FindTimestamp([]byte(b)); ok {
			t.Errorf("FindTimestamp(%s) found one", b)
		}
	}
}

// BenchmarkFindTimestamp is a council client's work per event for its lag.
func BenchmarkFindTimestamp(b *testing.B) {
	emit := &messages.Emit{RunID: "r", AgentID: "worker-17", Lane: messages.Lane{StreamID: "node:n17"},
		Payload: &messages.TextDeltaPayload{Delta: "lorem ipsum dolor sit amet"}}
	enc, err := messages.Encode(emit.Stamp([16]byte{1}, 123456, time.Now(), "bench"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, ok := FindTimestamp(enc.JSON); !ok {
			b.Fatal("not found")
		}
	}
}
