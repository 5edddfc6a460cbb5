package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/conclave-ai/conclave/messages"
)

// auditWait bounds the waits of the audit test.
const auditWait = 30 * time.Second

// TestAudit_KillNineTamperVerify drives decisions through a real `conclave
// serve --data DIR` (a plan approved, a run aborted while parked), kills
// it with SIGKILL, checks that `conclave audit verify --data` passes,
// restarts it and takes more decisions: the chain continues where it
// stopped, and an export (`conclave audit export`) verifies against the
// server's public key. Then it tampers with copies of the stored log
// (a flipped byte, a deleted record, two records swapped, the last record
// deleted) and with the export: each verify exits 1 naming the record.
func TestAudit_KillNineTamperVerify(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServe(t, 0, nil, "--data", dir, "--runs-per-second", "-1")
	a := newHardenAPI(t, srv, "")
	a.approvedPlan(t)
	a.abortedWhileParked(t)
	before := a.auditPage(t, 0, 200)
	if len(before.Records) < 3 || before.Head != uint64(len(before.Records)) {
		t.Fatalf("audit after two runs: head %d, %d records", before.Head, len(before.Records))
	}
	kinds := map[messages.AuditKind]int{}
	for _, r := range before.Records {
		kinds[r.Kind]++
		if r.Tenant != "local" || r.RunID == "" || r.SessionID == "" {
			t.Fatalf("record %+v", r)
		}
	}
	if kinds[messages.AuditPlanApproval] != 1 || kinds[messages.AuditAbort] != 1 || kinds[messages.AuditInterruptCancelled] != 1 {
		t.Fatalf("kinds %v", kinds)
	}
	for _, q := range []string{"limit=0", "limit=201", "limit=x", "after=-1", "after=x"} {
		if code, _, b := a.call(t, http.MethodGet, "/api/v1/audit?"+q, ""); code != http.StatusBadRequest {
			t.Fatalf("GET /api/v1/audit?%s = %d %s", q, code, b)
		}
	}

	// kill -9: the log survives and verifies.
	if err := srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	srv.reap()
	if ws, ok := srv.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && !(ws.Signaled() && ws.Signal() == syscall.SIGKILL) {
		t.Fatalf("not killed: %v", srv.cmd.ProcessState)
	}
	if r := runCLI(t, t.Context(), nil, false, "audit", "verify", "--data", dir); r.code != exitOK || !strings.Contains(r.stdout, fmt.Sprintf("tenant local: %d records verified", before.Head)) {
		t.Fatalf("verify after kill -9: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Restart: the chain continues.
	srv = startServe(t, 0, nil, "--data", dir, "--runs-per-second", "-1")
	a = newHardenAPI(t, srv, "")
	a.approvedPlan(t)
	after := a.auditPage(t, before.Head, 200)
	if len(after.Records) == 0 || after.Records[0].Index != before.Head+1 || after.Records[0].PrevHash != before.Records[len(before.Records)-1].Hash {
		t.Fatalf("after the restart: %+v", after.Records)
	}
	export := filepath.Join(t.TempDir(), "audit.jsonl")
	if r := runCLI(t, t.Context(), nil, false, "audit", "export", "--server", a.base, "--out", export); r.code != exitOK {
		t.Fatalf("export: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	pub := filepath.Join(dir, "server.key.pub")
	if r := runCLI(t, t.Context(), nil, false, "audit", "verify", "--file", export, "--server-key", pub); r.code != exitOK {
		t.Fatalf("verify the export: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	srv.terminate()
	if code := srv.cmd.ProcessState.ExitCode(); code != exitOK {
		t.Fatalf("SIGTERM: %v", srv.cmd.ProcessState)
	}
	head := after.Head
	if r := runCLI(t, t.Context(), nil, false, "audit", "verify", "--data", dir); r.code != exitOK || !strings.Contains(r.stdout, fmt.Sprintf("tenant local: %d records verified", head)) {
		t.Fatalf("verify after the restart: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Tampering with the stored log.
	cases := []struct {
		name   string
		tamper func(t *testing.T, db *pebble.DB)
		index  uint64
	}{
		{"flipped byte", func(t *testing.T, db *pebble.DB) {
			v := pebbleGet(t, db, auditKey("local", 2))
			i := strings.Index(string(v), `"kind":"`) + len(`"kind":"`)
			v[i] ^= 0x20 // a letter's case: still valid JSON
			pebbleSet(t, db, auditKey("local", 2), v)
		}, 2},
		{"deleted", func(t *testing.T, db *pebble.DB) {
			if err := db.Delete(auditKey("local", 2), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}, 2},
		{"swapped", func(t *testing.T, db *pebble.DB) {
			x, y := pebbleGet(t, db, auditKey("local", 1)), pebbleGet(t, db, auditKey("local", 2))
			pebbleSet(t, db, auditKey("local", 1), y)
			pebbleSet(t, db, auditKey("local", 2), x)
		}, 1},
		{"last deleted", func(t *testing.T, db *pebble.DB) {
			if err := db.Delete(auditKey("local", head), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}, head},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			copyDir := t.TempDir()
			copyTree(t, filepath.Join(dir, "audit"), filepath.Join(copyDir, "audit"))
			db, err := pebble.Open(filepath.Join(copyDir, "audit"), &pebble.Options{Logger: quietPebble{}})
			if err != nil {
				t.Fatal(err)
			}
			c.tamper(t, db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			r := runCLI(t, t.Context(), nil, false, "audit", "verify", "--data", copyDir, "--server-key", pub)
			if want := fmt.Sprintf("tenant local record %d:", c.index); r.code != exitFailed || !strings.Contains(r.stderr, want) {
				t.Fatalf("exit %d, want 1 and %q\n%s%s", r.code, want, r.stdout, r.stderr)
			}
		})
	}
	t.Run("export flipped", func(t *testing.T) {
		b, err := os.ReadFile(export)
		if err != nil {
			t.Fatal(err)
		}
		i := strings.Index(string(b), `"kind":"`) + len(`"kind":"`)
		b[i] ^= 0x20
		bad := filepath.Join(t.TempDir(), "bad.jsonl")
		if err := os.WriteFile(bad, b, 0o644); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, t.Context(), nil, false, "audit", "verify", "--file", bad, "--server-key", pub)
		if r.code != exitFailed || !strings.Contains(r.stderr, "tenant local record 1:") {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{{"audit", "verify"}, {"audit", "verify", "--file", export}, {"audit", "verify", "--data", dir, "--file", export}} {
			if r := runCLI(t, t.Context(), nil, false, args...); r.code != exitUsage {
				t.Fatalf("%v: exit %d", args, r.code)
			}
		}
	})
}

// auditKey is a record's key in the audit store (docs/audit.md): 'r',
// the tenant, a 0 byte, the index as 8 bytes big endian.
func auditKey(tenant string, index uint64) []byte {
	k := append([]byte{'r'}, tenant...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, index)
}

func pebbleGet(t *testing.T, db *pebble.DB, k []byte) []byte {
	t.Helper()
	v, closer, err := db.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	return append([]byte(nil), v...)
}

func pebbleSet(t *testing.T, db *pebble.DB, k, v []byte) {
	t.Helper()
	if err := db.Set(k, v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the regular files of src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			in.Close()
			t.Fatal(err)
		}
		_, err = io.Copy(out, in)
		in.Close()
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// auditPage reads GET /api/v1/audit.
func (a *hardenAPI) auditPage(t *testing.T, after uint64, limit int) messages.AuditPage {
	t.Helper()
	code, _, b := a.call(t, http.MethodGet, fmt.Sprintf("/api/v1/audit?after=%d&limit=%d", after, limit), "")
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/audit = %d %s", code, b)
	}
	var p messages.AuditPage
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// approvedPlan runs a council whose plan is approved, to its end, and
// returns its session.
func (a *hardenAPI) approvedPlan(t *testing.T) messages.SessionID {
	t.Helper()
	rc := a.mustStartRun(t, `{"question":"q","hitl":"plan","scenario":{"nodes":2}}`)
	s := a.mustStream(t, rc.SessionID, 0)
	defer s.close()
	id, err := s.untilInterrupt()
	if err != nil {
		t.Fatal(err)
	}
	if code, _, b := a.call(t, http.MethodPost, "/api/v1/interrupts/"+url.PathEscape(id)+"/resume", `{"decision":"approve"}`); code != http.StatusOK {
		t.Fatalf("approve = %d %s", code, b)
	}
	if env, _, err := s.untilTerminal(); err != nil || env.Type != messages.RunFinished {
		t.Fatalf("run %s ended with %s: %v", rc.RunID, describe(env), err)
	}
	return rc.SessionID
}

// abortedWhileParked aborts a run parked on its plan approval and returns
// its session.
func (a *hardenAPI) abortedWhileParked(t *testing.T) messages.SessionID {
	t.Helper()
	rc := a.mustStartRun(t, `{"question":"q","hitl":"plan","scenario":{"nodes":2}}`)
	s := a.mustStream(t, rc.SessionID, 0)
	defer s.close()
	if _, err := s.untilInterrupt(); err != nil {
		t.Fatal(err)
	}
	if code, _, b := a.call(t, http.MethodPost, "/api/v1/runs/"+url.PathEscape(string(rc.RunID))+"/abort", ""); code != http.StatusAccepted {
		t.Fatalf("abort = %d %s", code, b)
	}
	if env, _, err := s.untilTerminal(); err != nil || runErrorCode(env) != messages.ErrCodeAborted {
		t.Fatalf("run %s ended with %s: %v", rc.RunID, describe(env), err)
	}
	return rc.SessionID
}

// TestAudit_CatchUpAfterLostCommit: the audit log's commits of a session's
// decisions are lost (its records cut from the stored log, the head and
// the session's cursor rolled back, as if the process had died between
// the journal's fsync and the audit log's); the next `conclave serve`
// records them again from the journal, once, and the log verifies.
func TestAudit_CatchUpAfterLostCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServe(t, 0, nil, "--data", dir, "--runs-per-second", "-1")
	a := newHardenAPI(t, srv, "")
	a.approvedPlan(t)
	lost := a.abortedWhileParked(t)
	want := a.auditPage(t, 0, 200)
	if want.Head != 3 {
		t.Fatalf("head %d, want 3 (plan approval, interrupt cancelled, abort)", want.Head)
	}
	srv.terminate()

	db, err := pebble.Open(filepath.Join(dir, "audit"), &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range want.Records[1:] {
		if r.SessionID != lost {
			t.Fatalf("record %d is of session %s, want %s", r.Index, r.SessionID, lost)
		}
		if err := db.Delete(auditKey("local", r.Index), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	head, err := json.Marshal(struct {
		Index uint64 `json:"index"`
		Hash  string `json:"hash"`
	}{1, want.Records[0].Hash})
	if err != nil {
		t.Fatal(err)
	}
	hk := []byte("hlocal")
	pebbleSet(t, db, hk, sealed(hk, head))
	if err := db.Delete(append([]byte("clocal/"), lost...), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, t.Context(), nil, false, "audit", "verify", "--data", dir); r.code != exitOK || !strings.Contains(r.stdout, "tenant local: 1 records verified") {
		t.Fatalf("verify the rolled-back log: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	srv = startServe(t, 0, nil, "--data", dir, "--runs-per-second", "-1")
	if !srv.logged("audit log caught up with the journal", auditWait) {
		t.Fatal("no catch-up logged")
	}
	a = newHardenAPI(t, srv, "")
	got := a.auditPage(t, 0, 200)
	if got.Head != 3 {
		t.Fatalf("after the catch-up: head %d, want 3: %+v", got.Head, got.Records)
	}
	for i, r := range got.Records {
		w := want.Records[i]
		if r.Kind != w.Kind || r.SessionID != w.SessionID || r.Seq != w.Seq || r.InterruptID != w.InterruptID || !r.Time.Equal(w.Time) {
			t.Fatalf("record %d after the catch-up: %+v, want %+v", r.Index, r, w)
		}
	}
	srv.terminate()
	if r := runCLI(t, t.Context(), nil, false, "audit", "verify", "--data", dir); r.code != exitOK || !strings.Contains(r.stdout, "tenant local: 3 records verified") {
		t.Fatalf("verify after the catch-up: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// sealed is a sealed value of the audit store (docs/audit.md): the
// SHA-256 of the key and the body, then the body.
func sealed(key, body []byte) []byte {
	h := sha256.New()
	h.Write(key)
	h.Write(body)
	return append(h.Sum(nil), body...)
}

// quietPebble is a pebble.Logger that keeps the tests' output clean.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// TestAudit_LostWALRebuiltFromJournal (issue 27 item 6): after a kill -9
// the audit log's write-ahead log is deleted, so its store opens empty
// while the journal still holds every decision. `audit verify --data` must
// not call that log intact, and the next `conclave serve` derives the same
// records again from the journal instead of starting over at index 1 with
// nothing before it.
func TestAudit_LostWALRebuiltFromJournal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServe(t, 0, nil, "--data", dir, "--runs-per-second", "-1")
	a := newHardenAPI(t, srv, "")
	a.approvedPlan(t)
	a.abortedWhileParked(t)
	want := a.auditPage(t, 0, 200)
	if want.Head < 3 {
		t.Fatalf("head %d, want at least 3", want.Head)
	}
	if err := srv.cmd.Process.Kill(); err != nil { // kill -9
		t.Fatal(err)
	}
	srv.reap()
	wals, err := filepath.Glob(filepath.Join(dir, "audit", "*.log"))
	if err != nil || len(wals) == 0 {
		t.Fatalf("no audit write-ahead log: %v", err)
	}
	for _, w := range wals {
		if err := os.Remove(w); err != nil {
			t.Fatal(err)
		}
	}
	if r := runCLI(t, t.Context(), nil, false, "audit", "verify", "--data", dir); r.code == exitOK || !strings.Contains(r.stderr, "no start mark") {
		t.Fatalf("verify of the emptied log: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	srv = startServe(t, 0, nil, "--data", dir, "--runs-per-second", "-1")
	if !srv.logged("derived the log from the journal", auditWait) {
		t.Fatal("no rebuild logged")
	}
	a = newHardenAPI(t, srv, "")
	got := a.auditPage(t, 0, 200)
	if got.Head != want.Head || len(got.Records) != len(want.Records) {
		t.Fatalf("after the loss: head %d (%d records), want %d", got.Head, len(got.Records), want.Head)
	}
	for i, r := range got.Records {
		w := want.Records[i]
		if r.Index != w.Index || r.Kind != w.Kind || r.SessionID != w.SessionID || r.Seq != w.Seq || r.InterruptID != w.InterruptID || !r.Time.Equal(w.Time) {
			t.Fatalf("record %d after the rebuild: %s %s seq %d, want %s %s seq %d", r.Index, r.Kind, r.SessionID, r.Seq, w.Kind, w.SessionID, w.Seq)
		}
	}
	a.approvedPlan(t) // numbering goes on after the rebuilt records
	if next := a.auditPage(t, want.Head, 200); len(next.Records) == 0 || next.Records[0].Index != want.Head+1 {
		t.Fatalf("after the rebuild, the next record: %+v", next.Records)
	}
	srv.terminate()
	if r := runCLI(t, t.Context(), nil, false, "audit", "verify", "--data", dir); r.code != exitOK {
		t.Fatalf("verify after the rebuild: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
