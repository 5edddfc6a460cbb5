package tool_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/tool"
)

func TestSet_DisplayName(t *testing.T) {
	t.Parallel()
	named := tool.Def{Name: "web", Description: "d", DisplayName: "Web search"}
	set, err := tool.NewSet(rawTool{def: named}, rawTool{def: tool.Def{Name: "everything.echo", Description: "d"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"web":                    "Web search",
		"everything.echo":        "everything: echo",
		model.ToolStartAsyncTask: "Start async task",
		"search":                 "Search", // not in the set: still a name for people
	} {
		if got := set.DisplayName(name); got != want {
			t.Errorf("DisplayName(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestSummarizeArgs(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 100)
	for _, tc := range []struct{ args, want string }{
		{`{"query":"why is the sky blue?"}`, "query=why is the sky blue?"},
		{`{"b":2,"a":"x\n  y","c":{"d":[1, 2]}}`, `a=x y, b=2, c={"d":[1,2]}`},
		{`{}`, ""},
		{`[1, 2]`, "[1,2]"},
		{`not json`, "not json"},
	} {
		if got := tool.SummarizeArgs(json.RawMessage(tc.args)); got != tc.want {
			t.Errorf("SummarizeArgs(%s) = %q, want %q", tc.args, got, tc.want)
		}
	}
	got := tool.SummarizeArgs(json.RawMessage(`{"text":"` + long + `"}`))
	if n := utf8.RuneCountInString(got); n != 120 || !strings.HasSuffix(got, "…") {
		t.Errorf("a long summary has %d runes: %q", n, got)
	}
}
