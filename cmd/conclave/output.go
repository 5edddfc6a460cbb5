package main

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rivo/uniseg"

	"github.com/conclave-ai/conclave/messages"
)

// output writes a followed run to stdout. The follow loop calls it from one
// goroutine: event for each event of a batch read from the subscription,
// then flush; idle when no event arrived for a tick; aside before the
// command writes lines of its own to the terminal (a notice); prompt before
// it asks about interrupt id there (the status block stays on screen above
// it); answered when the engine took an answer to interrupt id (its
// interrupt_resolved event may come later); finish once, after the run's
// terminal event (nil when the run did not end).
type output interface {
	event(enc *messages.Encoded, env *messages.Envelope)
	flush() error
	idle() error
	aside() error
	prompt(id string) error
	answered(id string)
	finish(term *messages.Envelope) error
}

var (
	_ output = (*jsonOutput)(nil)
	_ output = (*plainOutput)(nil)
	_ output = (*ttyOutput)(nil)
)

// jsonOutput writes JSONL: each event's wire JSON on its own line, nothing else.
type jsonOutput struct{ w *bufio.Writer }

func (o *jsonOutput) event(enc *messages.Encoded, _ *messages.Envelope) {
	o.w.Write(enc.JSON)
	o.w.WriteByte('\n')
}
func (o *jsonOutput) flush() error                    { return o.w.Flush() }
func (o *jsonOutput) idle() error                     { return nil }
func (o *jsonOutput) aside() error                    { return o.w.Flush() }
func (o *jsonOutput) prompt(string) error             { return o.w.Flush() }
func (o *jsonOutput) answered(string)                 {}
func (o *jsonOutput) finish(*messages.Envelope) error { return o.w.Flush() }

// plainOutput writes one progress line per event and the summary, with no
// terminal escapes: for pipes, files and logs.
type plainOutput struct {
	w     *bufio.Writer
	r     *renderer
	notes []note
}

func (o *plainOutput) event(_ *messages.Encoded, env *messages.Envelope) {
	o.notes = o.r.Event(o.notes[:0], env)
	for _, n := range o.notes {
		o.w.WriteString(n.text)
		o.w.WriteByte('\n')
	}
}
func (o *plainOutput) flush() error        { return o.w.Flush() }
func (o *plainOutput) idle() error         { return nil }
func (o *plainOutput) aside() error        { return o.w.Flush() }
func (o *plainOutput) prompt(string) error { return o.w.Flush() }
func (o *plainOutput) answered(string)     {}
func (o *plainOutput) finish(*messages.Envelope) error {
	for _, n := range o.r.Summary() {
		o.w.WriteString(n.text)
		o.w.WriteByte('\n')
	}
	return o.w.Flush()
}

// maxWaveLines caps the wave lines of the status block.
const maxWaveLines = 10

// maxToolLines bounds the status block's lines of tool progress.
const maxToolLines = 3

// redrawEvery throttles the terminal's status block to about 10 redraws a second.
const redrawEvery = 100 * time.Millisecond

// ttyOutput keeps a compact, coloured status block at the bottom of the
// terminal, redrawn in place at most every redrawEvery, and prints the
// notable progress lines (warnings, failures, restarts) above it.
type ttyOutput struct {
	w        *bufio.Writer
	r        *renderer
	now      func() time.Time
	start    time.Time
	lastDraw time.Time
	// width is the terminal's width in columns (0 when unknown), to count
	// the rows of a status line that wraps.
	width int
	// color: SGR colours are on (off with NO_COLOR); cursor movement is
	// used either way.
	color bool
	drawn int // rows of the status block on screen, above the cursor
	stale int // rows of an erased block still on screen, at and below the cursor
	notes []note
}

func (o *ttyOutput) event(_ *messages.Encoded, env *messages.Envelope) {
	o.notes = o.r.Event(o.notes[:0], env)
	for _, n := range o.notes {
		if n.kind < noteWarn {
			continue
		}
		o.erase()
		o.line(paint(n.kind, n.text, o.color))
	}
	o.clearStale()
}

func (o *ttyOutput) flush() error {
	if now := o.now(); now.Sub(o.lastDraw) >= redrawEvery {
		o.draw(now)
	}
	return o.w.Flush()
}

func (o *ttyOutput) idle() error {
	o.draw(o.now())
	return o.w.Flush()
}

// aside erases the status block, so what the command writes next (a
// prompt, typed answers) stays above the block, which the next flush
// draws again below it.
func (o *ttyOutput) aside() error {
	o.erase()
	o.clearStale()
	o.lastDraw = time.Time{}
	return o.w.Flush()
}

// prompt leaves the status block on screen, up to date, above the
// question that follows: while a prompt waits, no event is read, so the
// block would not change anyway. The next draw starts a new block below
// the answer; this one stays in the scrollback as what the question was
// asked about.
func (o *ttyOutput) prompt(id string) error {
	o.r.asking = id
	o.draw(o.now())
	o.drawn = 0
	o.lastDraw = time.Time{}
	return o.w.Flush()
}

