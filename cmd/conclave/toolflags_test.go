package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/tool/mcp"
)

// mcpChildEnv makes this test binary an MCP server over stdio (runMCPChild).
const mcpChildEnv = "CONCLAVE_TEST_MCP_CHILD"

// mcpChildSayEnv, when set, is printed to the MCP child's stderr at start.
const mcpChildSayEnv = "CONCLAVE_TEST_MCP_SAY"

// mcpChildDownEnv, when set, is a file whose existence is an outage: the
// child gets a "die" tool that creates it and exits, and exits at start
// while it exists.
const mcpChildDownEnv = "CONCLAVE_TEST_MCP_DOWN"

// mcpChildTraceEnv=1 gives the MCP child a "trace" tool that answers
// "traceparent=" and the _meta.traceparent its call carried.
const mcpChildTraceEnv = "CONCLAVE_TEST_MCP_TRACE"

// runMCPChild is TestMain's hook: with mcpChildEnv=1 the process serves
// MCP over stdin and stdout until stdin ends, then exits. Its tools:
// shout {text} ("TEXT!") and cite {topic, count 1..3} (a text and count
// web resource links).
func runMCPChild() {
	if os.Getenv(mcpChildEnv) != "1" {
		return
	}
	if say := os.Getenv(mcpChildSayEnv); say != "" { // a server that logs its configuration
		fmt.Fprintln(os.Stderr, "config: token="+say)
	}
	down := os.Getenv(mcpChildDownEnv)
	if down != "" {
		if _, err := os.Stat(down); err == nil { // the outage goes on: cannot start
			fmt.Fprintln(os.Stderr, "mcp child: down")
			os.Exit(4)
		}
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "conclave-cmd-test", Version: "1"}, nil)
	type shoutArgs struct {
		Text string `json:"text"`
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "shout", Description: "Shouts its text."},
		func(_ context.Context, _ *sdk.CallToolRequest, in shoutArgs) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.ToUpper(in.Text) + "!"}}}, nil, nil
		})
	srv.AddTool(&sdk.Tool{Name: "cite", Description: "Cites pages on a topic.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"topic":{"type":"string","enum":["sky","sea"]},"count":{"type":"integer","minimum":1,"maximum":3}},"required":["topic","count"]}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct {
				Topic string
				Count int
			}
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("%d pages on the %s", in.Count, in.Topic)}}}
			for i := range in.Count {
				res.Content = append(res.Content, &sdk.ResourceLink{URI: fmt.Sprintf("https://example.org/%s/%d", in.Topic, i+1), Name: fmt.Sprintf("%s page %d", in.Topic, i+1)})
			}
			return res, nil
		})
	if os.Getenv(mcpChildTraceEnv) == "1" {
		sdk.AddTool(srv, &sdk.Tool{Name: "trace", Description: "Answers the traceparent its call carried in _meta."},
			func(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
				tp, _ := req.Params.Meta["traceparent"].(string)
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "traceparent=" + tp}}}, nil, nil
			})
	}
	if down != "" {
		sdk.AddTool(srv, &sdk.Tool{Name: "die", Description: "Starts an outage: the server exits, and cannot start while the outage lasts."},
			func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
				_ = os.WriteFile(down, nil, 0o600)
				os.Exit(3)
				return nil, nil, nil
			})
	}
	code := 0
	if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcp child:", err)
		code = 1
	}
	os.Exit(code)
}

// mcpChildFlag is --mcp's value for this test binary as a server named
// name: through env(1), which sets mcpChildEnv and clears crashChildEnv
// (a serve child of a test has it; its MCP server must not be conclave).
func mcpChildFlag(t *testing.T, name string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env, err := exec.LookPath("env")
	if err != nil {
		t.Skipf("no env(1): %v", err)
	}
	return name + "=" + mcp.JoinCommand([]string{env, mcpChildEnv + "=1", crashChildEnv + "=", exe, "-test.run=^$"})
}

