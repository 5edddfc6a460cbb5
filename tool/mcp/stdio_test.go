package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/tool"
	"github.com/conclave-ai/conclave/tool/mcp"
)

// TestServers_StdioTools: a stdio server's tools become agent tools
// "NAME.tool" with their schemas, descriptions and risks; names tool.Set
// would refuse are renamed or left out; the tools make a valid tool.Set.
func TestServers_StdioTools(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder(t)
	s := start(t, stdioConfig(t, rec, stdioSpec(t, "t")))
	var names []string
	defs := map[string]tool.Def{}
	for _, tl := range s.Tools() {
		d := tl.Def()
		names = append(names, d.Name)
		defs[d.Name] = d
	}
	long := "t." + strings.Repeat("long", 17) + "xy"
	want := []string{"t.bad_name_", "t.big", "t.block", "t.crash", "t.echo", "t.env", "t.fail", "t.links", long[:tool.MaxNameBytes], "t.plain", "t.progress", "t.wipe"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %q, want %q", names, want)
	}
	if !rec.has("mcp tool renamed", `tool="bad name!"`, "as=t.bad_name_") || !rec.has("collides", "tool=bad_name_") || !rec.has("mcp tool renamed", "as="+long[:tool.MaxNameBytes]) {
		t.Error("the renamed and left-out tools were not logged")
	}
	echo := defs["t.echo"]
	var sc struct {
		Type       string
		Required   []string
		Properties map[string]struct{ Type, Description string }
	}
	if err := json.Unmarshal(echo.Schema, &sc); err != nil {
		t.Fatal(err)
	}
	if sc.Type != "object" || !slices.Equal(sc.Required, []string{"message"}) || sc.Properties["message"].Type != "string" || sc.Properties["message"].Description != "the text to echo" {
		t.Errorf("echo schema %s", echo.Schema)
	}
	if d := defs["t.plain"].DisplayName; d != "t: Plain tool" || echo.DisplayName != "" {
		t.Errorf("display names %q, %q; want the title's, and none without one", d, echo.DisplayName)
	}
	if echo.Description != "Echoes its message." || defs["t.plain"].Description != "Plain tool" {
		t.Errorf("descriptions %q, %q", echo.Description, defs["t.plain"].Description)
	}
	for name, risk := range map[string]tool.Risk{"t.echo": tool.RiskLow, "t.wipe": tool.RiskHigh, "t.plain": tool.RiskMedium, "t.links": tool.RiskMedium} {
		if defs[name].Risk != risk {
			t.Errorf("%s risk %q, want %q", name, defs[name].Risk, risk)
		}
	}
	set, err := tool.NewSet(s.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Validate("t.echo", json.RawMessage(`{"message":"hi"}`)); err != nil {
		t.Error(err)
	}
	if err := set.Validate("t.echo", json.RawMessage(`{"message":3}`)); !errors.Is(err, tool.ErrInvalidArgs) {
		t.Errorf("echo {message:3}: %v, want ErrInvalidArgs", err)
	}
	if st := s.Status(); len(st) != 1 || !st[0].Up || st[0].Tools != len(want) || st[0].Restarts != 0 {
		t.Errorf("status %+v", st)
	}
}

// TestServers_StdioResults: text becomes the result, resource links and
// embedded resources become sources, isError becomes an error, a big
// result is cut with a note.
func TestServers_StdioResults(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder(t)
	cfg := stdioConfig(t, rec, stdioSpec(t, "t"))
	cfg.MaxResultBytes = 1000
	s := start(t, cfg)

	res, err := call(t, s, "t.echo", `{"message":"hello"}`)
	if err != nil || res.Content != "echo: hello" || len(res.Sources) != 0 {
		t.Errorf("echo: %+v, %v", res, err)
	}
	res, err = call(t, s, "t.links", `{}`)
	wantSources := []model.Source{{URL: "https://example.org/a", Title: "Page A"}, {URL: "https://example.org/b", Title: "b"}, {URL: "https://example.org/c"}}
	if err != nil || res.Content != "two pages\n[resource link: Page A <https://example.org/a>]\n[resource link: b <https://example.org/b>]\nembedded text" || !slices.Equal(res.Sources, wantSources) {
		t.Errorf("links: %+v, %v", res, err)
	}
	_, err = call(t, s, "t.fail", `{}`)
	var te *mcp.ToolError
	if !errors.As(err, &te) || te.Text != "it broke" || te.Tool != "t.fail" || err.Error() != "it broke" {
		t.Errorf("fail: %v, want a ToolError saying it broke", err)
	}
	res, err = call(t, s, "t.big", `{"bytes":5000}`)
	if err != nil || !strings.HasPrefix(res.Content, strings.Repeat("x", 1000)+"\n[truncated: the result was 5000 bytes; the first 1000 are shown]") {
		t.Errorf("big: %.80q…, %v", res.Content, err)
	}
	// An argument the server's own validation refuses is its error answer;
	// the server stays up.
	if _, err := call(t, s, "t.echo", `{"message":7}`); err == nil || errors.Is(err, mcp.ErrServerDied) {
		t.Errorf("echo {message:7}: %v, want the server's error", err)
	}
	if st := s.Status(); !st[0].Up {
		t.Errorf("status %+v", st)
	}
}

// TestServers_StdioProgress: a call whose context takes progress reports
// sends a progressToken in its _meta, and the server's
// notifications/progress of that token become the call's reports; one of
// another token is dropped. A call whose context takes none sends no token.
func TestServers_StdioProgress(t *testing.T) {
	t.Parallel()
	s := start(t, stdioConfig(t, newLogRecorder(t), stdioSpec(t, "t")))
	reports := make(chan tool.Progress, 8)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ctx = tool.WithProgress(ctx, func(p tool.Progress) { reports <- p })
	res, err := lookup(t, s, "t.progress").Call(ctx, json.RawMessage(`{}`))
	if err != nil || res.Content != "reported" {
		t.Fatalf("progress: %+v, %v", res, err)
	}
	// The notifications were sent before the answer; the client may hand
	// them over after it.
	for i := 1; i <= 3; i++ {
		select {
		case p := <-reports:
			if want := (tool.Progress{Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)}); p != want {
				t.Errorf("report %d: %+v, want %+v", i, p, want)
			}
		case <-ctx.Done():
			t.Fatalf("report %d never came", i)
		}
	}
	select {
	case p := <-reports:
		t.Errorf("a report of another token was taken: %+v", p)
	default:
	}
	if res, err := call(t, s, "t.progress", `{}`); err != nil || res.Content != "no progress token" {
		t.Errorf("a call without a progress listener: %+v, %v", res, err)
	}
}

