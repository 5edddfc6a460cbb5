package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// everythingServer is the official MCP test server, installed by
// `(cd conformance/mcp && npm ci)` (CI does it: .ci/run).
var everythingServer = filepath.Join("..", "..", "conformance", "mcp", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")

// everythingCommand is node and the official MCP test server's script,
// or skips the test when either is missing.
func everythingCommand(t *testing.T) (node, script string) {
	t.Helper()
	script, err := filepath.Abs(everythingServer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Skipf("@modelcontextprotocol/server-everything is not installed (%v): run (cd conformance/mcp && npm ci) first", err)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		t.Skipf("node is not on PATH: %v", err)
	}
	return node, script
}

// TestServe_MCPEverything is a black-box test of --mcp against the
// official MCP test server: `conclave serve --mcp everything="node
// …/server-everything/dist/index.js stdio"` (a child process, as a user
// runs it) serves a council whose workers call the server's echo,
// get-sum and get-resource-links tools; every call succeeds and the
// stream passes testkit.Check. A run naming a tool the server lacks is
// refused with 422. SIGTERM stops the server and its MCP server, exit 0.
func TestServe_MCPEverything(t *testing.T) {
	t.Parallel()
	node, script := everythingCommand(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "serve", "--memory", "--addr", "127.0.0.1:0", "--log-level", "info",
		"--mcp", "everything="+node+" "+script+" stdio")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1")
	srv := startChild(t, cmd, "")
	base := "http://" + srv.base
	stopped := false
	defer func() {
		if !stopped {
			_ = srv.cmd.Process.Kill()
			srv.reap()
		}
	}()
	if !strings.Contains(srv.log.tail(8<<10), "mcp server up") {
		t.Errorf("the server did not log its MCP server:\n%s", srv.log.tail(8<<10))
	}

	post := func(body any) (int, []byte) {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := http.Post(base+"/api/v1/runs", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	if code, body := post(messages.StartRun{Question: "q", Scenario: &messages.Scenario{Calls: []string{"everything.no-such-tool"}}}); code != http.StatusUnprocessableEntity ||
		!strings.Contains(string(body), "scenario.calls[0]") || !strings.Contains(string(body), "everything.get-sum") {
		t.Errorf("a run calling a tool the server lacks: %d %s; want 422 naming the field and the tools", code, body)
	}

	// A tool that runs only as an MCP task (execution.taskSupport
	// required: simulate-research-query) is not offered; the others are.
	resp, err := http.Get(base + "/api/v1/tools")
	if err != nil {
		t.Fatal(err)
	}
	var list messages.ToolList
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	offered := map[string]bool{}
	for _, tl := range list.Tools {
		offered[tl.Name] = true
	}
	if err != nil || !offered["everything.echo"] || offered["everything.simulate-research-query"] {
		t.Errorf("tools offered %v (%v): want everything.echo and never everything.simulate-research-query", offered, err)
	}
	if !strings.Contains(srv.log.tail(64<<10), "not offered: it runs only as an MCP task") {
		t.Errorf("the task-only tool left out was not logged:\n%s", srv.log.tail(8<<10))
	}

	calls := []string{"everything.echo", "everything.get-sum", "everything.get-resource-links"}
	code, body := post(messages.StartRun{Question: "why is the sky blue", Scenario: &messages.Scenario{Nodes: 3, Waves: 2, Tokens: 4, Calls: calls, Seed: 7}})
	var rc messages.RunCreated
	if code != http.StatusCreated || json.Unmarshal(body, &rc) != nil {
		t.Fatalf("POST run: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), crashWait)
	defer cancel()
	events := readSession(ctx, t, base, rc.SessionID, rc.RunID)
	for _, v := range testkit.Check(events) {
		t.Errorf("invariant: %v", v)
	}
	results := map[string]int{}
	for _, env := range events {
		p, ok := env.Payload.(*messages.ToolCallFinishedPayload)
		if !ok {
			continue
		}
		results[p.Tool]++
		if p.IsError {
			t.Errorf("%s failed: %s", p.Tool, p.Result)
		}
		switch p.Tool {
		case "everything.echo":
			if !strings.HasPrefix(p.Result, "Echo: ") {
				t.Errorf("echo: %q", p.Result)
			}
		case "everything.get-sum":
			if !strings.HasPrefix(p.Result, "The sum of ") {
				t.Errorf("get-sum: %q", p.Result)
			}
		case "everything.get-resource-links":
			if !strings.Contains(p.Result, "[resource link: ") {
				t.Errorf("get-resource-links: %q", p.Result)
			}
		}
	}
	for _, name := range calls {
		if results[name] != 3 {
			t.Errorf("%s: %d results, want 3 (one per worker); all: %v", name, results[name], results)
		}
	}
	if last := events[len(events)-1]; last.Type != messages.RunFinished {
		t.Errorf("the run ended with %s", last.Type)
	}

	srv.terminate()
	stopped = true
	if code := srv.cmd.ProcessState.ExitCode(); code != exitOK {
		t.Errorf("exit %v after SIGTERM\n%s", srv.cmd.ProcessState, srv.log.tail(8<<10))
	}
	for _, line := range srv.log.problems() {
		t.Errorf("server log: %s", line)
	}
}

// TestServe_MCPTools: `conclave serve --mcp` (a child process) with this
// test binary as its stdio MCP server, so that serve's wiring is tested
// without Node.js too: a run calling a tool the server lacks is a 422; a
// run calling its tools gets their results and citations from its
// resource links; SIGTERM stops both, exit 0.
func TestServe_MCPTools(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "serve", "--memory", "--addr", "127.0.0.1:0", "--log-level", "info", "--mcp", mcpChildFlag(t, "kid"))
	cmd.Env = append(os.Environ(), crashChildEnv+"=1")
	srv := startChild(t, cmd, "")
	base := "http://" + srv.base
	stopped := false
	defer func() {
		if !stopped {
			_ = srv.cmd.Process.Kill()
			srv.reap()
		}
	}()
	post := func(sc *messages.Scenario) (int, []byte) {
		t.Helper()
		b, _ := json.Marshal(messages.StartRun{Question: "why is the sky blue", Scenario: sc})
		resp, err := http.Post(base+"/api/v1/runs", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	if code, body := post(&messages.Scenario{Calls: []string{"kid.whisper"}}); code != http.StatusUnprocessableEntity ||
		!strings.Contains(string(body), `scenario.calls[0] names tool \"kid.whisper\"`) || !strings.Contains(string(body), "kid.shout") {
		t.Errorf("a run calling kid.whisper: %d %s; want 422 naming the field and the tools", code, body)
	}
	code, body := post(&messages.Scenario{Nodes: 2, Waves: 1, Tokens: 3, Calls: []string{"kid.shout", "kid.cite"}})
	var rc messages.RunCreated
	if code != http.StatusCreated || json.Unmarshal(body, &rc) != nil {
		t.Fatalf("POST run: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), crashWait)
	defer cancel()
	events := readSession(ctx, t, base, rc.SessionID, rc.RunID)
	for _, v := range testkit.Check(events) {
		t.Errorf("invariant: %v", v)
	}
	n := 0
	for _, env := range events {
		if p, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok && strings.HasPrefix(p.Tool, "kid.") {
			n++
			if p.IsError {
				t.Errorf("%s failed: %s", p.Tool, p.Result)
			}
		}
	}
	fin, ok := events[len(events)-1].Payload.(*messages.RunFinishedPayload)
	if n != 4 || !ok || len(fin.Citations) == 0 {
		t.Errorf("%d results, last event %s, want 4 and run_finished with citations", n, events[len(events)-1].Type)
	}
	srv.terminate()
	stopped = true
	if code := srv.cmd.ProcessState.ExitCode(); code != exitOK {
		t.Errorf("exit %v after SIGTERM\n%s", srv.cmd.ProcessState, srv.log.tail(8<<10))
	}
	for _, line := range srv.log.problems() {
		t.Errorf("server log: %s", line)
	}
}

// readSession reads a session's events over SSE from the start until run's
// terminal event.
func readSession(ctx context.Context, t *testing.T, base string, session messages.SessionID, run messages.RunID) []*messages.Envelope {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/events/stream?session_id="+url.QueryEscape(string(session)), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := skipSSERetry(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := testkit.NewSSEReader(body)
	var events []*messages.Envelope
	for {
		f, err := r.Next()
		if err != nil {
			t.Fatalf("stream: %v after %d events", err, len(events))
		}
		if f.Data == "" || f.Event == "stream_closed" {
			continue
		}
		env := new(messages.Envelope)
		if err := json.Unmarshal([]byte(f.Data), env); err != nil {
			t.Fatalf("%v: %s", err, f.Data)
		}
		events = append(events, env)
		if env.RunID == run && env.Type.Terminal() {
			return events
		}
	}
}

// TestServe_MCPSecretsStayHome: `conclave serve` with every secret
// variable set (the model's API keys, the tenants' tokens) and the
// official MCP test server: its get-env tool, called by a run, shows
// none of them (a stdio server gets HOME, LOGNAME, PATH, SHELL, TERM and
// USER) but the one variable --mcp-env passes it; no secret appears in
// the run's stream or the server's log.
func TestServe_MCPSecretsStayHome(t *testing.T) {
	t.Parallel()
	node, script := everythingCommand(t)
	secrets := []string{"CONCLAVE_MODEL_API_KEY=sk-model-7f3a9c", "OPENAI_API_KEY=sk-proj-openai-51d2e8", "CONCLAVE_TOKENS=local:tok-local-c0ffee"}
	env := append(secrets, "TOOL_GREETING=hello-from-the-operator")
	srv := startServe(t, 0, env, "--memory", "--mcp", "everything="+node+" "+script+" stdio", "--mcp-env", "everything:GREETING=TOOL_GREETING")
	a := newHardenAPI(t, srv, "tok-local-c0ffee")
	rc := a.mustStartRun(t, `{"question":"q","scenario":{"nodes":1,"tokens":2,"calls":["everything.get-env"]}}`)
	s := a.mustStream(t, rc.SessionID, 0)
	var raw strings.Builder
	var result string
	for {
		env := s.mustEnv(t)
		b, _ := json.Marshal(env)
		raw.Write(b)
		if p, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok && p.Tool == "everything.get-env" {
			if p.IsError {
				t.Fatalf("get-env failed: %s", p.Result)
			}
			result = p.Result
		}
		if env.Type.Terminal() {
			break
		}
	}
	// The variable --mcp-env passed arrives (its value is a secret too:
	// masked in the result the journal and the model see).
	if !strings.Contains(result, `"GREETING": "[REDACTED]"`) || strings.Contains(result, "hello-from-the-operator") || !strings.Contains(result, "PATH") {
		t.Errorf("get-env does not show PATH and the variable --mcp-env passed (masked):\n%s", result)
	}
	srv.terminate()
	for _, kv := range secrets {
		name, value, _ := strings.Cut(kv, "=")
		if strings.Contains(result, name) || strings.Contains(result, value) {
			t.Errorf("%s reached the MCP server:\n%s", name, result)
		}
		if strings.Contains(raw.String(), value) || strings.Contains(srv.log.tail(1<<20), value) {
			t.Errorf("the value of %s is in the stream or the log", name)
		}
	}
}

// TestTools_ListsWhatAgentsMayCall: `conclave tools` against a real
// serve with an MCP server lists the scripted model's Go tools (publish
// high risk), the runtime's own and the MCP server's tools under their
// server, and the server's state; --json carries each tool's JSON Schema;
// GET /api/v1/tools needs the token like every /api/v1 call.
func TestTools_ListsWhatAgentsMayCall(t *testing.T) {
	t.Parallel()
	srv := startServe(t, 0, []string{"CONCLAVE_TOKENS=local:tok-tools-0123456789"}, "--memory", "--mcp", mcpChildFlag(t, "kid"))
	base := "http://" + srv.base
	token := cliIO{getenv: func(k string) string { return map[string]string{"CONCLAVE_TOKEN": "tok-tools-0123456789"}[k] }}
	r := runCLIWith(t, t.Context(), token, "tools", "--server", base)
	if r.code != exitOK {
		t.Fatalf("tools: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"kid.shout", "mcp:kid", "publish", "high", "delegate", "runtime", "search", "mcp server kid: up, 2 tools"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tools output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCLIWith(t, t.Context(), token, "tools", "--server", base, "--json")
	var list messages.ToolList
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &list) != nil {
		t.Fatalf("tools --json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	byName := map[string]messages.ToolInfo{}
	for _, tl := range list.Tools {
		byName[tl.Name] = tl
	}
	shout := byName["kid.shout"]
	if shout.Source != messages.ToolSourceMCP || shout.Server != "kid" || !strings.Contains(string(shout.InputSchema), `"text"`) ||
		byName["publish"].Risk != messages.RiskHigh || byName["publish"].Source != messages.ToolSourceGo ||
		byName["ask_human"].Source != messages.ToolSourceRuntime || len(list.Servers) != 1 || !list.Servers[0].Up {
		t.Fatalf("tools %+v servers %+v", list.Tools, list.Servers)
	}
	if r := runCLI(t, t.Context(), nil, false, "tools", "--server", base); r.code != exitFailed || !strings.Contains(r.stderr, "401") {
		t.Fatalf("tools without the token: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
