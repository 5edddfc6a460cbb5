package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/rivo/uniseg"
)

// The tests of this file run `conclave run` on a pseudo-terminal, as a
// person does: the test binary in child mode (crashChildEnv=stdio) is the
// session leader of a new pty, types its answers through the line
// discipline (which echoes them, and turns Ctrl-C into ^C and SIGINT), and
// reads what a terminal would show by feeding the output to vt, a small
// terminal emulator.

const (
	ttyCols = 120
	ttyWait = 30 * time.Second
)

// ttySession is a `conclave` child on a pseudo-terminal.
type ttySession struct {
	t    *testing.T
	cmd  *exec.Cmd
	ptmx *os.File

	mu      sync.Mutex
	screen  *vt
	raw     []byte        // everything the terminal showed, echoes included
	changed chan struct{} // closed and replaced on every output
	done    chan struct{} // the reader ended: the child closed the terminal
}

func startTTY(t *testing.T, args ...string) *ttySession {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("pseudo-terminals are tested on Linux")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "NO_COLOR=") }),
		crashChildEnv+"="+stdioChildMode, "TERM=xterm")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: ttyCols})
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	s := &ttySession{t: t, cmd: cmd, ptmx: ptmx, screen: newVT(ttyCols), changed: make(chan struct{}), done: make(chan struct{})}
	go s.read()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // no-op once it exited
		_ = ptmx.Close()
		<-s.done
		_ = cmd.Wait()
	})
	return s
}

// read feeds the terminal's output to the emulator until the child is gone
// (on Linux the master's read fails with EIO then).
func (s *ttySession) read() {
	defer close(s.done)
	buf := make([]byte, 4096)
	for {
		n, err := s.ptmx.Read(buf)
		s.mu.Lock()
		s.screen.write(buf[:n])
		s.raw = append(s.raw, buf[:n]...)
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// waitScreen waits until cond holds for the screen's lines (the cursor's
// row last), and returns them.
func (s *ttySession) waitScreen(what string, cond func(lines []string) bool) []string {
	s.t.Helper()
	deadline := time.NewTimer(ttyWait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		lines, changed := s.screen.lines(), s.changed
		s.mu.Unlock()
		if cond(lines) {
			return lines
		}
		select {
		case <-changed:
		case <-s.done:
			s.mu.Lock()
			lines = s.screen.lines()
			s.mu.Unlock()
			if cond(lines) {
				return lines
			}
			s.t.Fatalf("the command ended before %s; screen:\n%s", what, strings.Join(lines, "\n"))
		case <-deadline.C:
			s.t.Fatalf("no %s within %v; screen:\n%s", what, ttyWait, strings.Join(lines, "\n"))
		}
	}
}

// waitPrompt waits until the cursor's row ends with prompt.
func (s *ttySession) waitPrompt(prompt string) []string {
	s.t.Helper()
	return s.waitScreen(fmt.Sprintf("prompt %q", prompt), func(lines []string) bool {
		return strings.HasSuffix(lines[len(lines)-1], strings.TrimRight(prompt, " "))
	})
}

func (s *ttySession) typeText(text string) {
	s.t.Helper()
	if _, err := s.ptmx.Write([]byte(text)); err != nil {
		s.t.Fatal(err)
	}
}

// exit waits for the child and returns its exit status and final screen.
func (s *ttySession) exit() (int, []string) {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(ttyWait):
		s.t.Fatalf("the command did not end within %v", ttyWait)
	}
	err := s.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.ProcessState.ExitCode(), s.screen.lines()
}

// statusWave finds where a status block's wave row starts.
var statusWave = regexp.MustCompile(`wave \d`)

// checkClean fails if the screen holds debris of a redraw: a status or
// wave line that does not start in the first column, or a ^C echo left.
func checkClean(t *testing.T, lines []string) {
	t.Helper()
	for i, l := range lines {
		// A wave row of the status block ("wave 0      3 pending…", "wave 0 · 10
		// tokens in…"), not prose that names a count of waves ("in 1 wave (").
		if loc := statusWave.FindStringIndex(l); loc != nil && loc[0] > 0 && strings.TrimSpace(l[:loc[0]]) != "" && !strings.Contains(l[:loc[0]], "started:") {
			j := loc[0]
			t.Errorf("row %d starts with debris %q: %q\n%s", i, l[:j], l, strings.Join(lines, "\n"))
		}
		if strings.Contains(l, "^C") {
			t.Errorf("row %d keeps the ^C echo: %q\n%s", i, l, strings.Join(lines, "\n"))
		}
	}
}

// rowsAbove returns the n rows above the last row that contains s.
func rowsAbove(lines []string, s string, n int) []string {
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], s) {
			return lines[max(0, i-n):i]
		}
	}
	return nil
}

