package soak

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

func testResult() *Result {
	warm := Sample{Elapsed: 6 * time.Second, Phase: PhaseDrive, WarmupEnd: true, RunsEnded: 4000, RSS: 200 << 20, Goroutines: 1000, Hubs: 3000}
	samples := []Sample{
		{Phase: PhaseStart, RSS: 30 << 20, Goroutines: 17},
		{Elapsed: 3 * time.Second, Phase: PhaseDrive, RunsEnded: 2000, RSS: 150 << 20, Goroutines: 900, Hubs: 2000},
		warm,
		{Elapsed: 9 * time.Second, Phase: PhaseRest, RunsEnded: 4000, RSS: 204 << 20, Goroutines: 18, Hubs: 10},
		{Elapsed: 10 * time.Second, Phase: PhaseRest, RunsEnded: 4000, RSS: 205 << 20, Goroutines: 19},
		{Elapsed: 20 * time.Second, Phase: PhaseDrive, RunsEnded: 12000, RSS: 260 << 20, Goroutines: 1050, Hubs: 9000},
		{Elapsed: 30 * time.Second, Phase: PhaseDrive, RunsEnded: 20000, RSS: 250 << 20, Goroutines: 1020, Hubs: 9500},
		{Elapsed: 60 * time.Second, Phase: PhaseIdle, RunsEnded: 20000, RSS: 210 << 20, Goroutines: 20},
	}
	return &Result{Runs: 20000, InFlight: 32, Clients: 1000, ClientPause: time.Second,
		Scenario: json.RawMessage(DefaultScenario), Warmup: 0.2, WarmupRuns: 4000, Sample: time.Second,
		HubIdleAfter: 10 * time.Second, Heartbeat: 10 * time.Second, CPUs: 2, GoVersion: "go1.26",
		RunTally: RunTally{Requested: 20000, Created: 19999, Errors: map[string]int{"unavailable": 1},
			Retried:  map[string]int{"too_many_runs": 12},
			Outcomes: map[messages.RunStatus]int{messages.StatusFinished: 19997, messages.StatusFailed: 2}, NotFinished: 2},
		Streams: StreamTally{Connections: 45000, FromStart: 22000, WithCursor: 23000, Events: 1234567,
			Refused: map[string]int64{"too_many_streams": 3}},
		Drive: 30 * time.Second, RestWait: 4 * time.Second, RestedIdle: true, WarmupTook: 6 * time.Second, RunsPerSec: 666.6, EventsPublished: 1300000, EventsPerSec: 43333,
		ServerCPUDrive: 40, ServerCPUTotal: 41, ClientCPU: 15, OtherCPU: 1, HubsIdle: true, Bound: Bound,
		Samples: samples, Summary: Summarize(samples)}
}

// cells returns the cells of the row of out that starts with label.
func cells(out, label string) string {
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(line, label+"  "); ok {
			return strings.Join(strings.Fields(rest), " | ")
		}
	}
	return "<no row>"
}

func TestWriteReport(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := WriteReport(&b, testResult()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for label, want := range map[string]string{
		"RSS (MB)":   "30.0 | 200.0 | 205.0 | 200.0 | 260.0 | 250.0 | 1.300 | 210.0 | 1.050 | 1.024",
		"goroutines": "17 | 1,000 | 19 | 1,000 | 1,050 | 1,020 | 1.050 | 20 | 0.020 | 1.053",
		"hubs":       "0 | 3,000 | 0 | 3,000 | 9,500 | 9,500 | 3.167 | 0 | 0.000 | –",
		"runs live":  "0 | 0 | 0 | 0 | 0 | 0 | – | 0 | – | –",
	} {
		if got := cells(out, label); got != want {
			t.Errorf("row %q = %q, want %q\n%s", label, got, want, out)
		}
	}
	for _, want := range []string{
		"soak: 20,000 runs, 32 in flight, a new session per run, 1,000 SSE clients (pause ≤ 1s)",
		`scenario {"nodes":3,"tokens":8,"synthesis_tokens":8}`,
		"warm-up: the first 20 % of runs (4,000), then a rest of 4.0 s until the hubs went idle;",
		"HELD     RSS         rest to rest 1.024×",
		"HELD     goroutines  rest to rest 1.053×",
		"created (201)",
		"19,999 of 20,000",
		"2 (failed 2)",
		"1 (unavailable 1)",
		"12 (too_many_runs 12)",
		"45,000 (22,000 from seq 1, 23,000 with Last-Event-ID)",
		"3 (too_many_streams 3)",
		"within 10 % of their value",
		"EXCEEDED RSS         max 1.300× while driving (3 samples)",
		"HELD     RSS         1.050× after the hubs went idle",
		"HELD     goroutines  max 1.050× while driving",
		"streams gapless: yes (45,000 streams, 1,234,567 events)",
		"=> the 10 % bound did NOT hold",
		"note: the warm-up took 6.0 s, less than the 35.0 s",
		"drive (warm-up end)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestWriteReport_Held(t *testing.T) {
	t.Parallel()
	res := testResult()
	res.Samples[5].RSS, res.Samples[6].RSS = 205<<20, 210<<20 // the two drive samples after the warm-up
	res.WarmupTook = time.Minute
	res.Streams.Gaps, res.Streams.GapExamples = 1, []string{"session s1, cursor : seq 9 after seq 6: 2 events missing"}
	res.Summary = Summarize(res.Samples)
	var b bytes.Buffer
	if err := WriteReport(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"HELD     RSS         max 1.050×",
		"=> the 10 % bound held",
		"streams gapless: NO, 1 gaps",
		"note: session s1, cursor : seq 9 after seq 6",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "the warm-up took") {
		t.Errorf("warned about a long enough warm-up:\n%s", out)
	}
}

func TestTimelineIndexes(t *testing.T) {
	t.Parallel()
	samples := make([]Sample, 100)
	samples[37].WarmupEnd = true
	got := timelineIndexes(samples, 12)
	if len(got) > 13 || got[0] != 0 || got[len(got)-1] != 99 || !slices.Contains(got, 37) || !slices.IsSorted(got) {
		t.Errorf("indexes %v", got)
	}
	if got := timelineIndexes(samples[:3], 12); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("3 samples: %v", got)
	}
}

func TestPct(t *testing.T) {
	t.Parallel()
	for f, want := range map[float64]string{0.2: "20 %", Bound - 1: "10 %", 0.125: "12.5 %", 0.33333: "33.33 %"} {
		if got := pct(f); got != want {
			t.Errorf("pct(%v) = %q, want %q", f, got, want)
		}
	}
}
