package soak

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Metric names the sampler reads from the server's /metrics.
const (
	metricGoroutines = "go_goroutines"
	metricHeapInuse  = "go_memstats_heap_inuse_bytes"
	metricNextGC     = "go_memstats_next_gc_bytes"
	metricGOGC       = "go_gc_gogc_percent"
	metricHubs       = "conclave_hubs"
	metricRunsLive   = "conclave_runs_live"
	metricRunsKnown  = "conclave_runs" // by status: summed, the runs the server keeps an index entry for
	metricPublished  = "conclave_events_published_total"
	metricStreams    = "conclave_stream_connections"
	metricConnsOpen  = "conclave_connections_open"
)

// sampledMetrics are the metrics parseMetrics keeps.
var sampledMetrics = map[string]bool{
	metricGoroutines: true, metricHeapInuse: true, metricNextGC: true, metricGOGC: true, metricHubs: true, metricRunsLive: true,
	metricRunsKnown: true, metricPublished: true, metricStreams: true, metricConnsOpen: true,
}

// parseMetrics reads the Prometheus text exposition format and returns,
// for each name in want, the sum of its samples over all label sets.
// Comments and other metrics are skipped; a sample whose value does not
// parse is an error. A name absent from the text is absent from the map.
func parseMetrics(r io.Reader, want map[string]bool) (map[string]float64, error) {
	out := make(map[string]float64, len(want))
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		end := bytes.IndexAny(line, "{ \t")
		if end <= 0 {
			continue
		}
		name := line[:end]
		if !want[string(name)] {
			continue
		}
		rest := line[end:]
		if rest[0] == '{' {
			n := labelsEnd(rest)
			if n < 0 {
				return nil, fmt.Errorf("soak: metrics: unterminated labels in %q", line)
			}
			rest = rest[n:]
		}
		fields := bytes.Fields(rest) // value [timestamp]
		if len(fields) == 0 {
			return nil, fmt.Errorf("soak: metrics: no value in %q", line)
		}
		v, err := strconv.ParseFloat(string(fields[0]), 64)
		if err != nil {
			return nil, fmt.Errorf("soak: metrics: %q: %w", line, err)
		}
		out[string(name)] += v
	}
	return out, sc.Err()
}

// scrapeMetrics fetches base/metrics and parses the sampled metrics.
func scrapeMetrics(ctx context.Context, hc *http.Client, base string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("soak: GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("soak: GET /metrics: %s: %s", resp.Status, msg)
	}
	return parseMetrics(resp.Body, sampledMetrics)
}

// labelsEnd returns the length of the label set "{…}" at the start of b,
// or -1 if it does not close. Label values are quoted and may hold braces
// and escaped quotes.
func labelsEnd(b []byte) int {
	inQuote := false
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\\' && inQuote:
			i++ // the escaped character
		case c == '"':
			inQuote = !inQuote
		case c == '}' && !inQuote:
			return i + 1
		}
	}
	return -1
}

// liveHeap estimates the live heap at the last GC from the GC's heap goal,
// which is that live heap grown by GOGC percent (stacks and globals, also
// counted in the goal since Go 1.18, are small here). 0 when GOGC is off
// or unknown.
func liveHeap(nextGC, gogc float64) uint64 {
	if gogc <= 0 {
		return 0
	}
	return uint64(nextGC / (1 + gogc/100))
}
