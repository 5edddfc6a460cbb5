package agui_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport/agui"
)

// TestConformance_Node runs the Node conformance scripts of
// conformance/agui (the official @ag-ui/client) against this handler
// served with the rest of the API, without a conclave binary. It needs
// node and `npm ci` in conformance/agui, so it runs only with
// NODE_CONFORMANCE=1; CI runs the same scripts against `conclave serve`
// with conformance/agui/run.sh.
func TestConformance_Node(t *testing.T) {
	if os.Getenv("NODE_CONFORMANCE") != "1" {
		t.Skip("set NODE_CONFORMANCE=1 (after npm ci in conformance/agui) to run the Node conformance scripts")
	}
	dir, err := filepath.Abs("../../conformance/agui")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@ag-ui", "client")); err != nil {
		t.Fatalf("run npm ci in %s first: %v", dir, err)
	}
	h := newHarness(t, agui.Config{})
	for _, script := range []string{"council.mjs", "parallel.mjs", "abort.mjs", "hitl.mjs"} {
		t.Run(script, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", script, h.srv.URL)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			t.Logf("%s", out)
			if err != nil {
				t.Fatalf("node %s: %v", script, err)
			}
		})
	}
}
