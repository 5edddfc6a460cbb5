package journal_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

const crashDirEnv = "CONCLAVE_JOURNAL_CRASH_DIR"

// crashSessions append concurrently in the child, so kills land inside
// group commits too.
var crashSessions = []messages.SessionID{"c0", "c1", "c2", "c3"}

func crashEvent(s messages.SessionID, seq uint64) *messages.Encoded {
	return messages.NewEncoded(seq, messages.TextDelta, "run", fmt.Appendf(nil, `{"seq":%d,"session":"%s","pad":"%s"}`, seq, s, strings.Repeat("x", 240)))
}

// TestDurable_CrashChild is the child process of
// TestDurable_CrashKeepsAcknowledged: it appends until it is killed and
// prints "ack <session> <seq>" after each acknowledged batch.
func TestDurable_CrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("runs as the child of TestDurable_CrashKeepsAcknowledged")
	}
	// Sessions leave memory after 20 ms idle (idle.go), so kills also land
	// in evictions, their flushes, and sessions loaded again.
	d, err := journal.Open(dir, journal.Options{IdleAfter: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var out sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Minute) // never outlive a parent that died
	for _, s := range crashSessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			head, err := d.Head(ctx, s)
			if err != nil {
				panic(err)
			}
			for time.Now().Before(deadline) {
				n := 1 + rand.Uint64N(64)
				batch := make([]*messages.Encoded, n)
				for i := range batch {
					batch[i] = crashEvent(s, head+uint64(i)+1)
				}
				if err := d.Append(ctx, s, batch); err != nil {
					panic(err)
				}
				head += n
				out.Lock()
				fmt.Fprintf(os.Stdout, "ack %s %d\n", s, head) // one write: whole line or nothing
				out.Unlock()
				if rand.IntN(8) == 0 {
					// The workload's shape, not a synchronisation: the
					// session goes idle for up to 60 ms now and then.
					time.Sleep(time.Duration(rand.IntN(60)) * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	t.Fatal("not killed within a minute")
}

// TestDurable_CrashKeepsAcknowledged kills (SIGKILL) a child process that
// appends, at a random moment, several times over, and checks after each
// kill that every acknowledged seq is there, seqs are gapless, and
// appending continues at head+1.
func TestDurable_CrashKeepsAcknowledged(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	ctx := context.Background()
	acked := map[messages.SessionID]uint64{}
	for iter := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDurable_CrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		watchdog := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
		killAt := 50 + rand.IntN(2000)
		var acks int
		killed := false
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				break // EOF; a torn last line was never acknowledged
			}
			var s string
			var seq uint64
			if _, err := fmt.Sscanf(line, "ack %s %d\n", &s, &seq); err != nil {
				continue // test framework output
			}
			acked[messages.SessionID(s)] = max(acked[messages.SessionID(s)], seq)
			if acks++; acks == killAt {
				_ = cmd.Process.Kill()
				killed = true
			}
		}
		_ = cmd.Wait()
		watchdog.Stop()
		if !killed {
			t.Fatalf("iteration %d: the child stopped after %d acks by itself:\n%s", iter, acks, stderr.String())
		}

		d, err := journal.Open(dir, journal.Options{})
		if err != nil {
			t.Fatalf("iteration %d: reopen after kill -9: %v", iter, err)
		}
		for _, s := range crashSessions {
			head, _ := d.Head(ctx, s)
			if head < acked[s] {
				t.Fatalf("iteration %d: session %s: head %d after kill, but %d was acknowledged", iter, s, head, acked[s])
			}
			var after uint64
			for after < head {
				evs, err := d.ReadAfter(ctx, s, after, 512)
				if err != nil || len(evs) == 0 {
					t.Fatalf("iteration %d: session %s: ReadAfter(%d) = %d events, %v; head %d", iter, s, after, len(evs), err, head)
				}
				for _, e := range evs {
					if e.Seq != after+1 || !bytes.Equal(e.JSON, crashEvent(s, e.Seq).JSON) {
						t.Fatalf("iteration %d: session %s: read seq %d (%.40s) after %d", iter, s, e.Seq, e.JSON, after)
					}
					after = e.Seq
				}
			}
			t.Logf("iteration %d: session %s: acknowledged %d, recovered %d", iter, s, acked[s], head)
		}
		s := crashSessions[iter%len(crashSessions)]
		head, _ := d.Head(ctx, s)
		if err := d.Append(ctx, s, []*messages.Encoded{crashEvent(s, head+1)}); err != nil {
			t.Fatalf("iteration %d: append at head+1 after recovery: %v", iter, err)
		}
		acked[s] = head + 1
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
