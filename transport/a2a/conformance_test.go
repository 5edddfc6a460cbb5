package a2a_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport"
	"github.com/conclave-ai/conclave/transport/a2a"
)

// conformanceDir holds the Node scripts that drive the server with the
// official A2A client (see its README).
const conformanceDir = "../../conformance/a2a"

// TestConformance_Node runs the Node conformance scripts against the A2A
// handler mounted beside the transport server, as conclave serve mounts it.
// It needs node and `npm ci` in conformance/a2a, so it runs only with
// NODE_CONFORMANCE=1; conformance/a2a/run.sh runs the same scripts against
// a real `conclave serve`.
func TestConformance_Node(t *testing.T) {
	if os.Getenv("NODE_CONFORMANCE") != "1" {
		t.Skip("set NODE_CONFORMANCE=1 (needs node and npm ci in conformance/a2a)")
	}
	if _, err := os.Stat(filepath.Join(conformanceDir, "node_modules", "@a2a-js", "sdk")); err != nil {
		t.Fatalf("run `npm ci` in conformance/a2a first: %v", err)
	}
	e := testkit.NewEngine(t, actors.Config{})
	srv, err := transport.New(transport.Config{Engine: e, Logger: testkit.TestLogger(t, 8)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := a2a.New(a2a.Config{Engine: e, Logger: testkit.TestLogger(t, 8)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(a2a.CardPath, h.Card())
	mux.Handle(a2a.RPCPath, h.RPC())
	mux.Handle("/", srv.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("a2a shutdown: %v", err)
		}
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
		hs.Close()
	})
	scripts, err := filepath.Glob(filepath.Join(conformanceDir, "[a-z]*.mjs"))
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, script := range scripts {
		name := filepath.Base(script)
		if name == "lib.mjs" || name == "remote.mjs" {
			continue // remote.mjs checks Conclave's A2A client: it starts a conclave binary of its own (run.sh)
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", name, hs.URL)
			cmd.Dir = conformanceDir
			out, err := cmd.CombinedOutput()
			t.Logf("%s", out)
			if err != nil {
				t.Fatalf("node %s: %v", name, err)
			}
		})
	}
}
