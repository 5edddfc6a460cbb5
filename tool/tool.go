// Package tool is what an agent can call. A Tool has a definition — name,
// description, the JSON Schema of its arguments, a risk level and a
// timeout — and runs with a context its caller cancels. A Set holds an
// engine's tools by name and validates a call's arguments against the
// tool's schema before it runs; Func turns a typed Go function into a
// Tool, its schema generated from its argument type. MCP servers' tools
// come in through tool/mcp. The runtime's own tools (delegate, the async
// task tools, ask_human, spawn_subteam) are defined here too (Builtins),
// though the agents run them.
//
// A top-level package because tools, like models, are a swappable part of
// the architecture that embedding programs implement.
package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// Risk is how much harm a call can do; a governance policy may require
// signed approvals from a risk level on.
type Risk = messages.RiskLevel

// Risk levels.
const (
	RiskLow      = messages.RiskLow
	RiskMedium   = messages.RiskMedium
	RiskHigh     = messages.RiskHigh
	RiskCritical = messages.RiskCritical
)

// Def defines a tool.
type Def struct {
	// Name is how models call it: letters, digits, '_', '-' and '.', at
	// most 64 bytes (an MCP server's tools are "server.tool").
	Name        string
	Description string
	// DisplayName is how people see it ("Web search"); empty: made from
	// Name (Set.DisplayName).
	DisplayName string
	// Schema is the JSON Schema of the arguments; it must describe a JSON
	// object. Empty means {"type":"object"}.
	Schema json.RawMessage
	Risk   Risk // empty: RiskLow
	// Timeout bounds one call; 0 means the engine's default.
	Timeout time.Duration
}

// Model is what a model is told about the tool.
func (d Def) Model() model.ToolDef {
	return model.ToolDef{Name: d.Name, Description: d.Description, Schema: d.Schema}
}

// Result is what a call returns: the content the model reads, the
// sources it drew on (numbered as citations by the run), and the files it
// wrote, which the calling agent publishes as file events on its lane,
// in order, right before the call's tool_call_finished (it fills in each
// file's CallID and Tool).
type Result struct {
	Content string
	Sources []model.Source
	Files   []messages.FilePayload
}

// Tool is a tool an agent can call. Call runs on a goroutine of its own
// with a context that ends on abort, stop, shutdown or the tool's
// timeout; it must return when the context ends. An error is given to the
// model as an error result it can act on.
type Tool interface {
	Def() Def
	Call(ctx context.Context, args json.RawMessage) (Result, error)
}

// MaxNameBytes bounds a tool's name (the limit OpenAI-compatible servers put
// on function names).
const MaxNameBytes = 64

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// objectSchema is the schema of a tool that declares none.
var objectSchema = json.RawMessage(`{"type":"object"}`)

// Set is an engine's tools by name, with their compiled schemas. It is
// immutable and safe for concurrent use.
type Set struct {
	byName map[string]*entry
	order  []string // names, in the order given
}

type entry struct {
	tool   Tool
	def    Def
	schema *jsonschema.Resolved
}

// NewSet checks the tools' definitions (names valid and unique, schemas
// valid and of objects) and returns them as a Set.
func NewSet(tools ...Tool) (*Set, error) {
	s := &Set{byName: make(map[string]*entry, len(tools))}
	var errs []error
	for _, t := range tools {
		d := t.Def()
		if !namePattern.MatchString(d.Name) {
			errs = append(errs, fmt.Errorf("tool: name %q must match %s", d.Name, namePattern))
			continue
		}
		if _, dup := s.byName[d.Name]; dup || IsBuiltin(d.Name) {
			errs = append(errs, fmt.Errorf("tool: %s is defined twice (or is one of the runtime's own tools)", d.Name))
			continue
		}
		if len(d.Schema) == 0 {
			d.Schema = objectSchema
		}
		if d.Risk == "" {
			d.Risk = RiskLow
		}
		rs, err := compile(d.Schema)
		if err != nil {
			errs = append(errs, fmt.Errorf("tool: %s: %w", d.Name, err))
			continue
		}
		s.byName[d.Name] = &entry{tool: t, def: d, schema: rs}
		s.order = append(s.order, d.Name)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// compile resolves a schema, which must describe an object.
func compile(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var sc jsonschema.Schema
	if err := json.Unmarshal(raw, &sc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if sc.Type != "object" && !slices.Contains(sc.Types, "object") {
		return nil, errors.New(`schema: must describe a JSON object ("type": "object")`)
	}
	rs, err := sc.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return rs, nil
}

// Lookup returns the tool called name.
func (s *Set) Lookup(name string) (Tool, Def, bool) {
	if s == nil {
		return nil, Def{}, false
	}
	e := s.byName[name]
	if e == nil {
		return nil, Def{}, false
	}
	return e.tool, e.def, true
}

// Names lists the tools, in the order they were given.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.order)
}

// Defs returns the definitions of the named tools for a model request:
// tools of the set and runtime tools, in the order named; unknown names
// are left out.
func (s *Set) Defs(names []string) []model.ToolDef {
	out := make([]model.ToolDef, 0, len(names))
	for _, n := range names {
		if e := s.entry(n); e != nil {
			out = append(out, e.def.Model())
		} else if d, ok := builtins[n]; ok {
			out = append(out, d.Model())
		}
	}
	return out
}

// All returns the definitions of every tool a plan may give its nodes:
// the set's, then the runtime's own.
func (s *Set) All() []model.ToolDef { return s.Defs(s.AllNames()) }

// AllNames lists the names of the set's tools, then the runtime's own.
func (s *Set) AllNames() []string {
	names := s.Names()
	for _, d := range Builtins {
		names = append(names, d.Name)
	}
	return names
}

// Has reports whether name is a tool of the set or a runtime tool.
func (s *Set) Has(name string) bool { return s.entry(name) != nil || IsBuiltin(name) }

func (s *Set) entry(name string) *entry {
	if s == nil {
		return nil
	}
	return s.byName[name]
}

// ErrInvalidArgs marks a call whose arguments do not match the tool's
// schema; the model gets the error and can fix its call.
var ErrInvalidArgs = errors.New("invalid arguments")

// Validate checks a call's arguments against the schema of tool name (a
// tool of the set or a runtime tool).
func (s *Set) Validate(name string, args json.RawMessage) error {
	var rs *jsonschema.Resolved
	if e := s.entry(name); e != nil {
		rs = e.schema
	} else if b := builtinSchemas[name]; b != nil {
		rs = b
	} else {
		return fmt.Errorf("unknown tool %q", name)
	}
	return validate(rs, name, args)
}

func validate(rs *jsonschema.Resolved, name string, args json.RawMessage) error {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return fmt.Errorf("%w for %s: not JSON: %v", ErrInvalidArgs, name, err)
	}
	if err := rs.Validate(v); err != nil {
		return fmt.Errorf("%w for %s: %v", ErrInvalidArgs, name, err)
	}
	return nil
}
