package messages

import (
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// Health answers GET /healthz: {"status":"ok"} while the process serves,
// 503 {"status":"shutting_down"} once it is shutting down.
type Health struct {
	Status string `json:"status"`
}

// AbortBody is the optional body of POST /api/v1/runs/{id}/abort.
type AbortBody struct {
	Reason string `json:"reason,omitempty"`
}

// APISchemaRef is where docs/openapi.yaml keeps the schemas of APISchemas:
// a schema that refers to another one of them names it as APISchemaRef+name.
const APISchemaRef = "#/components/schemas/"

// apiBodies are the bodies of the HTTP API (docs/api.md), by the name
// docs/openapi.yaml gives them: requests and answers. Plan and PlanNode
// are added by APISchemas (they are recursive, so referred to by name).
var apiBodies = []struct {
	name string
	typ  reflect.Type
}{
	{"StartRun", reflect.TypeFor[StartRun]()},
	{"RunCreated", reflect.TypeFor[RunCreated]()},
	{"RunList", reflect.TypeFor[RunList]()},
	{"RunSummary", reflect.TypeFor[RunSummary]()},
	{"AbortBody", reflect.TypeFor[AbortBody]()},
	{"SteerNote", reflect.TypeFor[SteerNote]()},
	{"SteerAccepted", reflect.TypeFor[SteerAccepted]()},
	{"Rewind", reflect.TypeFor[Rewind]()},
	{"Resume", reflect.TypeFor[Resume]()},
	{"Resumed", reflect.TypeFor[Resumed]()},
	{"Interrupt", reflect.TypeFor[Interrupt]()},
	{"InterruptList", reflect.TypeFor[InterruptList]()},
	{"AuditPage", reflect.TypeFor[AuditPage]()},
	{"ToolList", reflect.TypeFor[ToolList]()},
	{"Health", reflect.TypeFor[Health]()},
	{"Readiness", reflect.TypeFor[Readiness]()},
	{"ErrorBody", reflect.TypeFor[ErrorBody]()},
	{"WSClientMessage", reflect.TypeFor[WSClientMessage]()},
	{"WSReply", reflect.TypeFor[WSReply]()},
}

// APISchemas returns the JSON Schemas (draft 2020-12, as OpenAPI 3.1 uses
// them) of the HTTP API's request and answer bodies, by name, generated
// from the Go types of this package like EventSchema. They are the
// components.schemas of docs/openapi.yaml (a test keeps the file in step),
// and refer to each other as APISchemaRef+name. Every struct is closed
// (additionalProperties false): requests because the server refuses
// unknown fields, answers so that a field added to a Go type and not to
// the contract fails the contract test.
//
// Each call builds new schemas; the caller may change them.
func APISchemas() (map[string]*jsonschema.Schema, error) {
	planRef := &jsonschema.Schema{Type: "object", Ref: APISchemaRef + "Plan"}
	nodeRef := &jsonschema.Schema{Type: "object", Ref: APISchemaRef + "PlanNode"}
	with := func(t reflect.Type, s *jsonschema.Schema) *jsonschema.ForOptions {
		o := schemaOverrides()
		o[t] = s
		return &jsonschema.ForOptions{TypeSchemas: o}
	}
	opts := with(reflect.TypeFor[Plan](), planRef)
	out := map[string]*jsonschema.Schema{}
	var err error
	if out["Plan"], err = jsonschema.For[Plan](with(reflect.TypeFor[PlanNode](), nodeRef)); err != nil {
		return nil, fmt.Errorf("messages: schema of Plan: %w", err)
	}
	if out["PlanNode"], err = jsonschema.For[PlanNode](opts); err != nil {
		return nil, fmt.Errorf("messages: schema of PlanNode: %w", err)
	}
	for _, b := range apiBodies {
		s, err := jsonschema.ForType(b.typ, opts)
		if err != nil {
			return nil, fmt.Errorf("messages: schema of %s: %w", b.name, err)
		}
		out[b.name] = s
	}
	return out, nil
}
