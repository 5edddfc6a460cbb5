package journal_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// stamped returns events 1..n as the hub encodes them, event i stamped at
// t0 + i seconds.
func stamped(t *testing.T, n int) []*messages.Encoded {
	t.Helper()
	var out []*messages.Encoded
	for i := 1; i <= n; i++ {
		emit := &messages.Emit{RunID: "r1", AgentID: "a", Lane: messages.Lane{StreamID: "st"}, Payload: &messages.TextDeltaPayload{Delta: "hi"}}
		enc, err := messages.Encode(emit.Stamp(uuid.New(), uint64(i), t0.Add(time.Duration(i)*time.Second+123456789), "s"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, enc)
	}
	return out
}

func journals(t *testing.T) map[string]journal.Journal {
	return map[string]journal.Journal{
		"Memory":  journal.NewMemory(),
		"Durable": openDurable(t, t.TempDir(), journal.Options{}),
	}
}

func TestApplyRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := t0.Add(100*time.Second + 500*time.Millisecond)
	for _, c := range []struct {
		name      string
		r         journal.Retention
		wantFirst uint64
		plainJSON bool // events without a timestamp
	}{
		{"KeepAll", journal.Retention{}, 1, false},
		{"ByCount", journal.Retention{MaxEvents: 30}, 71, false},
		{"ByCountMoreThanHead", journal.Retention{MaxEvents: 1000}, 1, false},
		{"ByAge", journal.Retention{MaxAge: 30 * time.Second}, 71, false}, // event 70 at t0+70.12s < now-30s
		{"ByAgeEverything", journal.Retention{MaxAge: time.Millisecond}, 101, false},
		{"AgeWins", journal.Retention{MaxAge: 10 * time.Second, MaxEvents: 50}, 91, false},
		{"CountWins", journal.Retention{MaxAge: 90 * time.Second, MaxEvents: 5}, 96, false},
		{"NoTimestampKeeps", journal.Retention{MaxAge: time.Millisecond}, 1, true},
		{"NoTimestampByCount", journal.Retention{MaxAge: time.Millisecond, MaxEvents: 10}, 91, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for name, j := range journals(t) {
				evs := stamped(t, 100)
				if c.plainJSON {
					evs = events(1, 100)
				}
				if err := j.Append(ctx, "s", evs); err != nil {
					t.Fatal(err)
				}
				trimmed, err := journal.ApplyRetention(ctx, j, "s", c.r, now)
				if err != nil || trimmed != c.wantFirst-1 {
					t.Fatalf("%s: ApplyRetention = %d, %v; want %d trimmed", name, trimmed, err, c.wantFirst-1)
				}
				if f, _ := j.First(ctx, "s"); f != c.wantFirst {
					t.Fatalf("%s: First = %d, want %d", name, f, c.wantFirst)
				}
				if h, _ := j.Head(ctx, "s"); h != 100 {
					t.Fatalf("%s: Head = %d after retention", name, h)
				}
				if again, err := journal.ApplyRetention(ctx, j, "s", c.r, now); err != nil || again != 0 {
					t.Fatalf("%s: second ApplyRetention = %d, %v; want 0", name, again, err)
				}
				_ = j.Close()
			}
		})
	}
	t.Run("UnknownSession", func(t *testing.T) {
		for name, j := range journals(t) {
			if n, err := journal.ApplyRetention(ctx, j, "nobody", journal.Retention{MaxEvents: 1}, now); n != 0 || err != nil {
				t.Fatalf("%s: ApplyRetention of an unknown session = %d, %v", name, n, err)
			}
			_ = j.Close()
		}
	})
}

func TestDurable_ApplyRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openDurable(t, t.TempDir(), journal.Options{})
	if err := d.Append(ctx, "s", stamped(t, 10)); err != nil {
		t.Fatal(err)
	}
	n, err := d.ApplyRetention(ctx, "s", journal.Retention{MaxAge: 5 * time.Second}, t0.Add(10*time.Second))
	if err != nil || n != 4 {
		t.Fatalf("ApplyRetention = %d, %v; want 4", n, err)
	}
}

func TestEventTime(t *testing.T) {
	t.Parallel()
	enc := stamped(t, 3)[2]
	ts, ok := journal.EventTime(enc.JSON)
	if want := t0.Add(3*time.Second + 123456789); !ok || !ts.Equal(want) {
		t.Fatalf("EventTime = %v, %v; want %v", ts, ok, want)
	}
	for _, bad := range []string{``, `{"seq":1}`, `{"timestamp":"yesterday"}`, `{"timestamp":"2026-01-01T00:00:00Z`} {
		if ts, ok := journal.EventTime([]byte(bad)); ok {
			t.Fatalf("EventTime(%s) = %v, true", bad, ts)
		}
	}
}