// TestTTY_Prompts answers the gates of --hitl node at a real terminal:
// the plan, then the node approvals in plan order, with y and n, each
// asked below the status block (which says what waits); the run finishes
// and the screen holds no debris.
func TestTTY_Prompts(t *testing.T) {
	t.Parallel()
	s := startTTY(t, "run", "why is the sky blue", "--hitl", "node", "--nodes", "3", "--waves", "1", "--tokens", "3", "--token-delay-ms", "0")
	lines := s.waitPrompt("[a]pprove, [r]eject, [e]dit plan? ")
	above := strings.Join(rowsAbove(lines, "the plan needs your approval", 3), "\n")
	if !strings.Contains(above, "waiting for you: plan approval") || !strings.Contains(above, " tokens in, ") {
		t.Errorf("no status block above the plan prompt:\n%s", strings.Join(lines, "\n"))
	}
	s.typeText("y\r")
	for i, answer := range []string{"y", "n", "yes"} {
		node := fmt.Sprintf("n%03d", i+1)
		lines = s.waitScreen("the prompt for "+node, func(lines []string) bool {
			return strings.HasSuffix(lines[len(lines)-1], "[a]pprove, [r]eject?") &&
				strings.HasPrefix(lines[len(lines)-2], "node "+node+" is ready to start")
		})
		above = strings.Join(rowsAbove(lines, "node "+node+" is ready to start", 3), "\n")
		if !strings.Contains(above, "waiting for you: approval to start node "+node) || !strings.Contains(above, "wave 0 ") {
			t.Errorf("no status block above the prompt for %s:\n%s", node, strings.Join(lines, "\n"))
		}
		s.typeText(answer + "\r")
	}
	code, lines := s.exit()
	screen := strings.Join(lines, "\n")
	if code != exitOK {
		t.Fatalf("exit %d; screen:\n%s", code, screen)
	}
	for _, want := range []string{"[a]pprove, [r]eject? y\n✓ approved node n001", "[a]pprove, [r]eject? n\n✗ rejected node n002",
		"[a]pprove, [r]eject? yes\n✓ approved node n003", "run finished in "} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen does not show %q:\n%s", want, screen)
		}
	}
	checkClean(t, lines)
}

// TestTTY_CtrlC: Ctrl-C while the status block is drawn aborts the run
// (exit 130) and the redraws leave nothing of the ^C echo or the old
// block on screen.
func TestTTY_CtrlC(t *testing.T) {
	t.Parallel()
	s := startTTY(t, "run", "why is the sky blue", "--nodes", "6", "--token-delay-ms", "40")
	s.waitScreen("a running node in the status block", func(lines []string) bool {
		return slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "wave 0 ") && !strings.Contains(l, "  0 running") })
	})
	s.typeText("\x03")
	code, lines := s.exit()
	screen := strings.Join(lines, "\n")
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d; screen:\n%s", code, exitInterrupted, screen)
	}
	if !strings.Contains(screen, "run failed (aborted)") {
		t.Errorf("the screen does not say the run was aborted:\n%s", screen)
	}
	checkClean(t, lines)
	// The screen is what it would be had the terminal echoed nothing: the
	// echo moved the cursor, and the redraws did not mind.
	s.mu.Lock()
	raw := s.raw
	s.mu.Unlock()
	if !strings.Contains(string(raw), "^C") {
		t.Fatalf("the terminal did not echo ^C:\n%q", raw)
	}
	clean := newVT(ttyCols)
	clean.write([]byte(strings.ReplaceAll(string(raw), "^C", "")))
	if want := strings.Join(clean.lines(), "\n"); screen != want {
		t.Errorf("screen after ^C:\n%s\n\nwithout the echo it would be:\n%s", screen, want)
	}
}

