package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
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