func (o *ttyOutput) answered(id string) { o.r.answered[id] = true }

func (o *ttyOutput) finish(*messages.Envelope) error {
	o.draw(o.now())
	o.drawn = 0 // the final block stays on screen
	for _, n := range o.r.Summary() {
		o.w.WriteString(paint(n.kind, n.text, o.color))
		o.w.WriteByte('\n')
	}
	return o.w.Flush()
}

// erase moves the cursor to the start of the status block's first line.
// It returns to the first column before it moves up: the cursor may not
// be there (the terminal echoed ^C, or something typed). The block's rows
// stay until lines overwrite them (line) or clearStale clears the rest:
// never with "clear to the end of the screen" (ESC[J), which from the
// screen's first row clears the whole screen, and tmux (scroll-on-clear)
// and other terminals first copy the screen into the scrollback: after a
// `clear`, every redraw would leave a copy of the block there.
func (o *ttyOutput) erase() {
	if o.drawn > 0 {
		fmt.Fprintf(o.w, "\r\x1b[%dA", o.drawn)
		o.stale += o.drawn
		o.drawn = 0
	}
}

// line writes s and ends its row, clearing what an older line left there
// (if it writes over the old block).
func (o *ttyOutput) line(s string) {
	o.w.WriteString(s)
	if o.stale > 0 {
		o.w.WriteString("\x1b[K")
		o.stale = max(0, o.stale-rows(s, o.width))
	}
	o.w.WriteByte('\n')
}

// clearStale clears the rows of the old block that no line overwrote, row
// by row, and comes back up: those rows are on screen below the cursor, so
// moving down through them never scrolls.
func (o *ttyOutput) clearStale() {
	if o.stale == 0 {
		return
	}
	for range o.stale {
		o.w.WriteString("\x1b[2K\x1b[1B")
	}
	fmt.Fprintf(o.w, "\r\x1b[%dA", o.stale)
	o.stale = 0
}

func (o *ttyOutput) draw(now time.Time) {
	o.erase()
	lines := formatStatusWidth(o.r.Status(), now.Sub(o.start), o.color, o.width)
	for _, l := range lines {
		o.line(l)
	}
	o.clearStale()
	o.drawn, o.lastDraw = 0, now
	for _, l := range lines {
		o.drawn += rows(l, o.width)
	}
}

// rows is how many terminal rows line takes at width columns.
func rows(line string, width int) int {
	if width <= 0 {
		return 1
	}
	return max(1, (cells(line)+width-1)/width)
}

// cells is how many terminal columns s takes: escape sequences take none,
// and each grapheme cluster its East Asian width (a CJK character or an
// emoji takes two, a combining mark none).
func cells(s string) int {
	n := 0
	for s != "" {
		i := strings.IndexByte(s, '\x1b')
		if i < 0 {
			return n + uniseg.StringWidth(s)
		}
		n += uniseg.StringWidth(s[:i])
		s = s[i+1:]
		if s != "" && s[0] == '[' { // skip a CSI sequence: ESC [ params final-byte
			j := 1
			for j < len(s) && (s[j] < '@' || s[j] > '~') {
				j++
			}
			s = s[min(j+1, len(s)):]
		}
	}
	return n
}

// ANSI SGR sequences.
const (
	sgrReset  = "\x1b[0m"
	sgrBold   = "\x1b[1m"
	sgrDim    = "\x1b[2m"
	sgrRed    = "\x1b[31m"
	sgrGreen  = "\x1b[32m"
	sgrYellow = "\x1b[33m"
	sgrCyan   = "\x1b[36m"
)

func paint(kind noteKind, s string, color bool) string {
	var sgr string
	switch kind {
	case noteOK:
		sgr = sgrGreen
	case noteWarn, noteWaiting:
		sgr = sgrYellow
	case noteBad:
		sgr = sgrRed
	}
	return colorize(sgr, s, color)
}

func colorize(sgr, s string, color bool) string {
	if !color || sgr == "" || s == "" {
		return s
	}
	return sgr + s + sgrReset
}

// formatStatus renders the status block: one line per wave with its node
// counts, what waits for an answer (if anything), then the phase, the
// tokens the run's model turns used and the elapsed time. The wave lines
// share their columns (every count has the width of the largest), so the
// counts line up whatever each wave holds.
func formatStatus(st status, elapsed time.Duration, color bool) []string {
	return formatStatusNames(st, elapsed, color, longCountNames, 0)
}

// formatStatusWidth is formatStatus for a terminal width columns wide (0:
// unknown), where no line may wrap: a wrapped line scrolls the block and
// leaves copies of it behind when it is redrawn. Wave lines too wide for
// the width use short count names ("12 done"); a line still too wide is
// cut, with an ellipsis.
func formatStatusWidth(st status, elapsed time.Duration, color bool, width int) []string {
	lines := formatStatusNames(st, elapsed, color, longCountNames, width)
	if width <= 0 {
		return lines
	}
	for _, l := range lines {
		if cells(l) > width {
			lines = formatStatusNames(st, elapsed, color, shortCountNames, width)
			break
		}
	}
	for i, l := range lines {
		lines[i] = fit(l, width, color)
	}
	return lines
}

