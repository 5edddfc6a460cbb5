package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/openai"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/tool"
	"github.com/conclave-ai/conclave/tool/fetch"
	"github.com/conclave-ai/conclave/tool/mcp"
	"github.com/conclave-ai/conclave/tool/workspace"
	"github.com/conclave-ai/conclave/transport"
)

// toolFlags are the flags that give the engine tools: --mcp and the
// built-in tools' (--tool-fetch, --tool-workspace and their options), on
// both serve and run.
type toolFlags struct {
	mcp    []string
	mcpEnv []string // --mcp-env SERVER:NAME[=VAR]
	// mcpConfig, when set (tests), adjusts the servers' configuration.
	mcpConfig func(*mcp.Config)

	fetch             bool
	fetchAllowPrivate bool
	fetchAllow        []string // --fetch-allow IP:PORT
	fetchDefaultURL   string
	workspace         bool
	workspaceDir      string
	// defaultWorkspaceDir is the workspaces' directory without
	// --workspace-dir (serve: DATA/workspaces); empty: a temporary
	// directory removed at shutdown.
	defaultWorkspaceDir string
}

// mcpStopGrace bounds the MCP servers' shutdown: each stdio server gets
// its stdin closed, then SIGTERM, then SIGKILL (mcp.DefaultStopGrace
// apart), all at once.
const mcpStopGrace = 3*mcp.DefaultStopGrace + time.Second

func (f *toolFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.mcp, "mcp", nil, "MCP tool server `NAME=COMMAND ARGS` (stdio; quote the whole value) or NAME=https://HOST/PATH (streamable HTTP); its tools become NAME.tool (repeatable)")
	fs.StringArrayVar(&f.mcpEnv, "mcp-env", nil, "pass the stdio MCP server SERVER the variable NAME, with the value of this process's VAR (default: NAME): `SERVER:NAME[=VAR]`; "+
		"a stdio server gets only HOME, LOGNAME, PATH, SHELL, TERM and USER otherwise (repeatable)")
	fs.BoolVar(&f.fetch, "tool-fetch", false, "offer agents the built-in fetch tool: HTTP GET of a URL as text (HTML reduced to text; loopback, private, link-local and CGNAT addresses refused)")
	fs.BoolVar(&f.fetchAllowPrivate, "fetch-allow-private", false, "let fetch connect to loopback, private and link-local addresses, the cloud metadata address among them (tests and development only)")
	fs.StringArrayVar(&f.fetchAllow, "fetch-allow", nil, "let fetch connect to exactly this `IP:PORT` even though it is private or local (repeatable)")
	fs.StringVar(&f.fetchDefaultURL, "fetch-default-url", "", "the `URL` fetch's schema gives as its url argument's default: what the scripted model fetches when a scenario's calls name fetch")
	fs.BoolVar(&f.workspace, "tool-workspace", false, "offer agents the built-in workspace tools: workspace.write, workspace.read and workspace.list, on a directory per run (each write is published as a file event)")
	fs.StringVar(&f.workspaceDir, "workspace-dir", "", "the `DIR` holding the runs' workspaces, DIR/<tenant>/<run id> (default: DATA/workspaces for serve; a temporary directory removed at exit for run and serve --memory)")
}

