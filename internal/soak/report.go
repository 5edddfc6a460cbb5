package soak

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conclave-ai/conclave/internal/benchkit"
	"github.com/conclave-ai/conclave/messages"
)

// timelineRows bounds the timeline of the text report (the JSON has every
// sample).
const timelineRows = 12

// WriteReport prints res as text: the settings, the runs, the streams, the
// server's figures, the growth table, the verdict on the bound and a
// timeline.
func WriteReport(w io.Writer, res *Result) error {
	sessions := "a new session per run"
	if res.Sessions > 0 {
		sessions = benchkit.Group(float64(res.Sessions), 0) + " sessions reused"
	}
	fmt.Fprintf(w, "soak: %s runs, %d in flight, %s, %s SSE clients (pause ≤ %v), scenario %s\n",
		benchkit.Group(float64(res.Runs), 0), res.InFlight, sessions, benchkit.Group(float64(res.Clients), 0),
		res.ClientPause, res.Scenario)
	rest := ""
	if res.RestWait > 0 {
		rest = fmt.Sprintf(", then a rest of %s until the hubs went idle", seconds(res.RestWait))
	}
	fmt.Fprintf(w, "warm-up: the first %s of runs (%s)%s; a sample every %v; server: hubs idle after %v, heartbeat %v; %d CPUs, %s\n\n",
		pct(res.Warmup), benchkit.Group(float64(res.WarmupRuns), 0), rest, res.Sample, res.HubIdleAfter, res.Heartbeat, res.CPUs, res.GoVersion)

	rt, st := res.RunTally, res.Streams
	var rows [][2]string
	row := func(name, value string) { rows = append(rows, [2]string{name, value}) }
	head := func(name string) { rows = append(rows, [2]string{name, ""}) }
	n := func(v int64) string { return benchkit.Group(float64(v), 0) }

	head("runs")
	row("  created (201)", fmt.Sprintf("%s of %s", n(int64(rt.Created)), n(int64(rt.Requested))))
	row("  ended finished", n(int64(rt.Outcomes[messages.StatusFinished])))
	row("  not finished", n(int64(rt.NotFinished))+outcomes(rt))
	row("  not created", n(sum(rt.Errors))+counts(rt.Errors))
	row("  429s retried", n(sum(rt.Retried))+counts(rt.Retried))
	row("  failed polls", n(sum(rt.PollErrors))+counts(rt.PollErrors))
	row("  run time p50 / p99 / max (ms)", fmt.Sprintf("%s / %s / %s (as polled)", ms(rt.Duration.P50), ms(rt.Duration.P99), ms(rt.Duration.Max)))
	row("  runs/s", fmt.Sprintf("%.1f (drive %s)", res.RunsPerSec, seconds(res.Drive)))
	row("  events published", fmt.Sprintf("%s (%s/s)", n(int64(res.EventsPublished)), benchkit.Group(res.EventsPerSec, 0)))
	head("streams")
	row("  connections", fmt.Sprintf("%s (%s from seq 1, %s with Last-Event-ID)", n(st.Connections), n(st.FromStart), n(st.WithCursor)))
	row("  events read", n(st.Events))
	row("  visits: to the run's end / enough read / held "+maxVisit.String(),
		fmt.Sprintf("%s / %s / %s", n(st.ReachedTerminal), n(st.ReadEnough), n(st.HeldToLimit)))
	row("  gaps", n(st.Gaps))
	row("  ended by the server", n(st.ServerEnded))
	row("  refused", n(sum(st.Refused))+counts(st.Refused))
	row("  dial errors", n(st.DialErrors))
	if st.Truncations > 0 {
		row("  replay_truncated", n(st.Truncations))
	}
	head("server")
	perRun := ""
	if ended := rt.Created - rt.TimedOut; ended > 0 {
		perRun = fmt.Sprintf(", %.2f ms per run", 1000*res.ServerCPUDrive/float64(ended))
	}
	row("  CPU s while driving / in all", fmt.Sprintf("%.1f / %.1f%s", res.ServerCPUDrive, res.ServerCPUTotal, perRun))
	row("  this process's CPU s (driver, clients)", fmt.Sprintf("%.1f", res.ClientCPU))
	row("  other processes' CPU s", fmt.Sprintf("%.1f", res.OtherCPU))
	row("  data directory (MB)", fmt.Sprintf("%.1f", float64(res.DataBytes)/(1<<20)))
	row("  log lines at WARN or above", strconv.Itoa(res.ServerLogProblems))
	writeFields(w, rows)
	fmt.Fprintln(w)

	writeGrowth(w, res.Summary)
	fmt.Fprintln(w)

	fmt.Fprintf(w, "bound (issue 11): after the warm-up, RSS and goroutines within %s of their value at its end\n", pct(res.Bound-1))
	verdict := func(held bool, name, how string) {
		mark := "HELD    "
		if !held {
			mark = "EXCEEDED"
		}
		fmt.Fprintf(w, "  %s %-11s %s\n", mark, name, how)
	}
	for _, f := range []struct {
		name string
		g    Growth
	}{{"RSS", res.Summary.RSS}, {"goroutines", res.Summary.Goroutines}} {
		if f.g.Samples == 0 {
			fmt.Fprintf(w, "  UNKNOWN  %-11s no sample after the warm-up\n", f.name)
			continue
		}
		verdict(f.g.Held(res.Bound), f.name, fmt.Sprintf("max %.3f× while driving (%d samples)", f.g.MaxRatio, f.g.Samples))
		verdict(f.g.TrendHeld(res.Bound), f.name, fmt.Sprintf("trend %.3f× (median of the window's second half over its first half)", f.g.Trend))
		if f.g.HasIdle {
			verdict(f.g.IdleHeld(res.Bound), f.name, fmt.Sprintf("%.3f× after the hubs went idle", f.g.IdleRatio))
		}
		if f.g.HasRest && f.g.HasIdle {
			verdict(f.g.RestHeld(res.Bound), f.name, fmt.Sprintf("rest to rest %.3f× (at rest after the drive over at rest after the warm-up)", f.g.RestRatio))
		}
	}
	if st.Gapless() {
		fmt.Fprintf(w, "  streams gapless: yes (%s streams, %s events)\n", n(st.Connections), n(st.Events))
	} else {
		fmt.Fprintf(w, "  streams gapless: NO, %s gaps\n", n(st.Gaps))
	}
	switch {
	case res.Held() && res.IdleHeld():
		fmt.Fprintln(w, "  => the 10 % bound held")
	case res.Held():
		fmt.Fprintln(w, "  => the 10 % bound held while driving, not after the hubs went idle")
	case res.TrendHeld() && res.RestHeld():
		fmt.Fprintln(w, "  => no growth: the trend and rest to rest held within 10 %; single samples under load went over it (they follow the connected streams and the GC)")
	case res.TrendHeld():
		fmt.Fprintln(w, "  => no growth: the trend held within 10 %, but single samples went over the bound (peaks, or caches still filling)")
	default:
		fmt.Fprintln(w, "  => the 10 % bound did NOT hold")
	}

	var notes []string
	// Only a new session per run piles hubs up; reused sessions keep theirs.
	if settle := settleTime(res); res.Sessions == 0 && res.WarmupTook < settle {
		notes = append(notes, fmt.Sprintf("the warm-up took %s, less than the %s a finished session's hub may stay in memory "+
			"(1.5 × hub-idle-after, plus two heartbeats while the server has not noticed that a client left): "+
			"hubs were still piling up when it ended, so hubs, RSS and goroutines may grow after it without a leak; "+
			"a larger --warmup or a shorter --hub-idle-after tells the two apart", seconds(res.WarmupTook), seconds(settle)))
	}
	if res.RestWait > 0 && !res.RestedIdle {
		notes = append(notes, fmt.Sprintf("the hubs did not all go idle within %s of the warm-up's end: the rest to rest reading compares unlike states", seconds(res.RestWait)))
	}
	if !res.HubsIdle {
		notes = append(notes, fmt.Sprintf("the hubs did not all go idle within %s of the driver's end", seconds(res.IdleWait)))
	}
	if budget := float64(res.CPUs) * res.Drive.Seconds(); budget > 0 && res.OtherCPU > 0.1*budget {
		notes = append(notes, fmt.Sprintf("other processes used %.1f of the machine's %.1f CPU seconds; the rates are skewed", res.OtherCPU, budget))
	}
	if res.ServerExit != "" {
		notes = append(notes, "the server's exit: "+res.ServerExit)
	}
	for _, ex := range slices.Concat(st.GapExamples, st.EndedExamples, st.OtherExamples, res.ServerLogFirst) {
		notes = append(notes, ex)
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, s := range notes {
			fmt.Fprintf(w, "note: %s\n", s)
		}
	}
	fmt.Fprintln(w)
	writeTimeline(w, res.Samples)
	_, err := fmt.Fprintln(w)
	return err
}

