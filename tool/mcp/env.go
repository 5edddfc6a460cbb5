package mcp

import (
	"fmt"
	"slices"
	"strings"
)

// DefaultEnvVars are the variables of this process that a stdio server
// inherits by default: those the official MCP SDKs pass
// (getDefaultEnvironment), enough to find and run a program. Everything
// else (the model's API key, API tokens, the server's key) stays home: a
// tool server that needs a variable gets it only through its Spec.Env,
// which the operator writes (serve --mcp-env).
var DefaultEnvVars = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}

// DefaultEnv is environ (os.Environ's form) with only DefaultEnvVars.
func DefaultEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if ok && slices.Contains(DefaultEnvVars, name) {
			out = append(out, kv)
		}
	}
	return out
}

// checkEnv validates a spec's NAME=VALUE entries.
func checkEnv(server string, env []string) error {
	for _, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || strings.ContainsAny(kv, "\x00") {
			return fmt.Errorf("%w: server %s: environment entry %q must be NAME=VALUE", ErrSpec, server, clipEnv(kv))
		}
	}
	return nil
}

// clipEnv shows at most the name of an entry (its value may be a secret).
func clipEnv(kv string) string {
	name, _, _ := strings.Cut(kv, "=")
	if len(name) > 64 {
		name = name[:64] + "…"
	}
	return name + "=…"
}
