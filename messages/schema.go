package messages

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"
)

// SchemaID is the $id of the event catalogue's JSON Schema.
const SchemaID = "https://github.com/conclave-ai/conclave/docs/schema/events.schema.json"

// EventSchema returns the JSON Schema (draft 2020-12) of an event envelope:
// the envelope's fields, and for each event type (the "type" property) the
// schema of its payload, under $defs by payload type name. It is generated
// from the Go types of this package, the one source of truth: the
// committed docs/schema/events.schema.json is this document (a test keeps
// them in step), and every event the test suite produces validates against
// it (testkit.ValidateSchema).
//
// Each call builds a new document; the caller may change it.
func EventSchema() (*jsonschema.Schema, error) {
	// Plan and PlanNode are recursive (a team node holds a plan): each is
	// defined once under $defs and referred to elsewhere.
	planRef := &jsonschema.Schema{Type: "object", Ref: "#/$defs/Plan"}
	nodeRef := &jsonschema.Schema{Type: "object", Ref: "#/$defs/PlanNode"}
	with := func(t reflect.Type, s *jsonschema.Schema) *jsonschema.ForOptions {
		o := schemaOverrides()
		o[t] = s
		return &jsonschema.ForOptions{TypeSchemas: o}
	}
	opts := with(reflect.TypeFor[Plan](), planRef)
	root := &jsonschema.Schema{
		Schema:      "https://json-schema.org/draft/2020-12/schema",
		ID:          SchemaID,
		Title:       "Conclave event envelope",
		Description: "One event of a session's stream, as every wire carries it (SSE data, WebSocket message, journal export). See docs/events.md.",
		Type:        "object",
		Defs:        map[string]*jsonschema.Schema{},
	}
	lane, err := jsonschema.For[Lane](opts)
	if err != nil {
		return nil, fmt.Errorf("messages: schema of Lane: %w", err)
	}
	root.Defs["Lane"] = lane
	if root.Defs["Plan"], err = jsonschema.For[Plan](with(reflect.TypeFor[PlanNode](), nodeRef)); err != nil {
		return nil, fmt.Errorf("messages: schema of Plan: %w", err)
	}
	if root.Defs["PlanNode"], err = jsonschema.For[PlanNode](opts); err != nil {
		return nil, fmt.Errorf("messages: schema of PlanNode: %w", err)
	}
	types := EventTypes()
	names := make([]any, len(types))
	for i, t := range types {
		names[i] = string(t)
	}
	root.Properties = map[string]*jsonschema.Schema{
		"id":             {Type: "string", Format: "uuid", Description: "Unique id of the event."},
		"seq":            {Type: "integer", Minimum: ptr(1.0), Description: "The event's number in its session: 1, 2, 3, … with no gap."},
		"type":           {Type: "string", Enum: names, Description: "The event type; it says which payload follows."},
		"timestamp":      {Type: "string", Format: "date-time", Description: "When the session's hub stamped the event (RFC 3339, UTC)."},
		"session_id":     {Type: "string"},
		"run_id":         {Type: "string"},
		"agent_id":       {Type: "string"},
		"correlation_id": {Type: "string", Description: "The id of the request whose work the event is: the X-Request-Id (or generated id) of the request that started the run. Absent on events of no run."},
		"lane":           {Ref: "#/$defs/Lane"},
		"payload":        {Type: "object"},
	}
	root.PropertyOrder = []string{"id", "seq", "type", "timestamp", "session_id", "run_id", "agent_id", "correlation_id", "lane", "payload"}
	root.Required = []string{"id", "seq", "type", "timestamp", "session_id", "run_id", "agent_id", "lane", "payload"}
	root.AdditionalProperties = falseSchema()
	for _, t := range types {
		p, _ := t.NewPayload()
		rt := reflect.TypeOf(p).Elem()
		s, err := jsonschema.ForType(rt, opts)
		if err != nil {
			return nil, fmt.Errorf("messages: schema of %s: %w", rt.Name(), err)
		}
		s.Description = t.Doc()
		root.Defs[rt.Name()] = s
		root.AllOf = append(root.AllOf, &jsonschema.Schema{
			If:   &jsonschema.Schema{Properties: map[string]*jsonschema.Schema{"type": {Const: jsonValue(string(t))}}},
			Then: &jsonschema.Schema{Properties: map[string]*jsonschema.Schema{"payload": {Ref: "#/$defs/" + rt.Name()}}},
		})
	}
	return root, nil
}

// schemaOverrides: the types whose JSON is not what their Go shape says
// (custom marshalers, and uuid.UUID, an array of 16 bytes written as a
// string).
func schemaOverrides() map[reflect.Type]*jsonschema.Schema {
	modes := []any{}
	for _, m := range []HITLMode{HITLNone, HITLPlan, HITLNode, HITLTools} {
		modes = append(modes, string(m))
	}
	return map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[uuid.UUID]():       {Type: "string", Format: "uuid"},
		reflect.TypeFor[json.RawMessage](): {Description: "Any JSON value."},
		reflect.TypeFor[[]byte]():          {Types: []string{"null", "string"}, ContentEncoding: "base64"},
		reflect.TypeFor[HITLMode]():        {Type: "string", Enum: modes},
		reflect.TypeFor[NodeSelector](): {
			Description: "Node ids, or a fraction of the nodes in [0, 1].",
			OneOf: []*jsonschema.Schema{
				{Type: "array", Items: &jsonschema.Schema{Type: "string"}},
				{Type: "number", Minimum: ptr(0.0), Maximum: ptr(1.0)},
			},
		},
	}
}

// perType holds, for each event type, the envelope schema with that type's
// payload in place of the if/then branches: one branch to check instead of
// every one (a whole-document validation costs about 50 times more).
var perType = sync.OnceValues(func() (map[EventType]*jsonschema.Resolved, error) {
	out := map[EventType]*jsonschema.Resolved{}
	for _, t := range EventTypes() {
		s, err := EventSchema()
		if err != nil {
			return nil, err
		}
		p, _ := t.NewPayload()
		name := reflect.TypeOf(p).Elem().Name()
		s.AllOf = nil
		s.Properties["type"] = &jsonschema.Schema{Const: jsonValue(string(t))}
		s.Properties["payload"] = &jsonschema.Schema{Ref: "#/$defs/" + name}
		s.Defs = map[string]*jsonschema.Schema{name: s.Defs[name], "Lane": s.Defs["Lane"], "Plan": s.Defs["Plan"], "PlanNode": s.Defs["PlanNode"]}
		if out[t], err = s.Resolve(nil); err != nil {
			return nil, fmt.Errorf("messages: resolve the schema of %s: %w", t, err)
		}
	}
	return out, nil
})

// ValidateEventJSON validates one envelope, as JSON, against EventSchema.
func ValidateEventJSON(b []byte) error {
	schemas, err := perType()
	if err != nil {
		return err
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("messages: event is not a JSON object: %w", err)
	}
	typ, _ := v["type"].(string)
	rs := schemas[EventType(typ)]
	if rs == nil {
		return &UnknownEventTypeError{Type: typ}
	}
	return rs.Validate(v)
}

func ptr[T any](v T) *T { return &v }

func jsonValue(v any) *any { return &v }

func falseSchema() *jsonschema.Schema { return &jsonschema.Schema{Not: &jsonschema.Schema{}} }
