// Package workspace is the built-in workspace tools: a directory per run
// where agents write, read and list files. Three tools share it —
// workspace.write, workspace.read and workspace.list — each confined to
// the run's directory by os.Root (no "..", no absolute path, no symlink
// leading out), with caps on a file's size, a run's file count and a run's
// total bytes. A write's file is also published as a file event on the
// writing agent's lane (tool.Result.Files).
package workspace

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/tool"
)

// Tool names.
const (
	WriteName = "workspace.write"
	ReadName  = "workspace.read"
	ListName  = "workspace.list"
)

// Defaults of Limits.
const (
	// DefaultMaxFileBytes bounds a file: its whole content travels in the
	// file event and in the model's context when read back.
	DefaultMaxFileBytes = 64 << 10
	// DefaultMaxFiles bounds a run's files.
	DefaultMaxFiles = 64
	// DefaultMaxTotalBytes bounds a run's files together.
	DefaultMaxTotalBytes = 1 << 20
	// maxPathBytes bounds a path argument.
	maxPathBytes = 256
)

// Errors.
var (
	// ErrPath: a path that is empty, absolute, has ".." or leads out of
	// the run's directory.
	ErrPath = errors.New("workspace: invalid path")
	// ErrLimit: a write past a cap.
	ErrLimit = errors.New("workspace: limit reached")
	// ErrNoRun: a call without a run (the engine always gives one).
	ErrNoRun = errors.New("workspace: the call has no run")
)

// Limits are a run's caps; zero fields take the defaults.
type Limits struct {
	MaxFileBytes  int64
	MaxFiles      int
	MaxTotalBytes int64
}

// Config configures the workspace tools.
type Config struct {
	// Dir holds the runs' directories, Dir/<tenant>/<run id> (tenant
	// "local" for a run without one); it is created if missing. Required.
	Dir    string
	Limits Limits
}

// Workspace is the directory of every run's workspace, and the tools that
// use it. It is safe for concurrent use.
type Workspace struct {
	dir    string
	limits Limits
	// mu serialises writes, so that a write's check of the run's caps and
	// the write itself are one step (reads and lists need no lock: a file
	// is replaced whole by a rename).
	mu sync.Mutex
}

// New returns the workspace of cfg, creating its directory.
func New(cfg Config) (*Workspace, error) {
	if cfg.Dir == "" {
		return nil, errors.New("workspace: no directory")
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	l := cfg.Limits
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultMaxTotalBytes
	}
	return &Workspace{dir: cfg.Dir, limits: l}, nil
}

// Tools returns the three tools.
func (w *Workspace) Tools() []tool.Tool {
	return []tool.Tool{writeTool{w}, readTool{w}, listTool{w}}
}

// Dir is the directory of the workspace of tenant's run (tenant empty:
// messages.LocalTenant).
func (w *Workspace) Dir(tenant messages.TenantID, run messages.RunID) string {
	return filepath.Join(w.dir, string(cmp.Or(tenant, messages.LocalTenant)), string(run))
}

// root opens the directory of the call's run (created if missing) as an
// os.Root, which refuses every path that leads out of it.
func (w *Workspace) root(ctx context.Context) (*os.Root, error) {
	ci, ok := tool.CallInfoFrom(ctx)
	if !ok {
		return nil, ErrNoRun
	}
	// Both are ids of messages' pattern ([A-Za-z0-9_-]): path elements.
	if _, err := messages.NewRunID(string(ci.RunID)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoRun, err)
	}
	if _, err := messages.NewTenantID(string(cmp.Or(ci.Tenant, messages.LocalTenant))); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoRun, err)
	}
	dir := w.Dir(ci.Tenant, ci.RunID)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	return os.OpenRoot(dir)
}

// cleanPath checks a path argument: relative, '/'-separated, without
// ".." or empty elements; it returns it cleaned.
func cleanPath(p string) (string, error) {
	switch {
	case p == "" || len(p) > maxPathBytes:
		return "", fmt.Errorf("%w: %q: a path is 1 to %d bytes", ErrPath, p, maxPathBytes)
	case strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || filepath.IsAbs(p):
		return "", fmt.Errorf("%w: %q: absolute paths are refused; give a path relative to the workspace", ErrPath, p)
	case !utf8.ValidString(p) || strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "", fmt.Errorf("%w: %q: control characters or invalid UTF-8", ErrPath, p)
	}
	c := path.Clean(p)
	if !fs.ValidPath(c) || c == "." || slices.Contains(strings.Split(p, "/"), "..") {
		return "", fmt.Errorf("%w: %q: \"..\" is refused; the workspace is the run's directory", ErrPath, p)
	}
	return c, nil
}

// usage is the run's files and their total size, but for skip.
func usage(root *os.Root, skip string) (files int, total int64, err error) {
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && p != skip {
			info, err := d.Info()
			if err != nil {
				return err
			}
			files++
			total += info.Size()
		}
		return nil
	})
	return files, total, err
}

