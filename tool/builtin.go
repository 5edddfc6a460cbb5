package tool

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/conclave-ai/conclave/model"
)

// Builtins are the runtime's own tools: agents run them (a sub-agent, a
// human's answer, a sub-team), so they have definitions but no Call.
// Their arguments are validated against these schemas like any tool's.
var Builtins = []Def{
	{Name: model.ToolDelegate, Description: "Hand a task to a sub-agent and wait for its answer, which is this call's result.",
		Schema: obj(`"task": {"type": "string", "minLength": 1, "description": "what the sub-agent must do"}, "agent": {"type": "string", "minLength": 1, "description": "optional: a remote A2A agent the operator registered, which takes the task instead of a sub-agent"}`, "task")},
	{Name: model.ToolAskHuman, Description: "Ask a human a question; the answer is this call's result.",
		Schema: obj(`"question": {"type": "string", "minLength": 1}, "context": {"type": "string", "description": "what the human needs to know to answer"}`, "question")},
	{Name: model.ToolAskChoice, Description: "Ask a human to choose among 2 to 10 options (one, or several when multiple is true); the chosen option ids are this call's result.",
		Schema: obj(`"question": {"type": "string", "minLength": 1}, "context": {"type": "string", "description": "what the human needs to know to choose"}, `+
			`"options": {"type": "array", "minItems": 2, "maxItems": 10, "items": {"type": "object", "properties": {"id": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9._-]+$"}, `+
			`"label": {"type": "string", "minLength": 1, "maxLength": 200}, "description": {"type": "string", "maxLength": 1000}}, "required": ["id", "label"], "additionalProperties": false}}, `+
			`"multiple": {"type": "boolean", "description": "several options may be chosen"}`, "question", "options")},
	{Name: model.ToolConsultAdvisor, Description: "Ask the run's advisor for advice on your task (only when the run's advisor is in consult mode; a few times per agent); the advice is this call's result.",
		Schema: obj(`"question": {"type": "string", "minLength": 1, "maxLength": 4000, "description": "what you want advice on"}`, "question")},
	{Name: model.ToolSpawnSubteam, Description: "Ask for a sub-team of specialists on a goal; it runs after this wave, if approved, and the nodes that depend on you see its output.",
		Schema: obj(`"goal": {"type": "string", "minLength": 1}, "roles": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 16}`, "goal")},
	{Name: model.ToolStartAsyncTask, Description: "Start a sub-agent on a task and go on working; returns its task_id.",
		Schema: obj(`"task": {"type": "string", "minLength": 1}`, "task")},
	{Name: model.ToolCheckAsyncTask, Description: "Get an async task's status, and its output once done.",
		Schema: obj(`"task_id": {"type": "string", "minLength": 1}`, "task_id")},
	{Name: model.ToolUpdateAsyncTask, Description: "Give a running async task more context.",
		Schema: obj(`"task_id": {"type": "string", "minLength": 1}, "context": {"type": "string", "minLength": 1}`, "task_id", "context")},
	{Name: model.ToolCancelAsyncTask, Description: "Cancel an async task.",
		Schema: obj(`"task_id": {"type": "string", "minLength": 1}`, "task_id")},
	{Name: model.ToolListAsyncTasks, Description: "List your async tasks and their status.",
		Schema: obj(``)},
}

var (
	builtins       = map[string]Def{}
	builtinSchemas = map[string]*jsonschema.Resolved{}
)

func init() {
	for _, d := range Builtins {
		rs, err := compile(d.Schema)
		if err != nil {
			panic(fmt.Sprintf("tool: builtin %s: %v", d.Name, err)) // a programming error, caught by any test
		}
		d.Risk = RiskLow
		builtins[d.Name], builtinSchemas[d.Name] = d, rs
	}
}

// IsBuiltin reports whether name is one of the runtime's own tools.
func IsBuiltin(name string) bool { _, ok := builtins[name]; return ok }

// Builtin returns the definition of the runtime's own tool name.
func Builtin(name string) (Def, bool) { d, ok := builtins[name]; return d, ok }

// obj is an object schema with the given properties (JSON members) and
// required names; additional properties are refused.
func obj(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	if len(required) == 0 {
		req = []byte("[]")
	}
	return json.RawMessage(`{"type": "object", "properties": {` + props + `}, "required": ` + string(req) + `, "additionalProperties": false}`)
}