// settleTime is how long a finished session's hub may stay in memory: a
// hub stops within 1.5 × HubIdleAfter of its session's last activity, and a
// stream whose client left counts as a subscriber until a heartbeat write
// fails (the second after the client's FIN).
func settleTime(res *Result) time.Duration {
	d := res.HubIdleAfter * 3 / 2
	if res.Clients > 0 {
		d += 2 * res.Heartbeat
	}
	return d
}

// writeFields prints name-value rows, the values left-aligned in a column.
func writeFields(w io.Writer, rows [][2]string) {
	width := 0
	for _, r := range rows {
		width = max(width, utf8.RuneCountInString(r[0]))
	}
	for _, r := range rows {
		if r[1] == "" {
			fmt.Fprintln(w, r[0])
			continue
		}
		fmt.Fprintf(w, "%s%s  %s\n", r[0], strings.Repeat(" ", width-utf8.RuneCountInString(r[0])), r[1])
	}
}

// writeGrowth prints the growth table: one row per figure.
func writeGrowth(w io.Writer, s Summary) {
	rows := [][]string{{"", "start", "warm-up end", "rest", "min", "max", "last", "max/warm-up", "idle", "idle/warm-up", "idle/rest"}}
	add := func(name string, g Growth, cell func(float64) string) {
		ratio := func(r float64) string {
			if g.WarmupEnd == 0 { // no reference: no ratio
				return "–"
			}
			return strconv.FormatFloat(r, 'f', 3, 64)
		}
		idle, idleRatio, rest, restRatio := "–", "–", "–", "–"
		if g.HasIdle {
			idle, idleRatio = cell(g.Idle), ratio(g.IdleRatio)
		}
		if g.HasRest {
			rest = cell(g.Rest)
			if g.HasIdle && g.Rest > 0 {
				restRatio = strconv.FormatFloat(g.RestRatio, 'f', 3, 64)
			}
		}
		rows = append(rows, []string{name, cell(g.Start), cell(g.WarmupEnd), rest, cell(g.Min), cell(g.Max), cell(g.Last),
			ratio(g.MaxRatio), idle, idleRatio, restRatio})
	}
	mib := func(v float64) string { return strconv.FormatFloat(v/(1<<20), 'f', 1, 64) }
	count := func(v float64) string { return benchkit.Group(v, 0) }
	add("RSS (MB)", s.RSS, mib)
	add("goroutines", s.Goroutines, count)
	add("heap in use (MB)", s.HeapInuse, mib)
	add("live heap at last GC (MB)", s.LiveHeap, mib)
	add("hubs", s.Hubs, count)
	add("runs live", s.RunsLive, count)
	add("runs known", s.RunsKnown, count)
	add("streams open", s.Streams, count)
	benchkit.WriteColumns(w, rows)
}