// TestServers_StdioCancelBlockedCall: cancelling a call's context ends a
// call the server blocks on, at once; the server stays up.
func TestServers_StdioCancelBlockedCall(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder(t)
	s := start(t, stdioConfig(t, rec, stdioSpec(t, "t")))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := lookup(t, s, "t.block").Call(ctx, json.RawMessage(`{}`))
		done <- err
	}()
	waitStarted(t, rec.started)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call: %v, want context.Canceled", err)
		}
	case <-time.After(wait):
		t.Fatal("the cancelled call did not return")
	}
	if res, err := call(t, s, "t.echo", `{"message":"still here"}`); err != nil || res.Content != "echo: still here" {
		t.Fatalf("echo after the cancel: %+v, %v", res, err)
	}
}

// TestServers_StdioCrashRestarts: a server that crashes on a call fails
// that call and the one in flight with ErrServerDied, naming the server
// and its exit; it is restarted, and the next call works.
func TestServers_StdioCrashRestarts(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder(t)
	s := start(t, stdioConfig(t, rec, stdioSpec(t, "t")))
	inFlight := make(chan error, 1)
	go func() {
		_, err := call(t, s, "t.block", `{}`)
		inFlight <- err
	}()
	waitStarted(t, rec.started)
	_, err := call(t, s, "t.crash", `{}`)
	if !errors.Is(err, mcp.ErrServerDied) || !strings.Contains(err.Error(), "server t") || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "crashing") {
		t.Errorf("the crashing call: %v; want ErrServerDied naming server t, its exit status 3 and its stderr", err)
	}
	select {
	case err := <-inFlight:
		if !errors.Is(err, mcp.ErrServerDied) || !strings.Contains(err.Error(), "tool block") {
			t.Errorf("the call in flight: %v; want ErrServerDied", err)
		}
	case <-time.After(wait):
		t.Fatal("the call in flight did not fail")
	}
	st := waitStatus(t, s, "t", func(st mcp.Status) bool { return st.Up && st.Restarts == 1 })
	if st.Down != "" {
		t.Errorf("status %+v", st)
	}
	if res, err := call(t, s, "t.echo", `{"message":"back"}`); err != nil || res.Content != "echo: back" {
		t.Fatalf("echo after the restart: %+v, %v", res, err)
	}
	if !rec.has("mcp server down; restarting", "exit status 3") || !rec.has("mcp server restarted", "restarts=1") {
		t.Error("the crash and the restart were not logged")
	}
	if rec.has("restarted with other tools") {
		t.Error("the same server, restarted, was said to list other tools (tools it left out or renamed count as listed)")
	}
}

