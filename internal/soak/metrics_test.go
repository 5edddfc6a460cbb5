package soak

import (
	"strings"
	"testing"
)

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
conclave_hubs 7
conclave_hubs_extra 1000
conclave_runs{status="finished"} 10
conclave_runs{status="failed"} 2
conclave_runs{status="odd}\"name"} 1 1712345678000
conclave_stream_connections{transport="sse"} 3
conclave_stream_connections{transport="ws"} 4
conclave_events_published_total 1.2345e+06
process_cpu_seconds_total 9
`
	want := map[string]bool{"go_goroutines": true, "conclave_hubs": true, "conclave_runs": true,
		"conclave_stream_connections": true, "conclave_events_published_total": true, "conclave_runs_live": true}
	got, err := parseMetrics(strings.NewReader(text), want)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]float64{
		"go_goroutines": 42, "conclave_hubs": 7, "conclave_runs": 13,
		"conclave_stream_connections": 7, "conclave_events_published_total": 1234500,
	} {
		if got[name] != v {
			t.Errorf("%s = %v, want %v", name, got[name], v)
		}
	}
	if _, ok := got["conclave_runs_live"]; ok {
		t.Error("an absent metric is in the map")
	}
	if _, ok := got["process_cpu_seconds_total"]; ok {
		t.Error("a metric not asked for is in the map")
	}
}

func TestParseMetrics_Malformed(t *testing.T) {
	t.Parallel()
	want := map[string]bool{"conclave_hubs": true}
	for _, text := range []string{
		"conclave_hubs many\n",
		"conclave_hubs{a=\"b\" 3\n",
		"conclave_hubs{a=\"b\"}\n",
	} {
		if _, err := parseMetrics(strings.NewReader(text), want); err == nil {
			t.Errorf("%q: no error", text)
		}
	}
}

func TestLabelsEnd(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{
		`{} 1`:                 2,
		`{a="b"} 1`:            7,
		`{a="}"} 1`:            7,
		`{a="\"}"} 1`:          9,
		`{a="b",c="d\\"} 1`:    15,
		`{a="b"`:               -1,
		`{a="}`:                -1,
		`{a="x\\\"}",b=""} 12`: 17,
	} {
		if got := labelsEnd([]byte(in)); got != want {
			t.Errorf("labelsEnd(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestLiveHeap(t *testing.T) {
	t.Parallel()
	if got := liveHeap(200<<20, 100); got != 100<<20 {
		t.Errorf("GOGC 100: %d", got)
	}
	if got := liveHeap(150<<20, 50); got != 100<<20 {
		t.Errorf("GOGC 50: %d", got)
	}
	if got := liveHeap(150<<20, -1); got != 0 {
		t.Errorf("GC off: %d", got)
	}
}