// builtins are the built-in tools the flags ask for, and a func that
// releases what they hold (idle connections, a temporary directory; nil:
// nothing).
func (f *toolFlags) builtins(logger *slog.Logger) (tools []tool.Tool, cleanup func(), err error) {
	if f.fetch {
		cfg := fetch.Config{AllowPrivate: f.fetchAllowPrivate, DefaultURL: f.fetchDefaultURL, Logger: logger}
		for _, v := range f.fetchAllow {
			ap, err := netip.ParseAddrPort(v)
			if err != nil {
				return nil, nil, usageError(fmt.Errorf("invalid --fetch-allow %q: want IP:PORT", truncateFlag(v)))
			}
			cfg.Allow = append(cfg.Allow, ap)
		}
		ft, err := fetch.New(cfg)
		if err != nil {
			return nil, nil, usageError(fmt.Errorf("--tool-fetch: %w", err))
		}
		tools, cleanup = append(tools, ft), ft.Close
		if f.fetchAllowPrivate {
			logger.Warn("fetch may connect to loopback, private and link-local addresses (--fetch-allow-private): agents can reach this host, its network and the cloud metadata service")
		}
		logger.Info("built-in tool", "tool", fetch.Name, "allow", f.fetchAllow)
	} else if f.fetchAllowPrivate || len(f.fetchAllow) > 0 || f.fetchDefaultURL != "" {
		return nil, nil, usageError(errors.New("--fetch-allow-private, --fetch-allow and --fetch-default-url need --tool-fetch"))
	}
	if !f.workspace {
		if f.workspaceDir != "" {
			return nil, nil, usageError(errors.New("--workspace-dir needs --tool-workspace"))
		}
		return tools, cleanup, nil
	}
	dir, temp := cmp.Or(f.workspaceDir, f.defaultWorkspaceDir), false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "conclave-workspaces-"); err != nil {
			return nil, nil, failure(fmt.Errorf("--tool-workspace: %w", err))
		}
		temp = true
	}
	closeFetch := cleanup // nil without fetch
	release := func() {
		if closeFetch != nil {
			closeFetch()
		}
		if !temp {
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			logger.Error("remove the workspaces", "dir", dir, "err", err)
		}
	}
	ws, err := workspace.New(workspace.Config{Dir: dir})
	if err != nil {
		release()
		return nil, nil, failure(fmt.Errorf("--tool-workspace: %w", err))
	}
	logger.Info("built-in tool", "tool", "workspace", "dir", dir, "removed_at_exit", temp)
	return append(tools, ws.Tools()...), release, nil
}

// specs parses the --mcp values. Errors name the flag and the value.
func (f *toolFlags) specs() ([]mcp.Spec, error) {
	var specs []mcp.Spec
	seen := map[string]bool{}
	for _, v := range f.mcp {
		sp, err := mcp.ParseSpec(v)
		if err != nil {
			return nil, fmt.Errorf("invalid --mcp %q: %w", truncateFlag(v), err)
		}
		if seen[sp.Name] {
			return nil, fmt.Errorf("invalid --mcp %q: another --mcp is named %s too", truncateFlag(v), sp.Name)
		}
		seen[sp.Name] = true
		specs = append(specs, sp)
	}
	for _, v := range f.mcpEnv {
		server, entry, err := mcpEnvEntry(v, os.LookupEnv)
		if err != nil {
			return nil, fmt.Errorf("invalid --mcp-env %q: %w", truncateFlag(v), err)
		}
		i := slices.IndexFunc(specs, func(sp mcp.Spec) bool { return sp.Name == server })
		if i < 0 || len(specs[i].Command) == 0 {
			return nil, fmt.Errorf("invalid --mcp-env %q: no stdio --mcp server is named %s", truncateFlag(v), server)
		}
		specs[i].Env = append(specs[i].Env, entry)
	}
	return specs, nil
}