// The names of a wave line's counts: pending, running, completed, failed,
// cancelled, skipped.
var (
	longCountNames  = [6]string{"pending", "running", "completed", "failed", "cancelled", "skipped"}
	shortCountNames = [6]string{"pend", "run", "done", "fail", "canc", "skip"}
)

// fit cuts line to at most width terminal columns, ending it with "…"
// when it cuts (and resetting the colour, which the cut may leave on).
// Escape sequences are kept and take no column.
func fit(line string, width int, color bool) string {
	if cells(line) <= width {
		return line
	}
	var b strings.Builder
	n := 0
	for s := line; s != ""; {
		if s[0] == '\x1b' {
			j := 1
			if len(s) > 1 && s[1] == '[' {
				j = 2
				for j < len(s) && (s[j] < '@' || s[j] > '~') {
					j++
				}
				j = min(j+1, len(s))
			}
			b.WriteString(s[:j])
			s = s[j:]
			continue
		}
		cluster, rest, w, _ := uniseg.FirstGraphemeClusterInString(s, -1)
		if n+w > width-1 {
			break
		}
		b.WriteString(cluster)
		n += w
		s = rest
	}
	b.WriteString("…")
	if color {
		b.WriteString(sgrReset)
	}
	return b.String()
}

// formatStatusNames is formatStatus with the given count names. With a
// width, the waiting line's label is cut to fit it, keeping "(+N more)".
func formatStatusNames(st status, elapsed time.Duration, color bool, names [6]string, width int) []string {
	lines := make([]string, 0, min(len(st.Waves), maxWaveLines)+2)
	window := ""
	waves := st.Waves
	if len(waves) > maxWaveLines {
		// Show the window of waves that are in progress; a block taller
		// than the screen could not be redrawn in place.
		from := len(waves) - maxWaveLines
		for i, w := range waves {
			if w.Pending+w.Running > 0 {
				from = min(i, from)
				break
			}
		}
		waves = waves[from : from+maxWaveLines]
		window = fmt.Sprintf("waves %d-%d of %d · ", from, from+maxWaveLines-1, len(st.Waves))
	}
	// The columns: cancelled only when a shown wave has cancelled nodes
	// (rare), on every line then.
	digits, label, cancelled := 3, 0, false
	for _, w := range waves {
		for _, n := range []int{w.Pending, w.Running, w.Completed, w.Failed, w.Cancelled, w.Skipped} {
			digits = max(digits, len(strconv.Itoa(n)))
		}
		label = max(label, len("wave ")+len(strconv.Itoa(w.Wave)))
		cancelled = cancelled || w.Cancelled > 0
	}
	label = max(label, len("wave 000"))
	var b strings.Builder
	count := func(n int, name, sgr string) {
		s := fmt.Sprintf("  %*d %s", digits, n, name)
		if n == 0 {
			sgr = sgrDim
		}
		b.WriteString(colorize(sgr, s, color))
	}
	for _, w := range waves {
		b.Reset()
		b.WriteString(colorize(sgrBold, fmt.Sprintf("%-*s", label, "wave "+strconv.Itoa(w.Wave)), color))
		count(w.Pending, names[0], "")
		count(w.Running, names[1], sgrCyan)
		count(w.Completed, names[2], sgrGreen)
		count(w.Failed, names[3], sgrRed)
		if cancelled {
			count(w.Cancelled, names[4], sgrYellow)
		}
		count(w.Skipped, names[5], sgrYellow)
		lines = append(lines, b.String())
	}
	// The running tool calls' progress, at most maxToolLines of them.
	for i, t := range st.Tools {
		if i == maxToolLines {
			lines = append(lines, colorize(sgrDim, fmt.Sprintf("  (+%d more tool calls)", len(st.Tools)-i), color))
			break
		}
		if width > 0 {
			t = fit(t, max(1, width-2), false)
		}
		lines = append(lines, colorize(sgrCyan, "  "+t, color))
	}
	if n := len(st.Waiting); n > 0 {
		more := ""
		if n > 1 {
			more = fmt.Sprintf(" (+%d more)", n-1)
		}
		label := st.Waiting[0]
		if width > 0 {
			label = fit(label, max(1, width-cells("waiting for you: "+more)), false)
		}
		lines = append(lines, colorize(sgrYellow, "waiting for you: "+label+more, color))
	}
	used := usage(st.Usage)
	if st.Spend != "" {
		used += " · " + st.Spend
	}
	lines = append(lines, fmt.Sprintf("%s%s · %s · %s", window,
		colorize(sgrBold, st.Phase, color), used, elapsed.Round(100*time.Millisecond)))
	return lines
}