// write writes content to p in the run's directory.
func (w *Workspace) write(ctx context.Context, p, content string) (tool.Result, error) {
	p, err := cleanPath(p)
	if err != nil {
		return tool.Result{}, err
	}
	if !utf8.ValidString(content) {
		return tool.Result{}, errors.New("workspace: content must be UTF-8 text")
	}
	size := int64(len(content))
	if size > w.limits.MaxFileBytes {
		return tool.Result{}, fmt.Errorf("%w: %d bytes; a file holds at most %d", ErrLimit, size, w.limits.MaxFileBytes)
	}
	root, err := w.root(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	defer root.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	files, total, err := usage(root, p)
	if err != nil {
		return tool.Result{}, fmt.Errorf("workspace: %w", err)
	}
	if files+1 > w.limits.MaxFiles { // files leaves p out: replacing a file is no new file
		return tool.Result{}, fmt.Errorf("%w: the run has %d files, the most it may have", ErrLimit, files)
	}
	if total+size > w.limits.MaxTotalBytes {
		return tool.Result{}, fmt.Errorf("%w: the run's files would hold %d bytes, more than %d", ErrLimit, total+size, w.limits.MaxTotalBytes)
	}
	if dir := path.Dir(p); dir != "." {
		if err := root.MkdirAll(dir, 0o750); err != nil {
			return tool.Result{}, pathError(p, err)
		}
	}
	// Write a temporary file, then rename it over p: a reader sees the
	// old file or the new one, never half of it.
	tmp := p + ".tmp-write"
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return tool.Result{}, pathError(p, err)
	}
	_, err = io.WriteString(f, content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, p)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return tool.Result{}, pathError(p, err)
	}
	return tool.Result{
		Content: fmt.Sprintf("wrote %s (%d bytes)", p, size),
		Files:   []messages.FilePayload{{Path: p, Size: size, Encoding: messages.FileEncodingUTF8, Content: content}},
	}, nil
}

// pathError is err of an operation on p, as ErrPath when os.Root refused
// a path leading out of the run's directory.
func pathError(p string, err error) error {
	if strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("%w: %q leads out of the workspace", ErrPath, p)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("workspace: %s: %v", p, pe.Err)
	}
	return fmt.Errorf("workspace: %s: %w", p, err)
}

// read returns the content of p.
func (w *Workspace) read(ctx context.Context, p string) (tool.Result, error) {
	p, err := cleanPath(p)
	if err != nil {
		return tool.Result{}, err
	}
	root, err := w.root(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	defer root.Close()
	f, err := root.Open(p)
	if err != nil {
		return tool.Result{}, pathError(p, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, w.limits.MaxFileBytes+1))
	if err != nil {
		return tool.Result{}, pathError(p, err)
	}
	if int64(len(b)) > w.limits.MaxFileBytes {
		return tool.Result{}, fmt.Errorf("%w: %s is larger than %d bytes", ErrLimit, p, w.limits.MaxFileBytes)
	}
	return tool.Result{Content: strings.ToValidUTF8(string(b), "\uFFFD")}, nil
}

// list lists the run's files, one "path (size bytes)" per line.
func (w *Workspace) list(ctx context.Context) (tool.Result, error) {
	root, err := w.root(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	defer root.Close()
	var b strings.Builder
	n := 0
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || n >= w.limits.MaxFiles {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n++
		fmt.Fprintf(&b, "%s (%d bytes)\n", p, info.Size())
		return nil
	})
	if err != nil {
		return tool.Result{}, fmt.Errorf("workspace: %w", err)
	}
	if n == 0 {
		return tool.Result{Content: "the workspace is empty"}, nil
	}
	return tool.Result{Content: b.String()}, nil
}

type writeTool struct{ w *Workspace }
type readTool struct{ w *Workspace }
type listTool struct{ w *Workspace }

// Risk of a write: medium. It changes state that outlives the call (a
// file other agents read and the run's stream publishes), but only inside
// the run's own bounded directory; it cannot touch anything else.
func (t writeTool) Def() tool.Def {
	return tool.Def{Name: WriteName, DisplayName: "Write file", Risk: tool.RiskMedium,
		Description: fmt.Sprintf("Write a UTF-8 text file in this run's workspace (replacing it if it exists). "+
			"The path is relative ('notes/summary.md'); '..' and absolute paths are refused. At most %d bytes a file, %d files and %d bytes a run.",
			t.w.limits.MaxFileBytes, t.w.limits.MaxFiles, t.w.limits.MaxTotalBytes),
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["path","content"],"properties":{` +
			`"path":{"type":"string","description":"the file's path, relative to the workspace","default":"notes.md","examples":["notes.md","data/table.csv"]},` +
			`"content":{"type":"string","description":"the whole file","default":"# Notes\n\nWritten by a worker of this run.\n"}}}`)}
}

func (t writeTool) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	var in struct{ Path, Content string }
	if err := json.Unmarshal(args, &in); err != nil {
		return tool.Result{}, fmt.Errorf("%w: %v", tool.ErrInvalidArgs, err)
	}
	return t.w.write(ctx, in.Path, in.Content)
}

func (t readTool) Def() tool.Def {
	return tool.Def{Name: ReadName, DisplayName: "Read file", Risk: tool.RiskLow,
		Description: "Read a file of this run's workspace (written by an agent of the run with workspace.write).",
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["path"],"properties":{` +
			`"path":{"type":"string","description":"the file's path, relative to the workspace","default":"notes.md"}}}`)}
}

func (t readTool) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	var in struct{ Path string }
	if err := json.Unmarshal(args, &in); err != nil {
		return tool.Result{}, fmt.Errorf("%w: %v", tool.ErrInvalidArgs, err)
	}
	return t.w.read(ctx, in.Path)
}

func (t listTool) Def() tool.Def {
	return tool.Def{Name: ListName, DisplayName: "List files", Risk: tool.RiskLow,
		Description: "List the files of this run's workspace with their sizes.",
		Schema:      json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`)}
}

func (t listTool) Call(ctx context.Context, _ json.RawMessage) (tool.Result, error) {
	return t.w.list(ctx)
}