// mcpEnvEntry reads an --mcp-env value, SERVER:NAME[=VAR], into the
// server's name and its NAME=VALUE entry, VALUE being VAR's (NAME's
// without =VAR) in this process's environment (lookup): a secret is
// never written on the command line, where ps shows it.
func mcpEnvEntry(v string, lookup func(string) (string, bool)) (server, entry string, err error) {
	server, rest, ok := strings.Cut(v, ":")
	if !ok || server == "" {
		return "", "", errors.New("want SERVER:NAME or SERVER:NAME=VAR")
	}
	name, from, hasFrom := strings.Cut(rest, "=")
	if !hasFrom {
		from = name
	}
	if !envName.MatchString(name) || !envName.MatchString(from) {
		return "", "", fmt.Errorf("NAME and VAR must be environment variable names (letters, digits and '_', not starting with a digit)")
	}
	val, ok := lookup(from)
	if !ok {
		return "", "", fmt.Errorf("%s is not set in this process's environment", from)
	}
	return server, name + "=" + val, nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// truncateFlag bounds a flag value quoted in an error.
func truncateFlag(v string) string {
	const max = 200
	if len(v) <= max {
		return v
	}
	return v[:max] + "…"
}

// toolRuntime is what the engine's tools hold until after the engine's
// shutdown: the MCP servers (nil: none) and the built-in tools' temporary
// directory.
type toolRuntime struct {
	servers *mcp.Servers
	cleanup func() // nil: nothing to remove
}

// engineTools are the engine's tools: the built-in tools the flags ask
// for, the tools of the MCP servers, which are started here (each is
// connected and lists its tools before this returns), and, for the
// scripted model only, the scripted search and publish tools (a real
// model must never be offered a search that returns invented results).
// With the scripted model, no built-in tool and no --mcp, the set is nil:
// the engine's defaults. The caller stops what the tools hold with
// stopTools after the engine's shutdown.
func (f *toolFlags) engineTools(ctx context.Context, logger *slog.Logger, scriptedModel bool) (*tool.Set, *toolRuntime, error) {
	specs, err := f.specs()
	if err != nil {
		return nil, nil, usageError(err)
	}
	own, cleanup, err := f.builtins(logger)
	if err != nil {
		return nil, nil, err
	}
	rt := &toolRuntime{cleanup: cleanup}
	var builtin []tool.Tool
	if scriptedModel {
		builtin = []tool.Tool{scripted.SearchTool(), scripted.PublishTool()}
	}
	builtin = append(builtin, own...)
	if len(specs) == 0 {
		if scriptedModel && len(own) == 0 {
			return nil, rt, nil
		}
		set, err := tool.NewSet(builtin...)
		if err != nil {
			_ = stopTools(rt, logger)
			return nil, nil, failure(err)
		}
		return set, rt, nil
	}
	cfg := mcp.Config{Servers: specs, Logger: logger}
	if f.mcpConfig != nil {
		f.mcpConfig(&cfg)
	}
	servers, err := mcp.Start(ctx, cfg)
	if err != nil {
		_ = stopTools(rt, logger)
		if errors.Is(err, mcp.ErrSpec) {
			return nil, nil, usageError(fmt.Errorf("--mcp: %w", err))
		}
		return nil, nil, failure(fmt.Errorf("--mcp: %w", err))
	}
	rt.servers = servers
	tools := append(builtin, servers.Tools()...)
	set, err := tool.NewSet(tools...)
	if err != nil { // an MCP server named like a built-in tool ("workspace.write")
		_ = stopTools(rt, logger)
		return nil, nil, failure(fmt.Errorf("--mcp: %w", err))
	}
	for _, st := range servers.Status() {
		logger.Info("mcp tools", "server", st.Name, "tools", st.Tools)
	}
	return set, rt, nil
}

// stopTools shuts the MCP servers down (none: nothing), within
// mcpStopGrace, and removes the built-in tools' temporary directory.
func stopTools(rt *toolRuntime, logger *slog.Logger) error {
	if rt == nil {
		return nil
	}
	if rt.cleanup != nil {
		defer rt.cleanup()
	}
	servers := rt.servers
	if servers == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), mcpStopGrace)
	defer cancel()
	if err := servers.Shutdown(ctx); err != nil {
		// The processes left were killed at the deadline: wait for them.
		_ = servers.Shutdown(context.Background())
		logger.Error("mcp servers shutdown", "err", err)
		return fmt.Errorf("mcp servers shutdown: %w", err)
	}
	return nil
}

// toolServers is the MCP servers' state as GET /api/v1/tools shows it.
func toolServers(servers *mcp.Servers) []messages.ToolServer {
	var out []messages.ToolServer
	for _, st := range servers.Status() {
		out = append(out, messages.ToolServer{Name: st.Name, Up: st.Up, Down: st.Down, Restarts: st.Restarts, Tools: st.Tools})
	}
	return out
}

// secretValues are the values --mcp-env passes to tool servers: secrets to
// mask everywhere else (actors.Config.Secrets). Invalid values are left to
// specs to report.
func (f *toolFlags) secretValues() []string {
	var out []string
	for _, v := range f.mcpEnv {
		if _, entry, err := mcpEnvEntry(v, os.LookupEnv); err == nil {
			_, value, _ := strings.Cut(entry, "=")
			out = append(out, value)
		}
	}
	return out
}

// secrets are every secret value of the command: the model's API keys,
// the bearer tokens and what --mcp-env passes; masked in events, tool
// results and logs.
func secrets(env func(string) string, tokens transport.Tokens, tools *toolFlags) []string {
	out := append(tokens.Secrets(), env(openai.EnvAPIKey), env(openai.EnvOpenAIAPIKey))
	return append(out, tools.secretValues()...)
}
