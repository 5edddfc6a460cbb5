package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/tool"
)

// TestRun_BuiltinTools: `conclave run --tool-fetch --tool-workspace` with a
// scenario whose calls name fetch and workspace.write runs to
// run_finished: every worker fetches the local page (allowed by exactly
// its ip:port), which becomes a citation, and writes a file, published as
// a file event; the events pass the invariants. Without --fetch-allow the
// same fetch is refused.
func TestRun_BuiltinTools(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Rayleigh</title></head><body><p>Short wavelengths scatter more.</p></body></html>`)
	}))
	t.Cleanup(srv.Close)
	sc := filepath.Join(t.TempDir(), "scenario.json")
	if err := os.WriteFile(sc, []byte(`{"nodes":2,"waves":1,"tokens":3,"seed":4,"calls":["fetch","workspace.write"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	args := []string{"run", "why is the sky blue", "--json", "--scenario", sc, "--tool-fetch", "--tool-workspace", "--fetch-default-url", srv.URL + "/sky"}

	r := runCLI(t, t.Context(), nil, false, append(args, "--fetch-allow", hostPort)...)
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	assertNoViolations(t, events)
	fetched, files := 0, 0
	for _, env := range events {
		switch p := env.Payload.(type) {
		case *messages.ToolCallFinishedPayload:
			if p.Tool == "fetch" {
				fetched++
				if p.IsError || !strings.Contains(p.Result, "Short wavelengths scatter more.") {
					t.Errorf("fetch result %+v", p)
				}
			}
		case *messages.FilePayload:
			files++
			if p.Path != "notes.md" || p.Tool != "workspace.write" {
				t.Errorf("file event %+v", p)
			}
		}
	}
	last := events[len(events)-1]
	fin, ok := last.Payload.(*messages.RunFinishedPayload)
	if !ok {
		t.Fatalf("last event %s", last.Type)
	}
	if fetched != 2 || files != 2 {
		t.Errorf("%d fetch results, %d file events; want 2 of each", fetched, files)
	}
	if len(fin.Citations) != 1 || fin.Citations[0].URL != srv.URL+"/sky" || fin.Citations[0].Title != "Rayleigh" {
		t.Errorf("citations %+v", fin.Citations)
	}

	// The same run without the allowance: fetch is refused (the run goes on).
	r = runCLI(t, t.Context(), nil, false, args...)
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	refused := 0
	for _, env := range decodeJSONL(t, r.stdout) {
		if p, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok && p.Tool == "fetch" && p.IsError &&
			strings.Contains(p.Result, "refused address") && strings.Contains(p.Result, "is loopback") {
			refused++
		}
	}
	if refused != 2 {
		t.Errorf("%d refused fetches, want 2", refused)
	}
}

// TestRun_BuiltinToolsFlags: the built-in tools' options without the tool
// are usage errors.
func TestRun_BuiltinToolsFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--fetch-allow-private"}, {"--fetch-allow", "127.0.0.1:80"}, {"--workspace-dir", t.TempDir()},
		{"--tool-fetch", "--fetch-allow", "localhost"}} {
		r := runCLI(t, t.Context(), nil, false, append([]string{"run", "q"}, args...)...)
		if r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr:\n%s", args, r.code, exitUsage, r.stderr)
		}
	}
}

// TestToolFlags_EngineToolsWorkspaceDir: the workspaces live in the
// default directory (serve: DATA/workspaces) or --workspace-dir, kept at
// shutdown; without either, in a temporary directory stopTools removes.
func TestToolFlags_EngineToolsWorkspaceDir(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.DiscardHandler)
	data := filepath.Join(t.TempDir(), "workspaces")
	for _, tc := range []struct {
		name    string
		flags   toolFlags
		dir     string // "": a temporary one
		removed bool
	}{
		{"serve", toolFlags{workspace: true, fetch: true, defaultWorkspaceDir: data}, data, false},
		{"--workspace-dir", toolFlags{workspace: true, workspaceDir: data + "2", defaultWorkspaceDir: data}, data + "2", false},
		{"run", toolFlags{workspace: true}, "", true},
	} {
		set, rt, err := tc.flags.engineTools(t.Context(), logger, true)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		tl, _, ok := set.Lookup("workspace.write")
		if !ok {
			t.Fatalf("%s: no workspace.write in %v", tc.name, set.Names())
		}
		if _, _, ok := set.Lookup("search"); !ok { // the scripted model's tools stay
			t.Errorf("%s: no scripted search in %v", tc.name, set.Names())
		}
		ctx := tool.WithCallInfo(t.Context(), tool.CallInfo{Tenant: "acme", RunID: "r1"})
		if _, err := tl.Call(ctx, json.RawMessage(`{"path":"a.md","content":"x"}`)); err != nil {
			t.Fatalf("%s: write: %v", tc.name, err)
		}
		var written []string
		if tc.dir != "" {
			written, _ = filepath.Glob(filepath.Join(tc.dir, "acme", "r1", "a.md"))
		} else {
			written, _ = filepath.Glob(filepath.Join(os.TempDir(), "conclave-workspaces-*", "acme", "r1", "a.md"))
		}
		if len(written) == 0 {
			t.Fatalf("%s: a.md is not under %q", tc.name, tc.dir)
		}
		if err := stopTools(rt, logger); err != nil {
			t.Fatal(err)
		}
		_, err = os.Stat(written[0])
		if removed := errors.Is(err, fs.ErrNotExist); removed != tc.removed {
			t.Errorf("%s: removed at shutdown = %v, want %v", tc.name, removed, tc.removed)
		}
	}
}

