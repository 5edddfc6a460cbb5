package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// The README is the newcomer's manual: these tests run what it says, as it
// says it, so that the README breaks a test when it stops being true.

const (
	readmePath = "../../README.md"
	// readmeWait bounds each README command (and each wait for what a
	// command waits for: a run's end, the next interrupt).
	readmeWait = 60 * time.Second
	// readmeStaysOpen is how long a stream without until=run_end must stay
	// open after its run's terminal event to count as "stays open".
	readmeStaysOpen = time.Second
)

// The README's two commands: shown, not run here (this test starts the
// server itself, on a fresh data directory; the other one is what runs
// this test).
var readmeTwoCommands = []string{"go run ./cmd/conclave serve", "go test -race ./..."}

// readmeCommand is one command of a ```sh block: continuation lines
// joined, with its trailing comment (what the README says it shows).
type readmeCommand struct {
	line    int    // of the README, where the command starts
	text    string // the command as the README has it, comment excluded
	comment string
}

// readmeCommands parses the ```sh blocks of the README.
func readmeCommands(t *testing.T, readme string) []readmeCommand {
	t.Helper()
	var out []readmeCommand
	in, cont := false, false
	for i, line := range strings.Split(readme, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```sh":
			in = true
			continue
		case in && strings.TrimSpace(line) == "```":
			if cont {
				t.Fatalf("README line %d: a block ends in a continuation line", i)
			}
			in = false
			continue
		case !in:
			continue
		}
		trimmed := strings.TrimSpace(line)
		if !cont && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue // a comment: an example answer, or what follows
		}
		text, comment := splitComment(line)
		next := strings.HasSuffix(text, `\`)
		text = strings.TrimSuffix(text, `\`)
		if cont {
			c := &out[len(out)-1]
			c.text += " " + strings.TrimSpace(text)
			c.comment = strings.TrimSpace(c.comment + " " + comment)
		} else {
			out = append(out, readmeCommand{line: i + 1, text: strings.TrimSpace(text), comment: comment})
		}
		cont = next
	}
	if in {
		t.Fatal("README: a ```sh block is not closed")
	}
	return out
}

// splitComment splits a shell line at its comment: a # after whitespace,
// outside quotes.
func splitComment(line string) (text, comment string) {
	var quote byte
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimRight(line[:i], " \t"), strings.TrimSpace(line[i+1:])
		}
	}
	return strings.TrimRight(line, " \t"), ""
}

// readmeRun is what the commands so far have answered: the placeholders'
// values.
type readmeRun struct {
	t       *testing.T
	base    string // host:port of the server
	session messages.SessionID
	run     messages.RunID
	runs    map[messages.RunID]bool // every run a README command started
	id      string                  // the interrupt id of the last listing
}

var (
	startRunCmd        = regexp.MustCompile(`-X POST \S*/api/v1/runs(\s|$)`)
	sessionPlaceholder = regexp.MustCompile(`session_id=S\b`)
	runPlaceholder     = regexp.MustCompile(`/runs/RUN_ID\b`)
	idPlaceholder      = regexp.MustCompile(`/resume/ID\b`)
)

// substitute puts the server's address and the placeholders' values in a
// curl command.
func (r *readmeRun) substitute(cmd string) string {
	r.t.Helper()
	cmd = strings.ReplaceAll(cmd, "localhost:8080", r.base)
	for _, p := range []struct {
		re   *regexp.Regexp
		name string
		val  string
		repl string
	}{
		{sessionPlaceholder, "S", string(r.session), "session_id=" + string(r.session)},
		{runPlaceholder, "RUN_ID", string(r.run), "/runs/" + string(r.run)},
		{idPlaceholder, "ID", r.id, "/resume/" + r.id},
	} {
		if p.re.MatchString(cmd) {
			if p.val == "" {
				r.t.Fatalf("%s is used before a command answered it: %s", p.name, cmd)
			}
			cmd = p.re.ReplaceAllLiteralString(cmd, p.repl)
		}
	}
	return cmd
}

