package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTTY_ClearInTmux: in an 80×24 tmux pane, a `clear` while a run's
// status block redraws leaves the block in the scrollback once (the copy
// the clear itself pushes there), not once per redraw. Every redraw used
// to clear "to the end of the screen" (ESC[J) from the block's first row,
// which after a clear is the screen's first row: the whole screen, which
// tmux (scroll-on-clear) copies into the scrollback first.
func TestTTY_ClearInTmux(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("no tmux here (.ci/run installs it)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "tmux.sock")
	tm := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmux, append([]string{"-S", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run := fmt.Sprintf("env %s=%s NO_COLOR=1 %s run 'why is the sky blue' --nodes 8 --waves 2 --tokens 150; sleep 600", crashChildEnv, stdioChildMode, exe)
	tm("new-session", "-d", "-x", "80", "-y", "24", run)
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", sock, "kill-server").Run() })
	// waitPane polls the pane (another process: nothing to wait on but its
	// screen) until it shows want, within the watchdog.
	waitPane := func(want string) {
		t.Helper()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(watchdog)
		for !strings.Contains(tm("capture-pane", "-p"), want) {
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatalf("the pane never showed %q:\n%s", want, tm("capture-pane", "-p"))
			}
		}
	}
	waitPane("wave 1 ")
	tty := strings.TrimSpace(tm("display", "-p", "#{pane_tty}"))
	if err := os.WriteFile(tty, []byte("\x1b[2J\x1b[H"), 0); err != nil { // what `clear` writes
		t.Fatal(err)
	}
	waitPane("finished ·")
	all := tm("capture-pane", "-p", "-S", "-5000")
	blocks := 0
	for _, l := range strings.Split(all, "\n") {
		if strings.HasPrefix(l, "wave 1 ") {
			blocks++
		}
	}
	// The copy the clear pushed, the final block, and one more if the clear
	// fell between a redraw's rows.
	if blocks > 3 {
		t.Errorf("the status block is %d times in the pane and its scrollback, want at most 3:\n%s", blocks, all)
	}
}