// writeTimeline prints at most timelineRows samples, evenly spread, always
// with the first, the warm-up's end and the last.
func writeTimeline(w io.Writer, samples []Sample) {
	if len(samples) == 0 {
		return
	}
	fmt.Fprintln(w, "timeline:")
	rows := [][]string{{"  t (s)", "phase", "runs ended", "RSS (MB)", "heap (MB)", "live heap (MB)", "goroutines", "hubs", "runs live", "runs known", "streams"}}
	for _, i := range timelineIndexes(samples, timelineRows) {
		s := samples[i]
		phase := string(s.Phase)
		if s.WarmupEnd {
			phase += " (warm-up end)"
		}
		r := []string{"  " + strconv.FormatFloat(s.Elapsed.Seconds(), 'f', 1, 64), phase, benchkit.Group(float64(s.RunsEnded), 0),
			strconv.FormatFloat(float64(s.RSS)/(1<<20), 'f', 1, 64)}
		if s.Err != "" {
			r = append(r, "metrics: "+s.Err)
		} else {
			r = append(r, strconv.FormatFloat(float64(s.HeapInuse)/(1<<20), 'f', 1, 64),
				strconv.FormatFloat(float64(s.LiveHeap)/(1<<20), 'f', 1, 64), benchkit.Group(float64(s.Goroutines), 0),
				benchkit.Group(float64(s.Hubs), 0), benchkit.Group(float64(s.RunsLive), 0), benchkit.Group(float64(s.RunsKnown), 0),
				benchkit.Group(float64(s.Streams), 0))
		}
		rows = append(rows, r)
	}
	benchkit.WriteColumns(w, rows)
}

// timelineIndexes picks at most n indexes of samples, evenly spread, with
// the first, the last and the warm-up's end always among them, in order.
func timelineIndexes(samples []Sample, n int) []int {
	keep := map[int]bool{0: true, len(samples) - 1: true}
	for i, s := range samples {
		if s.WarmupEnd {
			keep[i] = true
		}
	}
	for k := 0; len(keep) < n && k < n; k++ {
		keep[k*(len(samples)-1)/max(1, n-1)] = true
	}
	return slices.Sorted(maps.Keys(keep))
}

// sum adds up a tally's counts.
func sum[V int | int64](m map[string]V) int64 {
	var n int64
	for _, v := range m {
		n += int64(v)
	}
	return n
}

// counts formats m as " (code n, code n)" in code order, "" when empty.
func counts[V int | int64](m map[string]V) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %s", k, benchkit.Group(float64(m[k]), 0)))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// outcomes lists the statuses of the runs that did not finish.
func outcomes(rt RunTally) string {
	m := map[string]int{}
	for st, c := range rt.Outcomes {
		if st != messages.StatusFinished {
			m[string(st)] = c
		}
	}
	if rt.TimedOut > 0 {
		m["not seen to end"] = rt.TimedOut
	}
	return counts(m)
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
}

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s" }

// pct formats the fraction f as a percentage, to 0.01 %.
func pct(f float64) string { return strconv.FormatFloat(math.Round(f*1e4)/100, 'f', -1, 64) + " %" }