// TestReadme_ShellExamples runs every command of the README's ```sh blocks
// against a fresh `conclave serve` (on an empty data directory, with the
// embedded defaults otherwise), in order, with a real shell: the placeholders
// S, RUN_ID and ID take the values the earlier commands answered, and
// localhost:8080 the server's address. Each command's outcome is checked:
// what it prints, that a stream with until=run_end ends after the run's
// terminal event and one without it stays open, that a resume after seq N
// starts at N+1, that each interrupt listing shows the kind its comment
// names. `go run ./cmd/conclave run …` runs this test binary as conclave.
// A command this test does not know fails it: teach it the new command.
func TestReadme_ShellExamples(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed; the README's examples use it (.ci/run installs it)")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no POSIX shell")
	}
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	cmds := readmeCommands(t, string(b))
	for _, two := range readmeTwoCommands {
		if !slices.ContainsFunc(cmds, func(c readmeCommand) bool { return c.text == two }) {
			t.Errorf("the README no longer shows %q", two)
		}
	}
	srv := startServe(t, 0, nil, "--data", t.TempDir())
	r := &readmeRun{t: t, base: srv.base, runs: map[messages.RunID]bool{}}
	var cliRuns []readmeCommand
	for _, c := range cmds {
		switch {
		case slices.Contains(readmeTwoCommands, c.text):
		case strings.HasPrefix(c.text, "go run ./cmd/conclave run "), strings.HasPrefix(c.text, "go run ./cmd/conclave sim "):
			cliRuns = append(cliRuns, c) // independent of the server: in parallel, below
		case strings.HasPrefix(c.text, "curl "):
			t.Logf("README line %d: %s", c.line, c.text)
			r.curl(c)
		default:
			t.Errorf("README line %d: this test does not know how to check %q; teach it", c.line, c.text)
		}
	}
	if len(r.runs) == 0 {
		t.Error("no README command started a run")
	}
	r.checkRunsFinished()
	for _, c := range cliRuns {
		t.Run(fmt.Sprintf("line%d", c.line), func(t *testing.T) {
			t.Parallel()
			if strings.HasPrefix(c.text, "go run ./cmd/conclave sim ") {
				checkReadmeSim(t, c)
				return
			}
			checkReadmeCLIRun(t, c)
		})
	}
}

// curl runs one curl command of the README and checks its outcome.
func (r *readmeRun) curl(c readmeCommand) {
	t := r.t
	t.Helper()
	cmd := r.substitute(c.text)
	switch {
	case strings.Contains(cmd, "/api/v1/events/stream"):
		r.stream(c, cmd)
	case startRunCmd.MatchString(cmd):
		var created messages.RunCreated
		out := runShell(t, cmd)
		if err := json.Unmarshal(out, &created); err != nil || created.RunID == "" || created.SessionID == "" {
			t.Fatalf("README line %d: %s answered %s (%v), want a created run", c.line, cmd, out, err)
		}
		if !strings.Contains(created.StreamURL, "session_id="+string(created.SessionID)) {
			t.Errorf("README line %d: stream_url %q does not name the session", c.line, created.StreamURL)
		}
		r.session, r.run, r.runs[created.RunID] = created.SessionID, created.RunID, true
	case strings.Contains(cmd, "/api/v1/interrupts?"):
		r.interrupts(c, cmd)
	case strings.Contains(cmd, "/api/v1/events/resume/"):
		var res messages.Resumed
		out := runShell(t, cmd)
		if err := json.Unmarshal(out, &res); err != nil || res.InterruptID != r.id || res.Status != messages.InterruptResolving {
			t.Fatalf("README line %d: %s answered %s (%v), want the interrupt resolving", c.line, cmd, out, err)
		}
		r.id = "" // used
	case strings.Contains(cmd, "/api/v1/runs/"):
		var sum messages.RunSummary
		out := runShell(t, cmd)
		if err := json.Unmarshal(out, &sum); err != nil || sum.RunID != r.run {
			t.Fatalf("README line %d: %s answered %s (%v), want the run's summary", c.line, cmd, out, err)
		}
		// The README's streams followed the run to its end before this.
		if sum.Status != messages.StatusFinished || sum.Answer == "" || sum.Nodes.Completed != sum.Nodes.Total {
			t.Errorf("README line %d: the run is %s with %+v and answer %q, want finished with every node", c.line, sum.Status, sum.Nodes, sum.Answer)
		}
	default:
		t.Errorf("README line %d: this test does not know how to check %q; teach it", c.line, c.text)
	}
}

// interruptKinds are the kinds a listing's comment may name.
var interruptKinds = []messages.InterruptKind{messages.InterruptPlanApproval, messages.InterruptNodeApproval,
	messages.InterruptToolApproval, messages.InterruptSpawnApproval, messages.InterruptInfoRequest}

