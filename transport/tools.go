package transport

import (
	"net/http"

	"github.com/conclave-ai/conclave/messages"
)

// listTools: GET /api/v1/tools, every tool the caller's runs' agents may
// call (name, description, JSON Schema, risk level, source) and each MCP
// server's state (docs/api.md). The tools are the engine's, the same for
// every tenant; the call is authenticated like every /api/v1 call.
func (s *Server) listTools(w http.ResponseWriter, r *http.Request, _ messages.TenantID) {
	list := messages.ToolList{Servers: []messages.ToolServer{}}
	if s.cfg.ToolServers != nil {
		list.Servers = s.cfg.ToolServers()
	}
	names := make([]string, len(list.Servers))
	for i, sv := range list.Servers {
		names[i] = sv.Name
	}
	list.Tools = s.engine.Tools(names)
	writeJSON(w, http.StatusOK, list)
}