// TestServers_StdioDownFailsFast: while a server is down (its restart is
// far off), calls fail at once with ErrServerDown, saying why.
func TestServers_StdioDownFailsFast(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder(t)
	cfg := stdioConfig(t, rec, stdioSpec(t, "t"))
	cfg.MinBackoff, cfg.MaxBackoff = time.Hour, time.Hour
	s := start(t, cfg)
	if _, err := call(t, s, "t.crash", `{}`); !errors.Is(err, mcp.ErrServerDied) {
		t.Fatalf("crash: %v", err)
	}
	waitStatus(t, s, "t", func(st mcp.Status) bool { return !st.Up })
	begin := time.Now()
	_, err := call(t, s, "t.echo", `{"message":"x"}`)
	if !errors.Is(err, mcp.ErrServerDown) || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("a call while down: %v; want ErrServerDown saying why", err)
	}
	if took := time.Since(begin); took > time.Second {
		t.Fatalf("a call while down took %v", took)
	}
}

// TestStart_ServerThatCannotStart: Start fails, naming the server and
// why: a command that does not exist, or one that exits (its status and
// stderr).
func TestStart_ServerThatCannotStart(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		specs []mcp.Spec
		env   string
		says  []string
	}{
		{[]mcp.Spec{stdioSpec(t, "good"), {Name: "gone", Command: []string{"/nonexistent/mcp-server", "--x"}}}, modeServe,
			[]string{"server gone", "/nonexistent/mcp-server --x", "no such file"}},
		{[]mcp.Spec{{Name: "quits", Command: []string{exe}}}, modeExit,
			[]string{"server quits", "exit status 2", "no configuration found"}},
		{[]mcp.Spec{{Name: "web", URL: "http://127.0.0.1:1/mcp"}}, "",
			[]string{"server web", "http://127.0.0.1:1/mcp", "connect"}},
	} {
		cfg := stdioConfig(t, rec, tc.specs...)
		cfg.Env = append(os.Environ(), serverModeEnv+"="+tc.env)
		cfg.ConnectTimeout = 10 * time.Second
		s, err := mcp.Start(context.Background(), cfg)
		if err == nil {
			_ = s.Shutdown(context.Background())
			t.Errorf("%v: started", tc.specs)
			continue
		}
		for _, part := range tc.says {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("error %q does not say %q", err, part)
			}
		}
	}
	for _, specs := range [][]mcp.Spec{
		{{Name: "a", Command: []string{"x"}}, {Name: "a", URL: "http://x"}},
		{{Name: "b"}},
		{{Name: "c", Command: []string{"x"}, URL: "http://x"}},
		{{Name: "d.e", Command: []string{"x"}}},
	} {
		if _, err := mcp.Start(context.Background(), mcp.Config{Servers: specs}); !errors.Is(err, mcp.ErrSpec) {
			t.Errorf("%+v: %v, want ErrSpec", specs, err)
		}
	}
}