// interrupts runs a listing until it shows a pending interrupt (of the
// kind its comment names, if it names one: the previous answer may still
// be resolving) and keeps its id as ID.
func (r *readmeRun) interrupts(c readmeCommand, cmd string) {
	t := r.t
	t.Helper()
	var kind messages.InterruptKind
	for _, k := range interruptKinds {
		if strings.Contains(c.comment, string(k)) {
			kind = k
		}
	}
	deadline := time.Now().Add(readmeWait)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		out := runShell(t, cmd)
		var list messages.InterruptList
		if err := json.Unmarshal(out, &list); err != nil {
			t.Fatalf("README line %d: %s answered %s: %v", c.line, cmd, out, err)
		}
		for _, it := range list.Interrupts {
			if it.Status == messages.InterruptPending {
				if kind != "" && it.Kind != kind {
					break // the listing's first pending one must be the kind named
				}
				r.id = it.InterruptID
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("README line %d: %s still answers %s after %v; the comment says %q", c.line, cmd, out, readmeWait, c.comment)
		}
		<-tick.C // poll with a deadline: the next interrupt is raised after the previous answer
	}
}

// stream runs a curl -N of the SSE stream: with until=run_end it must end
// by itself after the run's terminal event and a run_ended final frame;
// without it, it must stay open after that event (it is then stopped, as
// its comment tells a person to). A Last-Event-ID N resumes at N+1.
func (r *readmeRun) stream(c readmeCommand, cmd string) {
	t := r.t
	t.Helper()
	sh := exec.Command("sh", "-c", cmd)
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // to stop curl with its shell
	stdout, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	sh.Stderr = &stderr
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	frames := make(chan testkit.SSEFrame)
	readErr := make(chan error, 1)
	go func() {
		body, err := skipSSERetry(stdout)
		if err == nil {
			rd := testkit.NewSSEReader(body)
			for {
				var f testkit.SSEFrame
				if f, err = rd.Next(); err != nil {
					break
				}
				frames <- f
			}
		}
		readErr <- err
		exited <- sh.Wait() // after the last read: Wait closes the pipe
	}()
	stop := func() {
		_ = syscall.Kill(-sh.Process.Pid, syscall.SIGTERM)
		for { // drain what is left until the reader ends
			select {
			case <-frames:
			case <-readErr:
				<-exited
				return
			}
		}
	}
	until := strings.Contains(cmd, "until=run_end")
	var after uint64
	if m := regexp.MustCompile(`Last-Event-ID: (\d+)`).FindStringSubmatch(cmd); m != nil {
		after, _ = strconv.ParseUint(m[1], 10, 64)
	}
	timeout := time.NewTimer(readmeWait)
	defer timeout.Stop()
	first, ended := true, false
	for {
		select {
		case f := <-frames:
			if f.Event == "stream_closed" {
				if !until || !ended || !strings.Contains(f.Data, `"code":"run_ended"`) {
					stop()
					t.Fatalf("README line %d: final frame %q (run ended: %t)", c.line, f.Data, ended)
				}
				continue
			}
			if f.Data == "" {
				continue // a heartbeat
			}
			var env messages.Envelope
			if err := json.Unmarshal([]byte(f.Data), &env); err != nil {
				stop()
				t.Fatalf("README line %d: frame %+v: %v", c.line, f, err)
			}
			if first && after > 0 && env.Seq != after+1 {
				stop()
				t.Fatalf("README line %d: resumed at seq %d, want %d", c.line, env.Seq, after+1)
			}
			first = false
			if env.RunID == r.run && env.Type.Terminal() {
				ended = true
				if env.Type != messages.RunFinished {
					t.Errorf("README line %d: the run ended with %s", c.line, env.Type)
				}
				if !until {
					select {
					case <-readErr:
						t.Errorf("README line %d: the stream ended after the run's end; the README says it stays open", c.line)
						<-exited
						return
					case <-time.After(readmeStaysOpen):
					}
					stop()
					return
				}
			}
		case err := <-readErr:
			werr := <-exited
			if !until {
				t.Fatalf("README line %d: the stream ended (%v, %v) before the run did\n%s", c.line, err, werr, stderr.String())
			}
			if !ended || err != io.EOF || werr != nil {
				t.Fatalf("README line %d: the stream ended with %v, curl with %v, run ended %t\n%s", c.line, err, werr, ended, stderr.String())
			}
			return
		case <-timeout.C:
			stop()
			t.Fatalf("README line %d: no end of the run within %v", c.line, readmeWait)
		}
	}
}

