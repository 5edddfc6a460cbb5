package openai

import "encoding/json"

// The JSON Schemas of the director's plan (messages.Plan) and the steerer's
// graph diff (messages.GraphDiff), sent as response_format json_schema.
//
// They are written by hand: a plan node may hold a nested plan (a team),
// and github.com/google/jsonschema-go's For refuses recursive types. A test
// keeps them in step with the Go types (every JSON field of the structs is
// a property, and the scripted model's plans and diffs validate).
//
// Strict mode is off: OpenAI's strict mode needs every property required,
// and most of these are optional.
var (
	planSchema = json.RawMessage(`{
  "type": "object",
  "properties": {"nodes": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/node"}}},
  "required": ["nodes"],
  "additionalProperties": false,
  "$defs": {
    "node": {
      "type": "object",
      "properties": {
        "id": {"type": "string", "minLength": 1},
        "goal": {"type": "string", "minLength": 1},
        "deps": {"type": "array", "items": {"type": "string"}},
        "tools": {"type": "array", "items": {"type": "string"}},
        "kind": {"type": "string", "enum": ["leaf", "team", "debate"]},
        "role": {"type": "string"},
        "agent": {"type": "string", "minLength": 1},
        "team": {"$ref": "#"},
        "debate": {"$ref": "#/$defs/debate"}
      },
      "required": ["id", "goal"],
      "additionalProperties": false
    },
    "debate": {
      "type": "object",
      "properties": {
        "agents": {"type": "array", "minItems": 2, "items": {
          "type": "object",
          "properties": {"id": {"type": "string", "minLength": 1}, "persona": {"type": "string"}},
          "required": ["id"],
          "additionalProperties": false
        }},
        "rounds": {"type": "integer", "minimum": 1},
        "judge": {"type": "boolean"},
        "min_rounds": {"type": "integer", "minimum": 0},
        "compact_after": {"type": "integer", "minimum": 0}
      },
      "required": ["agents", "rounds"],
      "additionalProperties": false
    }
  }
}`)

	diffSchema = json.RawMessage(`{
  "type": "object",
  "properties": {"ops": {"type": "array", "items": {
    "type": "object",
    "properties": {
      "op": {"type": "string", "enum": ["add_node", "remove_node", "split_node", "reroute_edge", "set_role", "set_tools", "wrap_in_team"]},
      "node": {"$ref": "#/$defs/node"},
      "node_id": {"type": "string"},
      "into": {"type": "array", "items": {"$ref": "#/$defs/node"}},
      "from": {"type": "string"},
      "to": {"type": "string"},
      "new_from": {"type": "string"},
      "role": {"type": "string"},
      "tools": {"type": "array", "items": {"type": "string"}},
      "node_ids": {"type": "array", "items": {"type": "string"}},
      "team_id": {"type": "string"},
      "goal": {"type": "string"}
    },
    "required": ["op"],
    "additionalProperties": false
  }}},
  "required": ["ops"],
  "additionalProperties": false,
  "$defs": {
    "node": {
      "type": "object",
      "properties": {
        "id": {"type": "string", "minLength": 1},
        "goal": {"type": "string", "minLength": 1},
        "deps": {"type": "array", "items": {"type": "string"}},
        "tools": {"type": "array", "items": {"type": "string"}},
        "kind": {"type": "string", "enum": ["leaf"]},
        "role": {"type": "string"}
      },
      "required": ["id", "goal"],
      "additionalProperties": false
    }
  }
}`)
)

// Schema names of the response formats; an OpenAI-compatible server sees
// them as response_format.json_schema.name.
const (
	PlanSchemaName = "conclave_plan"
	DiffSchemaName = "conclave_graph_diff"
)

// PlanSchema returns the JSON Schema of the director's plan.
func PlanSchema() json.RawMessage { return append(json.RawMessage(nil), planSchema...) }

// DiffSchema returns the JSON Schema of the steerer's graph diff.
func DiffSchema() json.RawMessage { return append(json.RawMessage(nil), diffSchema...) }
