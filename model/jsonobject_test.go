package model_test

import (
	"testing"

	"github.com/conclave-ai/conclave/model"
)

func TestJSONObject(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"nodes":[]}`, `{"nodes":[]}`},
		{"```json\n{\"nodes\":[{\"id\":\"a\"}]}\n```", `{"nodes":[{"id":"a"}]}`},
		{"Here is the plan:\n{\"nodes\":[]}\nHope it helps.", `{"nodes":[]}`},
		{`{"goal":"a } and a { in text, \"quoted\" too","x":{"y":1}} trailing {}`, `{"goal":"a } and a { in text, \"quoted\" too","x":{"y":1}}`},
		{`{"goal":"ends with a backslash \\"} rest`, `{"goal":"ends with a backslash \\"}`},
		{"no json here", "no json here"},
		{`prose {"unclosed": [1, 2`, `{"unclosed": [1, 2`},
	} {
		if got := model.JSONObject(tc.in); got != tc.want {
			t.Errorf("JSONObject(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
