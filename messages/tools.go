package messages

import "encoding/json"

// ToolSource is where a tool comes from.
type ToolSource string

// Tool sources.
const (
	// ToolSourceRuntime: the runtime's own (delegate, ask_human,
	// spawn_subteam, the async task tools); agents run them.
	ToolSourceRuntime ToolSource = "runtime"
	// ToolSourceMCP: a tool of an MCP server (Server names it).
	ToolSourceMCP ToolSource = "mcp"
	// ToolSourceGo: a Go tool of the program (an embedding program's, the
	// built-in fetch and workspace tools, or the scripted model's search
	// and publish).
	ToolSourceGo ToolSource = "go"
)

// ToolInfo describes one tool agents may call (GET /api/v1/tools).
type ToolInfo struct {
	Name        string `json:"name"`
	DisplayName string `json:"display_name"`
	Description string `json:"description"`
	// InputSchema is the JSON Schema of the tool's arguments.
	InputSchema json.RawMessage `json:"input_schema"`
	// Risk decides which approvals a governance policy covers.
	Risk   RiskLevel  `json:"risk"`
	Source ToolSource `json:"source"`
	// Server is the MCP server of an mcp tool.
	Server string `json:"server,omitempty"`
}

// ToolServer is the state of one MCP tool server.
type ToolServer struct {
	Name string `json:"name"`
	Up   bool   `json:"up"`
	// Down says why the server is down (empty while up).
	Down     string `json:"down,omitempty"`
	Restarts int    `json:"restarts"`
	// Tools is how many of its tools agents may call.
	Tools int `json:"tools"`
}

// ToolList is the answer of GET /api/v1/tools: every tool agents may
// call, by name, and the state of each MCP server.
type ToolList struct {
	Tools   []ToolInfo   `json:"tools"`
	Servers []ToolServer `json:"servers"`
}
