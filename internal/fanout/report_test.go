package fanout

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestWriteTable(t *testing.T) {
	t.Parallel()
	res := &Result{Transport: TransportSSE, Clients: 1000, Rate: 1500, Offered: 1.5e6, Duration: 10 * time.Second,
		Payload: 100, FlushDelay: 5 * time.Millisecond, CPUs: 2, Modes: []ModeResult{
			{Mode: ModeConclave, DeliveredPerSec: 1.499e6, Delivered: 15e6, Expected: 15e6,
				Latency: LatencySummary{P99: 40 * time.Millisecond}, IdleRSSPerClient: 5000, Elapsed: 10 * time.Second},
			{Mode: ModeNaive, DeliveredPerSec: 5.6e5, Delivered: 5e6, Expected: 15e6, Lost: 10e6,
				Latency: LatencySummary{P99: 900 * time.Millisecond}, IdleRSSPerClient: 30000,
				OtherCPUSeconds: 5, Elapsed: 10 * time.Second},
		}}
	var b bytes.Buffer
	if err := WriteTable(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	// cells returns the cells of the row labelled label.
	cells := func(label string) string {
		for line := range strings.Lines(out) {
			if rest, ok := strings.CutPrefix(line, label+"  "); ok {
				return strings.Join(strings.Fields(rest), " | ")
			}
		}
		return "<no row>"
	}
	for label, want := range map[string]string{
		"":                           "conclave | naive",
		"delivered/s (steady state)": "1,499,000 | 560,000",
		"lost":                       "0 | 10,000,000",
		"latency p99 (ms)":           "40.00 | 900.00",
		"idle KB/subscriber (RSS)":   "4.9 | 29.3",
	} {
		if got := cells(label); got != want {
			t.Errorf("row %q = %q, want %q\n%s", label, got, want, out)
		}
	}
	for _, want := range []string{
		"fan-out over SSE: 1000 clients, 1,500 events/s (1,500,000 deliveries/s offered)",
		"warning: naive: other processes used 5.0",
		"MET    sustains 1.5M deliveries/s",
		"MET    p99 ≤ 50 ms at 1.5M deliveries/s (SSE)",
		"MET    idle memory ≤ 12 KB/subscriber",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "warning: conclave") {
		t.Errorf("warned about a clean run:\n%s", out)
	}

	// A run offering less than the target rates is not judged on them.
	res.Rate, res.Offered = 1, 1000
	b.Reset()
	if err := WriteTable(&b, res); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "sustains") || strings.Contains(out, "p99 ≤") ||
		!strings.Contains(out, "MET    idle memory") {
		t.Errorf("idle run judged on rate targets:\n%s", out)
	}
}