// checkRunsFinished: every run the README started finishes, and a tool
// call that asked for approval ran with the arguments the README's resume
// gave it.
func (r *readmeRun) checkRunsFinished() {
	t := r.t
	t.Helper()
	for run := range r.runs {
		out := runShell(t, fmt.Sprintf("curl -s 'http://%s/api/v1/runs/%s'", r.base, run))
		var sum messages.RunSummary
		if err := json.Unmarshal(out, &sum); err != nil {
			t.Fatalf("run %s: %s: %v", run, out, err)
		}
		events := r.follow(sum.SessionID, run)
		if last := events[len(events)-1]; last.Type != messages.RunFinished {
			t.Errorf("run %s ended with %s", run, last.Type)
		}
		for _, env := range events {
			if p, ok := env.Payload.(*messages.InterruptRaisedPayload); ok && p.Kind == messages.InterruptToolApproval {
				res := toolResults(events)
				if len(res) != 1 || res[0].IsError || !strings.Contains(res[0].Result, "something better") {
					t.Errorf("run %s: tool results %+v, want one with the README's edited query", run, res)
				}
				break
			}
		}
	}
}

// follow reads the run's events up to its terminal one.
func (r *readmeRun) follow(session messages.SessionID, run messages.RunID) []*messages.Envelope {
	t := r.t
	t.Helper()
	out := runShell(t, fmt.Sprintf("curl -sN 'http://%s/api/v1/events/stream?session_id=%s&until=run_end&run_id=%s'", r.base, session, run))
	body, err := skipSSERetry(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	rd := testkit.NewSSEReader(body)
	var events []*messages.Envelope
	for {
		f, err := rd.Next()
		if err != nil {
			break
		}
		if f.Event == "stream_closed" || f.Data == "" {
			continue
		}
		env := new(messages.Envelope)
		if err := json.Unmarshal([]byte(f.Data), env); err != nil {
			t.Fatal(err)
		}
		if env.RunID == run {
			events = append(events, env)
		}
	}
	if len(events) == 0 || !events[len(events)-1].Type.Terminal() {
		t.Fatalf("run %s: no terminal event in its stream", run)
	}
	return events
}

// runShell runs cmd with sh and returns its stdout; it must exit 0.
func runShell(t *testing.T, cmd string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), readmeWait)
	defer cancel()
	sh := exec.CommandContext(ctx, "sh", "-c", cmd)
	var stderr bytes.Buffer
	sh.Stderr = &stderr
	out, err := sh.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, stderr.String())
	}
	return out
}

// checkReadmeCLIRun runs a `go run ./cmd/conclave run …` line of the README
// with this test binary as conclave: it must finish (exit 0), print its
// answer (or, with --json, a valid event stream ending in run_finished),
// and show what its comment promises.
// mcpEverythingBin is the official MCP test server as npm installs it
// (conformance/mcp), relative to the repository's root.
const mcpEverythingBin = "conformance/mcp/node_modules/.bin/mcp-server-everything"

func checkReadmeCLIRun(t *testing.T, c readmeCommand) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := strings.Replace(c.text, "go run ./cmd/conclave", "'"+exe+"'", 1)
	if strings.Contains(cmd, mcpEverythingBin) {
		if _, err := os.Stat(filepath.Join(filepath.Dir(readmePath), mcpEverythingBin)); err != nil {
			t.Skipf("README line %d needs the MCP test server (%v): run (cd conformance/mcp && npm ci) first", c.line, err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), readmeWait)
	defer cancel()
	sh := exec.CommandContext(ctx, "sh", "-c", cmd)
	sh.Dir = filepath.Dir(readmePath) // the README's commands run from the repository's root
	sh.Env = append(os.Environ(), crashChildEnv+"="+stdioChildMode)
	var stderr bytes.Buffer
	sh.Stderr = &stderr
	out, err := sh.Output()
	if err != nil {
		t.Fatalf("README line %d: %s: %v\nstderr:\n%s\nstdout:\n%s", c.line, c.text, err, stderr.String(), tail(string(out)))
	}
	if strings.Contains(c.text, " --json") {
		events := decodeJSONL(t, string(out))
		assertNoViolations(t, events)
		if last := lastEvent(t, events); last.Type != messages.RunFinished {
			t.Errorf("README line %d: last event %s", c.line, last.Type)
		}
		return
	}
	text := string(out)
	if !strings.Contains(text, "\nAnswer to: ") || !strings.Contains(text, "run finished in ") {
		t.Errorf("README line %d: no answer or summary in\n%s", c.line, tail(text))
	}
	if strings.Contains(c.comment, "restarted") && !strings.Contains(text, " restarted (attempt ") {
		t.Errorf("README line %d: the comment says %q; no restart in\n%s", c.line, c.comment, tail(text))
	}
}