func TestToolFlags_Specs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		values []string
		want   []string // the specs, as strings
		fail   string
	}{
		{values: nil},
		{values: []string{"everything=npx -y @modelcontextprotocol/server-everything stdio", "web=https://mcp.example.com/mcp"},
			want: []string{"everything=npx -y @modelcontextprotocol/server-everything stdio", "web=https://mcp.example.com/mcp"}},
		{values: []string{"fs=node 'my server.js' --root /tmp"}, want: []string{"fs=node 'my server.js' --root /tmp"}},
		{values: []string{"noequals"}, fail: `invalid --mcp "noequals": mcp: invalid server spec "noequals": want NAME=COMMAND ARGS… or NAME=https://…`},
		{values: []string{"a.b=cmd"}, fail: `invalid --mcp "a.b=cmd": mcp: invalid server spec: server name "a.b" must be`},
		{values: []string{"x="}, fail: `invalid --mcp "x=": mcp: invalid server spec: server x: no command`},
		{values: []string{"x=cmd 'open"}, fail: "unterminated single quote"},
		{values: []string{"w=https://"}, fail: `server w: "https://" is not a valid http(s) URL`},
		{values: []string{"x=cmd", "x=https://example.com"}, fail: `invalid --mcp "x=https://example.com": another --mcp is named x too`},
	} {
		f := toolFlags{mcp: tc.values}
		specs, err := f.specs()
		if tc.fail != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fail) {
				t.Errorf("%q: %v, want an error saying %q", tc.values, err, tc.fail)
			}
			continue
		}
		var got []string
		for _, sp := range specs {
			got = append(got, sp.String())
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, %v; want %q", tc.values, got, err, tc.want)
		}
	}
}

// TestRun_MCPErrors: a bad --mcp is a usage error naming it; a server that
// cannot start fails the command naming the server; --calls naming a
// tool the engine lacks is a usage error naming the flag.
func TestRun_MCPErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		says []string
	}{
		{[]string{"--mcp", "bad"}, exitUsage, []string{`invalid --mcp "bad"`, "NAME=COMMAND"}},
		{[]string{"--mcp", "gone=/nonexistent/mcp-server --flag"}, exitFailed, []string{"--mcp: mcp: server gone (gone=/nonexistent/mcp-server --flag)", "no such file"}},
		{[]string{"--mcp", "t=" + os.Args[0] + " -test.run=^$", "--calls", "t.nope"}, exitFailed, []string{"server t"}}, // not an MCP child: its output is no MCP
		{[]string{"--calls", "everything.echo"}, exitUsage, []string{`invalid --calls: names tool "everything.echo", which this engine does not have (its tools: search, publish)`}},
		{[]string{"--calls", "not a name"}, exitUsage, []string{`calls[0] must be a tool name`}},
	} {
		r := runCLI(t, t.Context(), nil, false, append([]string{"run", "q", "--json", "--nodes", "1"}, tc.args...)...)
		if r.code != tc.code {
			t.Errorf("%q: exit %d, want %d\n%s", tc.args, r.code, tc.code, r.stderr)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(r.stderr, s) {
				t.Errorf("%q: stderr does not say %q:\n%s", tc.args, s, r.stderr)
			}
		}
	}
}

// TestRun_MCPTools: conclave run --mcp starts a stdio MCP server (this
// test binary), and --calls makes every worker call its tools with
// arguments from their schemas; results come back, resource links become
// the run's citations, the stream passes testkit.Check, and the server
// process is stopped with the command (TestMain checks no goroutine is
// left).
func TestRun_MCPTools(t *testing.T) {
	t.Parallel()
	flag := mcpChildFlag(t, "kid")
	r := runCLI(t, t.Context(), nil, false, "run", "why is the sky blue", "--json", "--nodes", "3", "--tokens", "4", "--tools-per-node", "0",
		"--log-level", "info", "--mcp", flag, "--calls", "kid.shout,kid.cite")
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	for _, v := range testkit.Check(events) {
		t.Errorf("invariant: %v", v)
	}
	results := map[string]int{}
	for _, env := range events {
		if p, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok {
			if p.IsError {
				t.Errorf("error result %+v", p)
			}
			results[p.Tool]++
			if p.Tool == "kid.shout" && !strings.HasSuffix(p.Result, "!") {
				t.Errorf("shout: %q", p.Result)
			}
		}
	}
	if results["kid.shout"] != 3 || results["kid.cite"] != 3 {
		t.Errorf("results per tool %v, want 3 each", results)
	}
	fin, ok := events[len(events)-1].Payload.(*messages.RunFinishedPayload)
	if !ok || len(fin.Citations) == 0 {
		t.Fatalf("last event %s, citations %+v", events[len(events)-1].Type, fin)
	}
	for _, c := range fin.Citations {
		if !strings.HasPrefix(c.URL, "https://example.org/s") || c.AccessedVia != "tool:kid.cite" {
			t.Errorf("citation %+v", c)
		}
	}
	if !strings.Contains(r.stderr, "mcp server up") || !strings.Contains(r.stderr, "tools=2") {
		t.Errorf("stderr does not log the server:\n%s", r.stderr)
	}
}

