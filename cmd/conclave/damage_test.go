package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// TestServe_DamagedJournal runs `conclave serve`, kills it with SIGKILL,
// damages the journal's write-ahead log the ways an operator did (cut to
// half, 16 garbage bytes in its second half, deleted), and checks that the
// server then refuses to start, naming the session and its last intact
// seq, and that with --repair it starts and every new event of the session
// gets a seq above every seq a client held before the damage.
func TestServe_DamagedJournal(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("needs SIGKILL")
	}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, wal string)
	}{
		{"WALCutInHalf", func(t *testing.T, wal string) {
			st, err := os.Stat(wal)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(wal, st.Size()/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"WALGarbageInSecondHalf", func(t *testing.T, wal string) {
			b, err := os.ReadFile(wal)
			if err != nil {
				t.Fatal(err)
			}
			i := len(b) * 3 / 4
			copy(b[i:], bytes.Repeat([]byte{0xa5}, 16))
			if err := os.WriteFile(wal, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"WALDeleted", func(t *testing.T, wal string) {
			if err := os.Remove(wal); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newCrashTest(t, 1)
			h.startServer()
			session, acked := h.damageWorkload()
			h.killServer()

			wal := newestWAL(t, filepath.Join(h.dir, "journal"))
			c.damage(t, wal)

			out, code := h.serveOnce()
			if code != exitFailed {
				t.Fatalf("serve on a damaged journal exited %d, want %d:\n%s", code, exitFailed, out)
			}
			key := actors.JournalKey("", session) // sessions are journaled under tenant/session
			for _, want := range []string{"session " + string(key) + " is damaged", "last intact seq", fmt.Sprintf("..%d were acknowledged", acked), "--repair"} {
				if !strings.Contains(out, want) {
					t.Fatalf("serve's refusal does not say %q:\n%s", want, out)
				}
			}
			t.Logf("refused: %s", lastLine(out))

			h.serveArgs = []string{"--repair"}
			h.startServer()
			if log := h.srv.log.tail(64 << 10); !strings.Contains(log, "journal: repair: truncated a damaged session") || !strings.Contains(log, "session="+string(key)) {
				t.Fatalf("the repair was not logged:\n%s", log)
			}
			// A new run in the session: its events come after everything
			// any client received before the damage.
			var rc messages.RunCreated
			cmd := messages.StartRun{Question: "after repair", SessionID: session, HITL: messages.HITLPlan,
				Scenario: &messages.Scenario{Nodes: 2, Tokens: 2}, ApprovalTimeoutSeconds: crashApprovalTimeout}
			if code, b := h.call(http.MethodPost, "/api/v1/runs", cmd, &rc); code != http.StatusCreated {
				t.Fatalf("POST /api/v1/runs after repair = %d %s", code, b)
			}
			sum := h.waitRun(rc.RunID, func(s messages.RunSummary) bool { return s.LastSeq > 0 })
			if sum.LastSeq <= acked {
				t.Fatalf("the new run's latest event has seq %d; seqs up to %d were acknowledged before the damage", sum.LastSeq, acked)
			}
			// A client reading the session from its start sees the events
			// that survived, then one replay_truncated for the lost ones,
			// then the new run: never a silent gap.
			var prevSeq uint64
			var truncated int
			ctx, cancel := context.WithTimeout(h.ctx, crashWait)
			err := h.stream(ctx, h.srv.base, session, 0, func(fr crashFrame) bool {
				if fr.err != nil || fr.env == nil {
					return false
				}
				if fr.env.Type == messages.ReplayTruncated {
					truncated++
				} else if fr.seq != prevSeq+1 {
					t.Errorf("SSE after the repair: seq %d after %d without a replay_truncated", fr.seq, prevSeq)
				}
				prevSeq = fr.seq
				return fr.env.RunID != rc.RunID // until the new run's first event
			})
			cancel()
			if err != nil || truncated != 1 || prevSeq <= acked {
				t.Fatalf("SSE from seq 0 after the repair: %d replay_truncated, reached seq %d, %v; want one, then the new run above %d", truncated, prevSeq, err, acked)
			}
			h.stopServer()

			// The journal, read directly: the session keeps seqs 1..intact,
			// then jumps above everything acknowledged; the new run starts
			// there.
			j, err := journal.Open(filepath.Join(h.dir, "journal"), journal.Options{})
			if err != nil {
				t.Fatalf("open the repaired journal: %v", err)
			}
			defer j.Close()
			var prev uint64
			var jumped bool
			for {
				evs, err := j.ReadAfter(context.Background(), key, prev, 512)
				if err != nil {
					t.Fatal(err)
				}
				if len(evs) == 0 {
					break
				}
				for _, e := range evs {
					if e.Seq != prev+1 {
						if jumped || e.Seq <= acked {
							t.Fatalf("session %s: seq %d after %d (acknowledged before the damage: up to %d)", session, e.Seq, prev, acked)
						}
						jumped = true
					}
					prev = e.Seq
				}
			}
			info, ok, err := j.Run(context.Background(), rc.RunID)
			if err != nil || !ok || info.FirstSeq <= acked {
				t.Fatalf("the new run in the catalogue: %+v, %v, %v; want it to start above %d", info, ok, err, acked)
			}
			t.Logf("acknowledged up to %d before the damage; the new run starts at seq %d", acked, info.FirstSeq)
		})
	}
}

// damageWorkload runs a council to its end and starts a second one that
// parks on its plan approval, in one session, following the session over
// SSE. It returns the session and the highest seq received.
func (h *crashTest) damageWorkload() (messages.SessionID, uint64) {
	t := h.t
	start := func(session messages.SessionID, hitl messages.HITLMode) messages.RunCreated {
		var rc messages.RunCreated
		cmd := messages.StartRun{Question: "damage", SessionID: session, HITL: hitl, ApprovalTimeoutSeconds: crashApprovalTimeout,
			Scenario: &messages.Scenario{Nodes: 4, Waves: 2, Tokens: 20, SynthesisTokens: 10, Seed: 3}}
		if code, b := h.call(http.MethodPost, "/api/v1/runs", cmd, &rc); code != http.StatusCreated {
			t.Fatalf("POST /api/v1/runs = %d %s", code, b)
		}
		return rc
	}
	var acked uint64
	follow := func(session messages.SessionID, until func(crashFrame) bool) {
		ctx, cancel := context.WithTimeout(h.ctx, crashWait)
		defer cancel()
		err := h.stream(ctx, h.srv.base, session, acked, func(fr crashFrame) bool {
			acked = max(acked, fr.seq)
			return !until(fr)
		})
		if err != nil {
			t.Fatalf("follow session %s: %v", session, err)
		}
	}
	rc := start("", messages.HITLNone)
	follow(rc.SessionID, func(fr crashFrame) bool { return fr.event == string(messages.RunFinished) })
	rc2 := start(rc.SessionID, messages.HITLPlan)
	follow(rc.SessionID, func(fr crashFrame) bool {
		return fr.event == string(messages.InterruptRaised) && fr.env.RunID == rc2.RunID
	})
	return rc.SessionID, acked
}

// serveOnce runs `conclave serve` on the data directory and returns its
// output and exit status; it must exit by itself (its stdin is empty, so a
// server that did start stops at once).
func (h *crashTest) serveOnce() (string, int) {
	ctx, cancel := context.WithTimeout(h.ctx, crashWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.exe, "serve", "--addr", "127.0.0.1:0", "--data", h.dir)
	cmd.Env = append(os.Environ(), crashChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		h.t.Fatalf("serve: %v\n%s", err, out)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// waitRun polls the run's summary until ok holds.
func (h *crashTest) waitRun(id messages.RunID, ok func(messages.RunSummary) bool) messages.RunSummary {
	deadline := time.Now().Add(crashWait)
	for {
		sum, code := h.getRun(id)
		if code == http.StatusOK && ok(sum) {
			return sum
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("run %s: GET = %d %+v after %v", id, code, sum, crashWait)
		}
		time.Sleep(10 * time.Millisecond) // polling under a deadline, not sequencing
	}
}

func newestWAL(t *testing.T, dir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no write-ahead log in %s (%v)", dir, err)
	}
	slices.Sort(logs)
	return logs[len(logs)-1]
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestServe_DataDirInUse: a second server on the same --data fails at once.
func TestServe_DataDirInUse(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("needs SIGTERM")
	}
	h := newCrashTest(t, 1)
	h.startServer()
	began := time.Now()
	out, code := h.serveOnce()
	if code != exitFailed || !strings.Contains(out, fmt.Sprintf("data directory %s is in use by another conclave server", h.dir)) {
		t.Fatalf("a second serve on %s exited %d:\n%s", h.dir, code, out)
	}
	t.Logf("second serve, after %v: %s", time.Since(began).Round(time.Millisecond), lastLine(out))
	if code, b := h.call(http.MethodGet, "/healthz", nil, nil); code != http.StatusOK {
		t.Fatalf("the first server broke: %d %s", code, b)
	}
	h.stopServer()
	if log := h.srv.log.tail(8 << 10); !strings.Contains(log, "freezing live runs in the journal (the next start resumes them)") {
		t.Fatalf("the durable server's shutdown log does not say that runs are frozen:\n%s", log)
	}
}
