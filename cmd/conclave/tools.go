package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/conclave-ai/conclave/messages"
)

// toolsCmd holds the flags of `conclave tools`.
type toolsCmd struct {
	app     *app
	server  string
	json    bool
	timeout time.Duration
}

func newToolsCmd(a *app) *cobra.Command {
	c := &toolsCmd{app: a}
	cmd := &cobra.Command{
		Use:   "tools [--server URL] [--json]",
		Short: "List the tools a server's agents may call, and its MCP servers",
		Long: `tools lists every tool the server's agents may call (GET /api/v1/tools):
its name, risk level (what a governance policy covers), source (runtime: the
runtime's own; mcp: a tool server's; go: a Go tool of the program) and
description, then the state of each MCP tool server. --json prints the
answer as it is, with each tool's JSON Schema.

The bearer token, if the server needs one, is read from CONCLAVE_TOKEN.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 {
				return usageError(errors.New("tools takes no arguments"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd.Context()) },
	}
	fs := cmd.Flags()
	fs.StringVar(&c.server, "server", "http://127.0.0.1:8080", "the conclave server's base `URL`")
	fs.BoolVar(&c.json, "json", false, "print the answer as JSON")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "how long to wait for the server")
	return cmd
}

func (c *toolsCmd) run(ctx context.Context) error {
	base, err := url.Parse(c.server)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return usageError(fmt.Errorf("invalid --server %q: want http(s)://host:port", c.server))
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cl := &apiClient{base: base, token: c.app.env("CONCLAVE_TOKEN")}
	var list messages.ToolList
	if err := cl.do(ctx, http.MethodGet, "/api/v1/tools", nil, &list); err != nil {
		return failure(err)
	}
	if c.json {
		enc := json.NewEncoder(c.app.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	tw := tabwriter.NewWriter(c.app.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tRISK\tSOURCE\tDESCRIPTION")
	for _, t := range list.Tools {
		src := string(t.Source)
		if t.Server != "" {
			src += ":" + t.Server
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Risk, src, oneLine(t.Description, 72))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range list.Servers {
		state := fmt.Sprintf("up, %d tools", s.Tools)
		if !s.Up {
			state = "down: " + s.Down
		}
		if s.Restarts > 0 {
			state += fmt.Sprintf(", restarted %d times", s.Restarts)
		}
		fmt.Fprintf(c.app.stdout, "mcp server %s: %s\n", s.Name, state)
	}
	return nil
}

// oneLine is s on one line, cut to n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