func TestToolFlags_MCPEnv(t *testing.T) {
	t.Parallel()
	lookup := func(k string) (string, bool) {
		v, ok := map[string]string{"WEB_TOKEN": "t0k", "LANG": "C.UTF-8"}[k]
		return v, ok
	}
	for _, tc := range []struct{ value, server, entry, fail string }{
		{value: "web:TOKEN=WEB_TOKEN", server: "web", entry: "TOKEN=t0k"},
		{value: "web:LANG", server: "web", entry: "LANG=C.UTF-8"},
		{value: "web:TOKEN=MISSING", fail: "MISSING is not set"},
		{value: "TOKEN=WEB_TOKEN", fail: "want SERVER:NAME"},
		{value: "web:1BAD=WEB_TOKEN", fail: "environment variable names"},
		{value: "web:TOKEN=", fail: "environment variable names"},
	} {
		server, entry, err := mcpEnvEntry(tc.value, lookup)
		if tc.fail != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fail) {
				t.Errorf("%q: %v, want %q", tc.value, err, tc.fail)
			}
			continue
		}
		if err != nil || server != tc.server || entry != tc.entry {
			t.Errorf("%q: %q %q %v", tc.value, server, entry, err)
		}
	}
	f := toolFlags{mcp: []string{"w=https://example.org/mcp", "s=cmd"}, mcpEnv: []string{"s:PATH"}}
	specs, err := f.specs()
	if err != nil || len(specs[1].Env) != 1 || !strings.HasPrefix(specs[1].Env[0], "PATH=") {
		t.Fatalf("specs %+v %v", specs, err)
	}
	for _, v := range []string{"w:PATH", "nope:PATH"} {
		f.mcpEnv = []string{v}
		if _, err := f.specs(); err == nil || !strings.Contains(err.Error(), "no stdio --mcp server") {
			t.Errorf("--mcp-env %s: %v", v, err)
		}
	}
}

// TestRun_SecretsMaskedInLogs: a tool server that prints a secret it was
// given (--mcp-env) on its stderr, which conclave logs at debug level:
// the log shows it masked; the model key is masked the same way.
func TestRun_SecretsMaskedInLogs(t *testing.T) { // not parallel: t.Setenv (--mcp-env reads the environment)
	const secret = "tool-secret-5e4d3c2b1a"
	t.Setenv("KID_TOKEN", secret)
	r := runCLI(t, t.Context(), nil, false, "run", "q", "--json", "--nodes", "1", "--log-level", "debug",
		"--mcp", mcpChildFlag(t, "kid"), "--mcp-env", "kid:"+mcpChildSayEnv+"=KID_TOKEN", "--calls", "kid.shout")
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr+r.stdout, secret) || !strings.Contains(r.stderr, "token=[REDACTED]") {
		t.Fatalf("the secret is in the output, or the server's line is not logged masked:\n%s", r.stderr)
	}
}

// TestServe_ReadyzNamesADownMCPServer: GET /readyz is 503 naming an MCP
// server that is down (it died and cannot start again), and 200 again by
// itself once it is back (the server's restarts with backoff).
func TestServe_ReadyzNamesADownMCPServer(t *testing.T) { // not parallel: t.Setenv (--mcp-env reads the environment)
	marker := filepath.Join(t.TempDir(), "down")
	t.Setenv("KID_DOWN", marker)
	srv := startServe(t, 0, nil, "--memory", "--runs-per-second", "-1", "--mcp", mcpChildFlag(t, "kid"), "--mcp-env", "kid:"+mcpChildDownEnv+"=KID_DOWN")
	a := newHardenAPI(t, srv, "")
	if code, _, b := a.call(t, http.MethodGet, "/readyz", ""); code != http.StatusOK {
		t.Fatalf("GET /readyz = %d %s", code, b)
	}
	rc := a.mustStartRun(t, `{"question":"q","scenario":{"nodes":1,"tokens":2,"calls":["kid.die"]}}`)
	a.runEvents(t, rc.SessionID, rc.RunID)
	var ready messages.Readiness
	for deadline := time.Now().Add(20 * time.Second); ; {
		code, _, b := a.call(t, http.MethodGet, "/readyz", "")
		if code == http.StatusServiceUnavailable && json.Unmarshal(b, &ready) == nil && len(ready.NotReady) == 1 && ready.NotReady[0].Component == "mcp server kid" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /readyz with the MCP server down = %d %s", code, b)
		}
		time.Sleep(50 * time.Millisecond) // polling the server's state with a deadline
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; { // the restart backoff doubles from 0.5 s
		code, _, b := a.call(t, http.MethodGet, "/readyz", "")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /readyz after the MCP server came back = %d %s", code, b)
		}
		time.Sleep(100 * time.Millisecond) // polling with a deadline
	}
}
