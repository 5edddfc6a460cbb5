package actors

import (
	"slices"
	"strings"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/tool"
)

// Tools lists every tool agents may call, by name: the engine's tools
// (Config.Tools) and the runtime's own, with their schemas and risk
// levels. A tool named "S.name" where S is one of mcpServers is an MCP
// tool of server S; the others are Go tools. Safe for concurrent use.
func (e *Engine) Tools(mcpServers []string) []messages.ToolInfo {
	names := e.cfg.Tools.AllNames()
	slices.Sort(names)
	out := make([]messages.ToolInfo, 0, len(names))
	for _, name := range names {
		_, def, ok := e.cfg.Tools.Lookup(name)
		if !ok {
			if def, ok = tool.Builtin(name); !ok {
				continue
			}
		}
		info := messages.ToolInfo{Name: name, DisplayName: e.cfg.Tools.DisplayName(name), Description: def.Description,
			InputSchema: def.Schema, Risk: e.toolRisk(name), Source: messages.ToolSourceGo}
		if len(info.InputSchema) == 0 {
			info.InputSchema = []byte(`{"type":"object"}`)
		}
		switch server, _, dotted := strings.Cut(name, "."); {
		case tool.IsBuiltin(name):
			info.Source = messages.ToolSourceRuntime
		case dotted && slices.Contains(mcpServers, server):
			info.Source, info.Server = messages.ToolSourceMCP, server
		}
		out = append(out, info)
	}
	return out
}
