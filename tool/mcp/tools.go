package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/tool"
)

// remoteTool is one tool of an MCP server as an agent tool.
type remoteTool struct {
	srv    *server
	remote string // the server's name of the tool
	def    tool.Def
}

var _ tool.Tool = (*remoteTool)(nil)

func (t *remoteTool) Def() tool.Def { return t.def }

// Call calls the tool over the server's current session. It fails fast
// when the server is down, and with ErrServerDied when the server goes
// down during the call; it returns when ctx ends (the server is told the
// call is cancelled).
func (t *remoteTool) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	res, err := t.srv.call(ctx, t.remote, args)
	if err != nil {
		return tool.Result{}, err
	}
	return convertResult(t.def.Name, res, t.srv.cfg.MaxResultBytes)
}

// ToolError is a result the server marked isError: the tool ran and
// failed. Its text is what the server said, for the model to act on.
type ToolError struct {
	Tool string // "server.tool"
	Text string
}

func (e *ToolError) Error() string { return e.Text }

// Result limits.
const (
	// MaxSources bounds the sources one result carries; more are dropped.
	MaxSources = 64
	// maxDescriptionBytes bounds a tool's description (it is sent with
	// every model request that may call the tool).
	maxDescriptionBytes = 4 << 10
)

// convertResult turns a call's result into a tool result: the text of its
// text content and embedded text resources, joined by newlines, at most
// maxBytes of it (cut at a rune boundary, with a note); resource links
// (also as a line "[resource link: TITLE <URI>]" of the text) and
// embedded resources with a URI as sources; other content (images, audio,
// blobs) as a one-line note. A result with no content but structured
// content gives that as JSON. An isError result is a *ToolError.
func convertResult(name string, res *sdk.CallToolResult, maxBytes int) (tool.Result, error) {
	var (
		parts   []string
		sources []model.Source
		seen    = map[string]bool{}
	)
	addSource := func(uri, title string) {
		if uri == "" || seen[uri] || len(sources) == MaxSources {
			return
		}
		seen[uri] = true
		sources = append(sources, model.Source{URL: uri, Title: title})
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ResourceLink:
			title := c.Title
			if title == "" {
				title = c.Name
			}
			addSource(c.URI, title)
			// In the text too: the run cites only web (http, https)
			// sources, and a model should see every link it was given.
			parts = append(parts, "[resource link: "+title+" <"+c.URI+">]")
		case *sdk.EmbeddedResource:
			if r := c.Resource; r != nil {
				addSource(r.URI, "")
				switch {
				case r.Text != "":
					parts = append(parts, r.Text)
				case len(r.Blob) > 0:
					parts = append(parts, fmt.Sprintf("[resource %s: %s, %d bytes, not shown]", r.URI, orUnknown(r.MIMEType), len(r.Blob)))
				}
			}
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes, not shown]", orUnknown(c.MIMEType), len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes, not shown]", orUnknown(c.MIMEType), len(c.Data)))
		default:
			parts = append(parts, fmt.Sprintf("[%T content, not shown]", c))
		}
	}
	if len(res.Content) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	text := truncate(strings.Join(parts, "\n"), maxBytes)
	if res.IsError {
		if text == "" {
			text = name + " reported an error without a message"
		}
		return tool.Result{}, &ToolError{Tool: name, Text: text}
	}
	return tool.Result{Content: text, Sources: sources}, nil
}

func orUnknown(mime string) string {
	if mime == "" {
		return "unknown type"
	}
	return mime
}

// truncate cuts s to at most max bytes at a rune boundary, and says so.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	note := "\n[truncated: the result was " + strconv.Itoa(len(s)) + " bytes; the first " + strconv.Itoa(max) + " are shown]"
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + note
}

// toolName is the agent tool name of a server's tool: "server.tool",
// every byte that tool names do not allow replaced by '_', cut to
// tool.MaxNameBytes. ok is false when nothing of the tool's name is left.
func toolName(server, remote string) (name string, changed bool) {
	b := []byte(remote)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			b[i] = '_'
			changed = true
		}
	}
	name = server + "." + string(b)
	if len(name) > tool.MaxNameBytes {
		name, changed = name[:tool.MaxNameBytes], true
	}
	return name, changed
}

// schemaOf is the input schema of a listed tool as JSON: {"type":"object"}
// when it has none (or an empty one), and with "type":"object" added when
// it names no type. A schema whose type is not object is an error.
func schemaOf(t *sdk.Tool) (json.RawMessage, error) {
	if t.InputSchema == nil {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	b, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, errors.New("input schema is not a JSON object")
	}
	if len(m) == 0 {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	if _, ok := m["type"]; !ok {
		m["type"] = "object"
		if b, err = json.Marshal(m); err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
	}
	return b, nil
}

// riskOf is the risk of a tool by its annotations: low when it says it is
// read-only, high when it says it is destructive, else medium (the MCP
// default assumes a tool may change its environment).
func riskOf(t *sdk.Tool) tool.Risk {
	a := t.Annotations
	switch {
	case a == nil:
		return tool.RiskMedium
	case a.ReadOnlyHint:
		return tool.RiskLow
	case a.DestructiveHint != nil && *a.DestructiveHint:
		return tool.RiskHigh
	}
	return tool.RiskMedium
}

// describe is the description models get: the tool's own, or else its
// title, bounded.
func describe(t *sdk.Tool) string {
	d := t.Description
	if d == "" {
		d = t.Title
	}
	if d == "" && t.Annotations != nil {
		d = t.Annotations.Title
	}
	return cutAt(d, maxDescriptionBytes)
}

// cutAt cuts s to at most max bytes at a rune boundary, ending it with
// "…" when it cut.
func cutAt(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