// TestServers_Shutdown: a call in flight fails with ErrClosed, the server
// process is stopped, Shutdown is idempotent, later calls fail with
// ErrClosed (TestMain checks that no goroutine is left).
func TestServers_Shutdown(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder(t)
	s, err := mcp.Start(context.Background(), stdioConfig(t, rec, stdioSpec(t, "t"), stdioSpec(t, "u")))
	if err != nil {
		t.Fatal(err)
	}
	inFlight := make(chan error, 1)
	go func() {
		_, err := call(t, s, "u.block", `{}`)
		inFlight <- err
	}()
	waitStarted(t, rec.started)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-inFlight; !errors.Is(err, mcp.ErrClosed) {
		t.Errorf("the call in flight: %v, want ErrClosed", err)
	}
	select {
	case <-s.Done():
	default:
		t.Error("Done is open after Shutdown")
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	if _, err := call(t, s, "t.echo", `{"message":"x"}`); !errors.Is(err, mcp.ErrClosed) {
		t.Errorf("a call after Shutdown: %v, want ErrClosed", err)
	}
}

// TestServers_StdioEnvironment: a stdio server inherits only
// DefaultEnvVars of this process (no API key or token reaches it), plus
// its Spec.Env, which overrides them.
func TestServers_StdioEnvironment(t *testing.T) { // not parallel: t.Setenv
	secrets := map[string]string{"OPENAI_API_KEY": "sk-proj-secret1", "CONCLAVE_MODEL_API_KEY": "sk-secret2",
		"CONCLAVE_TOKENS": "local:secret3", "AWS_SECRET_ACCESS_KEY": "secret4"}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("HOME", "/home/conclave")
	rec := newLogRecorder(t)
	sp := stdioSpec(t, "t")
	sp.Env = []string{serverModeEnv + "=" + modeServe, "PASSED=yes", "HOME=/srv/tools"}
	s := start(t, mcp.Config{Servers: []mcp.Spec{sp}, Logger: rec.logger(), PingInterval: -1}) // Env nil: the default
	res, err := call(t, s, "t.env", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(res.Content, "\n")
	for k, v := range secrets {
		if strings.Contains(res.Content, v) || strings.Contains(res.Content, k+"=") {
			t.Errorf("%s reached the tool server:\n%s", k, res.Content)
		}
	}
	for _, want := range []string{"PASSED=yes", "HOME=/srv/tools", "PATH=" + os.Getenv("PATH")} {
		if !slices.Contains(got, want) {
			t.Errorf("%s is not in the server's environment:\n%s", want, res.Content)
		}
	}
	if slices.Contains(got, "HOME=/home/conclave") {
		t.Errorf("Spec.Env did not override HOME:\n%s", res.Content)
	}
}

func TestDefaultEnv(t *testing.T) {
	t.Parallel()
	in := []string{"PATH=/bin", "OPENAI_API_KEY=sk-1", "HOME=/h", "HOMEX=1", "TERM=xterm", "USER=u", "LOGNAME=u", "SHELL=/bin/sh", "LANG=C", "weird"}
	want := []string{"PATH=/bin", "HOME=/h", "TERM=xterm", "USER=u", "LOGNAME=u", "SHELL=/bin/sh"}
	if got := mcp.DefaultEnv(in); !slices.Equal(got, want) {
		t.Fatalf("DefaultEnv = %q, want %q", got, want)
	}
}

func TestSpec_EnvChecked(t *testing.T) {
	t.Parallel()
	for _, sp := range []mcp.Spec{
		{Name: "a", Command: []string{"x"}, Env: []string{"NOEQUALS"}},
		{Name: "a", Command: []string{"x"}, Env: []string{"=v"}},
		{Name: "a", URL: "https://example.org/mcp", Env: []string{"A=b"}},
	} {
		_, err := mcp.Start(context.Background(), mcp.Config{Servers: []mcp.Spec{sp}})
		if !errors.Is(err, mcp.ErrSpec) {
			t.Errorf("%+v: %v, want ErrSpec", sp, err)
		}
	}
}
