package conclave_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeSection is the README section whose Go block TestReadme_TestingYourCouncil runs.
const readmeSection = "## Testing your council"

// maxExampleLines is what the issue allows the section's test.
const maxExampleLines = 40

// TestReadme_TestingYourCouncil runs the README's "Testing your council"
// test as its reader would: from a module of its own, which depends on
// this one through a replace directive. It writes that module to a
// temporary directory (the README's Go block as its test file, this
// module's go.sum, so that nothing new needs a checksum) and runs go test
// in it, with GOFLAGS=-mod=mod and the environment's GOPROXY: offline,
// the module cache must hold this module's dependencies (go mod download).
func TestReadme_TestingYourCouncil(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs an outside module: not with -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	code, err := goBlockOf(string(readme), readmeSection)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(code, "\n"); n >= maxExampleLines {
		t.Errorf("the README's test has %d lines, want fewer than %d", n, maxExampleLines)
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	goVersion, err := goDirective("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := "module example.com/weather\n\ngo " + goVersion + "\n\n" +
		"require github.com/conclave-ai/conclave v0.0.0\n\n" +
		"replace github.com/conclave-ai/conclave => " + root + "\n"
	for name, body := range map[string][]byte{"go.mod": []byte(mod), "go.sum": sum, "weather_test.go": []byte(code)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "test", "-count=1", "-v", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test in the outside module: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestForecast_") {
		t.Fatalf("the README's test did not run:\n%s", out)
	}
}

// goBlockOf returns the first ```go block after the heading section.
func goBlockOf(doc, section string) (string, error) {
	_, after, ok := strings.Cut(doc, "\n"+section+"\n")
	if !ok {
		return "", os.ErrNotExist
	}
	if next := strings.Index(after, "\n## "); next >= 0 {
		after = after[:next]
	}
	_, block, ok := strings.Cut(after, "\n```go\n")
	if !ok {
		return "", os.ErrNotExist
	}
	code, _, ok := strings.Cut(block, "\n```\n")
	if !ok {
		return "", os.ErrNotExist
	}
	return code + "\n", nil
}

// goDirective is the go line of a go.mod.
func goDirective(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return v, nil
		}
	}
	return "", os.ErrNotExist
}