// TestServe_BuiltinTools: `conclave serve --tool-fetch --tool-workspace`
// lists the built-in tools on GET /api/v1/tools with their risks, and a
// run whose scenario calls them writes its file under
// DATA/workspaces/<tenant>/<run id>.
func TestServe_BuiltinTools(t *testing.T) {
	t.Parallel()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "blue light scatters")
	}))
	t.Cleanup(page.Close)
	data := t.TempDir()
	srv := startServe(t, 0, nil, "--data", data, "--tool-fetch", "--tool-workspace",
		"--fetch-allow", strings.TrimPrefix(page.URL, "http://"), "--fetch-default-url", page.URL+"/sky")
	base := "http://" + srv.base

	resp, err := http.Get(base + "/api/v1/tools")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Tools []messages.ToolInfo `json:"tools"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	risks := map[string]messages.RiskLevel{}
	for _, ti := range list.Tools {
		risks[ti.Name] = ti.Risk
	}
	want := map[string]messages.RiskLevel{"fetch": messages.RiskLow, "workspace.write": messages.RiskMedium, "workspace.read": messages.RiskLow, "workspace.list": messages.RiskLow}
	for name, risk := range want {
		if risks[name] != risk {
			t.Errorf("GET /api/v1/tools: %s has risk %q, want %q (%v)", name, risks[name], risk, risks)
		}
	}

	b, _ := json.Marshal(messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, Calls: []string{"fetch", "workspace.write"}}})
	resp, err = http.Post(base+"/api/v1/runs", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var rc messages.RunCreated
	err = json.NewDecoder(resp.Body).Decode(&rc)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || err != nil {
		t.Fatalf("POST run: %d, %v", resp.StatusCode, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), crashWait)
	defer cancel()
	events := readSession(ctx, t, base, rc.SessionID, rc.RunID)
	assertNoViolations(t, events)
	if last := events[len(events)-1]; last.Type != messages.RunFinished {
		t.Fatalf("the run ended with %s", last.Type)
	}
	if got, err := os.ReadFile(filepath.Join(data, "workspaces", "local", string(rc.RunID), "notes.md")); err != nil || !strings.HasPrefix(string(got), "# Notes") {
		t.Errorf("DATA/workspaces/local/%s/notes.md: %q, %v", rc.RunID, got, err)
	}
}

// TestRun_Files: `conclave run --file` attaches files to the run
// (run_started records them with their bytes; a file over the limit is a
// usage error naming --file), and the summary lists the files the run's
// agents wrote, with files_bytes.
func TestRun_Files(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notes := filepath.Join(dir, "brief.md")
	if err := os.WriteFile(notes, []byte("# Brief\nThe sky."), 0o600); err != nil {
		t.Fatal(err)
	}
	sc := filepath.Join(dir, "scenario.json")
	if err := os.WriteFile(sc, []byte(`{"nodes":2,"waves":1,"tokens":3,"seed":4,"calls":["workspace.write"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "why is the sky blue", "--scenario", sc, "--tool-workspace", "--file", notes}
	r := runCLI(t, t.Context(), nil, false, append(args, "--json")...)
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	st := events[0].Payload.(*messages.RunStartedPayload)
	if len(st.Files) != 1 || st.Files[0].Name != "brief.md" || string(st.Files[0].Data) != "# Brief\nThe sky." || st.Files[0].MediaType != "text/markdown" {
		t.Fatalf("run_started files %+v", st.Files)
	}
	fin := events[len(events)-1].Payload.(*messages.RunFinishedPayload)
	if fin.FilesBytes == 0 {
		t.Fatalf("files_bytes 0 after two writes")
	}
	if !strings.Contains(fin.Answer, "(with the attached files brief.md)") {
		t.Errorf("the answer does not name the attached file: %q", fin.Answer)
	}

	r = runCLI(t, t.Context(), nil, false, args...)
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	out := r.stdout + r.stderr
	if want := fmt.Sprintf("files written: 1 (%d bytes written in all)\n", fin.FilesBytes); !strings.Contains(out, want) || !strings.Contains(out, "  notes.md ") {
		t.Errorf("no %q and notes.md line in\n%s", want, out)
	}

	big := filepath.Join(dir, "big.txt")
	if err := os.WriteFile(big, bytes.Repeat([]byte("a"), messages.MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, t.Context(), nil, false, "run", "q", "--file", big)
	if r.code != exitUsage || !strings.Contains(r.stderr, "invalid --file (file_too_large): files[0]") {
		t.Errorf("a file over the limit: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}