// vt is the part of a VT100/xterm that conclave's output uses: printable
// text (each grapheme cluster as wide as uniseg says), CR, LF, BS, cursor
// up (CSI n A), erase below (CSI J), erase line (CSI K); other CSI
// sequences (colours) are ignored. Its screen has no height limit (it
// never scrolls), so the tests keep their output shorter than a terminal.
type vt struct {
	cols     int
	rows     [][]string // cells; "" is blank, a wide cluster's second cell is "\x00"
	row, col int
	pending  []byte // an incomplete escape sequence or UTF-8 sequence
}

func newVT(cols int) *vt { return &vt{cols: cols, rows: [][]string{nil}} }

func (v *vt) write(p []byte) {
	b := append(v.pending, p...)
	v.pending = nil
	for len(b) > 0 {
		switch c := b[0]; {
		case c == '\r':
			v.col, b = 0, b[1:]
		case c == '\n':
			v.row, b = v.row+1, b[1:]
			for len(v.rows) <= v.row {
				v.rows = append(v.rows, nil)
			}
		case c == '\b':
			v.col, b = max(0, v.col-1), b[1:]
		case c == 0x1b:
			n := v.escape(b)
			if n == 0 { // incomplete: wait for the rest
				v.pending = append([]byte(nil), b...)
				return
			}
			b = b[n:]
		case c < 0x20 || c == 0x7f:
			b = b[1:]
		default:
			cluster, rest, width, _ := uniseg.FirstGraphemeCluster(b, -1)
			if len(rest) == 0 && !utf8Complete(b) {
				v.pending = append([]byte(nil), b...)
				return
			}
			v.put(string(cluster), width)
			b = rest
		}
	}
}

func utf8Complete(b []byte) bool {
	for i := len(b) - 1; i >= 0 && i >= len(b)-4; i-- {
		if b[i]&0xC0 != 0x80 { // a lead byte
			need := 1
			switch {
			case b[i] >= 0xF0:
				need = 4
			case b[i] >= 0xE0:
				need = 3
			case b[i] >= 0xC0:
				need = 2
			}
			return len(b)-i >= need
		}
	}
	return true
}

func (v *vt) put(cluster string, width int) {
	if v.col+width > v.cols { // wrap
		v.row, v.col = v.row+1, 0
		for len(v.rows) <= v.row {
			v.rows = append(v.rows, nil)
		}
	}
	line := v.rows[v.row]
	for len(line) < v.col+width {
		line = append(line, "")
	}
	line[v.col] = cluster
	for i := 1; i < width; i++ {
		line[v.col+i] = "\x00"
	}
	v.rows[v.row] = line
	v.col += width
}

// escape applies the escape sequence at the start of b and returns its
// length, or 0 when b holds only part of it.
func (v *vt) escape(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	if b[1] != '[' {
		return 2
	}
	for i := 2; i < len(b); i++ {
		if b[i] >= '@' && b[i] <= '~' {
			param := string(b[2:i])
			switch b[i] {
			case 'A':
				n := 1
				fmt.Sscanf(param, "%d", &n)
				v.row = max(0, v.row-max(1, n))
			case 'J':
				if v.row < len(v.rows) && len(v.rows[v.row]) > v.col {
					v.rows[v.row] = v.rows[v.row][:v.col]
				}
				v.rows = v.rows[:v.row+1]
			case 'K':
				if len(v.rows[v.row]) > v.col {
					v.rows[v.row] = v.rows[v.row][:v.col]
				}
			}
			return i + 1
		}
	}
	return 0
}

// lines is the screen as text, trailing blanks trimmed, up to the cursor's
// row.
func (v *vt) lines() []string {
	out := make([]string, 0, v.row+1)
	for _, cells := range v.rows[:v.row+1] {
		var b strings.Builder
		for _, c := range cells {
			switch c {
			case "":
				b.WriteByte(' ')
			case "\x00":
			default:
				b.WriteString(c)
			}
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}
