package workspace_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/tool"
	"github.com/conclave-ai/conclave/tool/workspace"
)

func newWorkspace(t *testing.T, l workspace.Limits) (*workspace.Workspace, *tool.Set) {
	t.Helper()
	w, err := workspace.New(workspace.Config{Dir: t.TempDir(), Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	set, err := tool.NewSet(w.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	return w, set
}

func runCtx(t *testing.T, run string) context.Context {
	return tool.WithCallInfo(t.Context(), tool.CallInfo{Tenant: "acme", RunID: messages.RunID(run), AgentID: "n001"})
}

// call validates args against the tool's schema (as the engine does) and
// calls it.
func call(ctx context.Context, t *testing.T, set *tool.Set, name string, args any) (tool.Result, error) {
	t.Helper()
	raw, _ := json.Marshal(args)
	if err := set.Validate(name, raw); err != nil {
		return tool.Result{}, err
	}
	tl, _, _ := set.Lookup(name)
	return tl.Call(ctx, raw)
}

func TestWorkspace_WriteReadList(t *testing.T) {
	t.Parallel()
	w, set := newWorkspace(t, workspace.Limits{})
	ctx := runCtx(t, "run1")
	res, err := call(ctx, t, set, workspace.WriteName, map[string]string{"path": "notes/a.md", "content": "héllo"})
	if err != nil {
		t.Fatal(err)
	}
	want := []messages.FilePayload{{Path: "notes/a.md", Size: 6, Encoding: "utf-8", Content: "héllo"}}
	if len(res.Files) != 1 || res.Files[0] != want[0] || res.Content != "wrote notes/a.md (6 bytes)" {
		t.Errorf("write: %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(w.Dir("acme", "run1"), "notes", "a.md")); err != nil || string(b) != "héllo" {
		t.Errorf("on disk: %q, %v", b, err)
	}
	if res, err := call(ctx, t, set, workspace.ReadName, map[string]string{"path": "./notes//a.md"}); err != nil || res.Content != "héllo" {
		t.Errorf("read: %+v, %v", res, err)
	}
	if res, err := call(ctx, t, set, workspace.ListName, map[string]string{}); err != nil || res.Content != "notes/a.md (6 bytes)\n" {
		t.Errorf("list: %+v, %v", res, err)
	}
	// Another run sees its own, empty, workspace.
	other := runCtx(t, "run2")
	if res, err := call(other, t, set, workspace.ListName, map[string]string{}); err != nil || res.Content != "the workspace is empty" {
		t.Errorf("other run's list: %+v, %v", res, err)
	}
	if _, err := call(other, t, set, workspace.ReadName, map[string]string{"path": "notes/a.md"}); err == nil {
		t.Error("another run reads this run's file")
	}
	// Another tenant's run of the same id too.
	otherTenant := tool.WithCallInfo(t.Context(), tool.CallInfo{Tenant: "globex", RunID: "run1"})
	if res, err := call(otherTenant, t, set, workspace.ListName, map[string]string{}); err != nil || res.Content != "the workspace is empty" {
		t.Errorf("other tenant's list: %+v, %v", res, err)
	}
	for _, ci := range []tool.CallInfo{{}, {RunID: "../run1"}, {Tenant: "..", RunID: "run1"}} {
		ctx := tool.WithCallInfo(t.Context(), ci)
		if _, err := call(ctx, t, set, workspace.ListName, map[string]string{}); !errors.Is(err, workspace.ErrNoRun) {
			t.Errorf("%+v: %v; want ErrNoRun", ci, err)
		}
	}
	if _, err := call(t.Context(), t, set, workspace.ListName, map[string]string{}); !errors.Is(err, workspace.ErrNoRun) {
		t.Errorf("no run: %v", err)
	}
}

func TestWorkspace_CannotEscape(t *testing.T) {
	t.Parallel()
	w, set := newWorkspace(t, workspace.Limits{})
	ctx := runCtx(t, "run1")
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(w.Dir("acme", "run1"), 0o750); err != nil {
		t.Fatal(err)
	}
	// Symlinks planted in the run's directory (by anything but the tools).
	if err := os.Symlink(outside, filepath.Join(w.Dir("acme", "run1"), "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(w.Dir("acme", "run1"), "link")); err != nil {
		t.Fatal(err)
	}
	bad := []string{"../escape", "a/../../escape", "..", "/etc/passwd", "/tmp/x", `..\x`, "", "out/secret", "out/new", "out/sub/new"}
	for _, p := range append(bad, "link") {
		if res, err := call(ctx, t, set, workspace.ReadName, map[string]string{"path": p}); !errors.Is(err, workspace.ErrPath) {
			t.Errorf("read %q: %+v, %v; want ErrPath", p, res, err)
		}
	}
	for _, p := range bad {
		if _, err := call(ctx, t, set, workspace.WriteName, map[string]string{"path": p, "content": "x"}); !errors.Is(err, workspace.ErrPath) {
			t.Errorf("write %q: %v; want ErrPath", p, err)
		}
	}
	// Writing "link" replaces the symlink itself (a rename), never its target.
	if _, err := call(ctx, t, set, workspace.WriteName, map[string]string{"path": "link", "content": "x"}); err != nil {
		t.Errorf("write link: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "outside" {
		t.Errorf("the file outside was changed: %q", b)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("files were created outside: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(w.Dir("acme", "run1")), "escape")); err == nil {
		t.Error("../escape was written")
	}
}

func TestWorkspace_Limits(t *testing.T) {
	t.Parallel()
	_, set := newWorkspace(t, workspace.Limits{MaxFileBytes: 10, MaxFiles: 2, MaxTotalBytes: 15})
	ctx := runCtx(t, "run1")
	write := func(p, content string) error {
		_, err := call(ctx, t, set, workspace.WriteName, map[string]string{"path": p, "content": content})
		return err
	}
	if err := write("big", strings.Repeat("x", 11)); !errors.Is(err, workspace.ErrLimit) {
		t.Errorf("11 bytes: %v; want ErrLimit", err)
	}
	if err := write("a", strings.Repeat("x", 10)); err != nil {
		t.Fatal(err)
	}
	if err := write("b", strings.Repeat("x", 6)); !errors.Is(err, workspace.ErrLimit) {
		t.Errorf("16 bytes in all: %v; want ErrLimit", err)
	}
	if err := write("b", strings.Repeat("x", 5)); err != nil {
		t.Fatal(err)
	}
	if err := write("c", "x"); !errors.Is(err, workspace.ErrLimit) {
		t.Errorf("a third file: %v; want ErrLimit", err)
	}
	// Replacing a file counts its new size, not both.
	if err := write("a", strings.Repeat("y", 10)); err != nil {
		t.Errorf("replace a: %v", err)
	}
}
