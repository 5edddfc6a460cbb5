package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/tool"
)

type weatherArgs struct {
	City  string `json:"city" jsonschema:"the city to look up"`
	Units string `json:"units,omitempty"`
}

func TestFunc_SchemaValidationAndCall(t *testing.T) {
	t.Parallel()
	w, err := tool.Func("weather", "Current weather", func(_ context.Context, in weatherArgs) (map[string]string, error) {
		return map[string]string{"city": in.City, "sky": "clear"}, nil
	}, tool.WithRisk(tool.RiskMedium))
	if err != nil {
		t.Fatal(err)
	}
	set, err := tool.NewSet(w)
	if err != nil {
		t.Fatal(err)
	}
	_, def, ok := set.Lookup("weather")
	if !ok || def.Risk != tool.RiskMedium || !strings.Contains(string(def.Schema), `"city"`) || !strings.Contains(string(def.Schema), "the city to look up") {
		t.Fatalf("def %+v", def)
	}
	if err := set.Validate("weather", json.RawMessage(`{"city":"Oslo"}`)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"units":"C"}`, `{"city":3}`, `{"city":"x","extra":1}`, `[1]`, `nope`} {
		if err := set.Validate("weather", json.RawMessage(bad)); !errors.Is(err, tool.ErrInvalidArgs) {
			t.Errorf("args %s: error %v, want ErrInvalidArgs", bad, err)
		}
	}
	res, err := w.Call(context.Background(), json.RawMessage(`{"city":"Oslo"}`))
	if err != nil || res.Content != `{"city":"Oslo","sky":"clear"}` {
		t.Fatalf("call: %+v %v", res, err)
	}
	defs := set.Defs([]string{"weather", model.ToolDelegate, "unknown"})
	if len(defs) != 2 || defs[0].Name != "weather" || defs[1].Name != model.ToolDelegate || len(defs[1].Schema) == 0 {
		t.Fatalf("defs %+v", defs)
	}
}

func TestBuiltins_Validate(t *testing.T) {
	t.Parallel()
	var set *tool.Set // builtins need no set
	if err := set.Validate(model.ToolDelegate, json.RawMessage(`{"task":"dig"}`)); err != nil {
		t.Fatal(err)
	}
	if err := set.Validate(model.ToolDelegate, json.RawMessage(`{"task":""}`)); !errors.Is(err, tool.ErrInvalidArgs) {
		t.Fatalf("empty task: %v", err)
	}
	if err := set.Validate(model.ToolListAsyncTasks, nil); err != nil {
		t.Fatalf("no args: %v", err)
	}
	if err := set.Validate("nope", nil); err == nil {
		t.Fatal("unknown tool validated")
	}
}

type rawTool struct{ def tool.Def }

func (r rawTool) Def() tool.Def { return r.def }
func (rawTool) Call(context.Context, json.RawMessage) (tool.Result, error) {
	return tool.Result{}, nil
}

func TestNewSet_Refuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		def  tool.Def
		says string
	}{
		{tool.Def{Name: "has space"}, "must match"},
		{tool.Def{Name: model.ToolDelegate}, "defined twice"},
		{tool.Def{Name: "x", Schema: json.RawMessage(`{"type":"string"}`)}, "must describe a JSON object"},
		{tool.Def{Name: "y", Schema: json.RawMessage(`{"type":`)}, "schema"},
	} {
		if _, err := tool.NewSet(rawTool{tc.def}); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: error %v, want %q", tc.def, err, tc.says)
		}
	}
	if _, err := tool.NewSet(rawTool{tool.Def{Name: "a"}}, rawTool{tool.Def{Name: "a"}}); err == nil {
		t.Error("duplicate names accepted")
	}
}