// checkReadmeSim runs a `go run ./cmd/conclave sim …` line of the README
// with this test binary as conclave: every seed passes (exit 0), or, with
// --reintroduce, the bug put back is found (exit 1, a failing seed and
// the line that reproduces it).
func checkReadmeSim(t *testing.T, c readmeCommand) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*readmeWait)
	defer cancel()
	sh := exec.CommandContext(ctx, "sh", "-c", strings.Replace(c.text, "go run ./cmd/conclave", "'"+exe+"'", 1))
	sh.Dir = filepath.Dir(readmePath)
	sh.Env = append(os.Environ(), crashChildEnv+"="+stdioChildMode)
	out, err := sh.CombinedOutput()
	text := string(out)
	if !strings.Contains(c.text, "--reintroduce") {
		if err != nil || !strings.Contains(text, " 0 failed") {
			t.Errorf("README line %d: %v\n%s", c.line, err, tail(text))
		}
		return
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(text, "FAIL seed ") || !strings.Contains(text, "reproduce: conclave sim --seed ") {
		t.Errorf("README line %d: the bug put back was not found (%v):\n%s", c.line, err, tail(text))
	}
}

// TestReadme_PackageTable: the README's package table names every package
// directory of the module (a sub-package in its parent's row).
func TestReadme_PackageTable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // top-level directory → its row
	sc := bufio.NewScanner(bytes.NewReader(b))
	for in := false; sc.Scan(); {
		line := sc.Text()
		switch {
		case line == "| package | what lives there |":
			in = true
		case in && !strings.HasPrefix(line, "|"):
			in = false
		case in:
			cells := strings.Split(line, "|")
			if len(cells) > 2 {
				rows[strings.Trim(strings.TrimSpace(cells[1]), "`/")] = line
			}
		}
	}
	if len(rows) == 0 {
		t.Fatal("no package table in the README")
	}
	root := filepath.Dir(readmePath)
	dirs := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			dirs[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range dirs {
		top, rest, nested := strings.Cut(dir, "/")
		row, ok := rows[top]
		if !ok {
			row, ok = rows[dir] // cmd/conclave has a row of its own
			nested = false
		}
		switch {
		case !ok:
			t.Errorf("the README's package table has no row for %s", dir)
		case nested && !strings.Contains(row, "`"+rest+"`") && !strings.Contains(row, "`"+rest+"/`") && !strings.Contains(row, "`"+dir+"`"):
			t.Errorf("the README's row for %s/ does not name %s", top, dir)
		}
	}
}

// TestReadme_RunDefaults: the README states the defaults of `conclave run`
// that differ from the scenario table's.
func TestReadme_RunDefaults(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(b)), " ")
	d := cliDefaults(false)
	want := fmt.Sprintf("`reasoning_tokens` %d, `tools_per_node` %d and `token_delay_ms` %d (%d with `--json`)",
		d.ReasoningTokens, d.ToolsPerNode, d.TokenDelayMS, cliDefaults(true).TokenDelayMS)
	if !strings.Contains(readme, want) {
		t.Errorf("the README does not say %q", want)
	}
	// The scenario table's defaults for those fields are the engine's.
	e := messages.Scenario{Nodes: 1}.WithDefaults()
	for _, row := range []string{
		fmt.Sprintf("| `reasoning_tokens` | %d |", e.ReasoningTokens),
		fmt.Sprintf("| `tools_per_node` | %d |", e.ToolsPerNode),
		fmt.Sprintf("| `token_delay_ms` | %d |", e.TokenDelayMS),
	} {
		if !strings.Contains(readme, row) {
			t.Errorf("the README's scenario table has no row %q", row)
		}
	}
}
