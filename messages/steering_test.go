package messages_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
)

func TestGraphDiff_Validate(t *testing.T) {
	t.Parallel()
	node := &messages.PlanNode{ID: "n", Goal: "g"}
	long := strings.Repeat("x", messages.MaxDiffIDLen+1)
	longText := strings.Repeat("x", messages.MaxDiffTextLen+1)
	ops := func(ops ...messages.DiffOp) messages.GraphDiff { return messages.GraphDiff{Ops: ops} }
	many := make([]messages.DiffOp, messages.MaxDiffOps+1)
	for i := range many {
		many[i] = messages.DiffOp{Op: messages.OpRemoveNode, NodeID: "a"}
	}
	tests := []struct {
		name string
		diff messages.GraphDiff
		want string // substring of the error; "" = valid
	}{
		{"add_node", ops(messages.DiffOp{Op: messages.OpAddNode, Node: node}), ""},
		{"remove_node", ops(messages.DiffOp{Op: messages.OpRemoveNode, NodeID: "a"}), ""},
		{"split_node", ops(messages.DiffOp{Op: messages.OpSplitNode, NodeID: "a", Into: []messages.PlanNode{*node, {ID: "m"}}}), ""},
		{"reroute_edge", ops(messages.DiffOp{Op: messages.OpRerouteEdge, From: "a", To: "b", NewFrom: "c"}), ""},
		{"set_role", ops(messages.DiffOp{Op: messages.OpSetRole, NodeID: "a", Role: "critic"}), ""},
		{"set_tools", ops(messages.DiffOp{Op: messages.OpSetTools, NodeID: "a", Tools: []string{"search"}}), ""},
		{"set_tools clears", ops(messages.DiffOp{Op: messages.OpSetTools, NodeID: "a"}), ""},
		{"wrap_in_team", ops(messages.DiffOp{Op: messages.OpWrapInTeam, NodeIDs: []string{"a", "b"}, TeamID: "t", Goal: "g"}), ""},
		{"max ops", messages.GraphDiff{Ops: many[:messages.MaxDiffOps]}, ""},

		{"no ops", messages.GraphDiff{}, "no operations"},
		{"too many ops", messages.GraphDiff{Ops: many}, "65 operations, more than 64"},
		{"unknown op", ops(messages.DiffOp{Op: "rename_node", NodeID: "a"}), `ops[0]: unknown operation "rename_node"`},
		{"empty op", ops(messages.DiffOp{NodeID: "a"}), `ops[0]: unknown operation ""`},
		{"add without node", ops(messages.DiffOp{Op: messages.OpAddNode}), "ops[0] (add_node): node is required"},
		{"add node without id", ops(messages.DiffOp{Op: messages.OpAddNode, Node: &messages.PlanNode{Goal: "g"}}), "node has an empty id"},
		{"add with node_id", ops(messages.DiffOp{Op: messages.OpAddNode, Node: node, NodeID: "n"}), "node_id does not belong to add_node"},
		{"remove without id", ops(messages.DiffOp{Op: messages.OpRemoveNode}), "node_id is required"},
		{"remove with tools", ops(messages.DiffOp{Op: messages.OpRemoveNode, NodeID: "a", Tools: []string{"x"}}), "tools does not belong to remove_node"},
		{"split without into", ops(messages.DiffOp{Op: messages.OpSplitNode, NodeID: "a"}), "into is required"},
		{"split into one", ops(messages.DiffOp{Op: messages.OpSplitNode, NodeID: "a", Into: []messages.PlanNode{*node}}), "into needs at least 2 nodes"},
		{"split into no id", ops(messages.DiffOp{Op: messages.OpSplitNode, NodeID: "a", Into: []messages.PlanNode{*node, {}}}), "into[1] has an empty id"},
		{"reroute without new_from", ops(messages.DiffOp{Op: messages.OpRerouteEdge, From: "a", To: "b"}), "new_from is required"},
		{"reroute with role", ops(messages.DiffOp{Op: messages.OpRerouteEdge, From: "a", To: "b", NewFrom: "c", Role: "r"}), "role does not belong"},
		{"set_role without role", ops(messages.DiffOp{Op: messages.OpSetRole, NodeID: "a"}), "role is required"},
		{"set_tools with goal", ops(messages.DiffOp{Op: messages.OpSetTools, NodeID: "a", Goal: "g"}), "goal does not belong to set_tools"},
		{"wrap without goal", ops(messages.DiffOp{Op: messages.OpWrapInTeam, NodeIDs: []string{"a"}, TeamID: "t"}), "goal is required"},
		{"wrap without ids", ops(messages.DiffOp{Op: messages.OpWrapInTeam, TeamID: "t", Goal: "g"}), "node_ids is required"},
		{"wrap twice the same", ops(messages.DiffOp{Op: messages.OpWrapInTeam, NodeIDs: []string{"a", "a"}, TeamID: "t", Goal: "g"}), `node_ids lists "a" twice`},
		{"wrap empty id", ops(messages.DiffOp{Op: messages.OpWrapInTeam, NodeIDs: []string{""}, TeamID: "t", Goal: "g"}), "node_ids has an empty id"},
		{"long node_id", ops(messages.DiffOp{Op: messages.OpRemoveNode, NodeID: long}), "node_id"},
		{"long dep", ops(messages.DiffOp{Op: messages.OpAddNode, Node: &messages.PlanNode{ID: "n", Deps: []string{long}}}), "node dependency"},
		{"long tool", ops(messages.DiffOp{Op: messages.OpSetTools, NodeID: "a", Tools: []string{long}}), "tool"},
		{"long team id", ops(messages.DiffOp{Op: messages.OpWrapInTeam, NodeIDs: []string{"a"}, TeamID: long, Goal: "g"}), "team_id"},
		{"long goal", ops(messages.DiffOp{Op: messages.OpWrapInTeam, NodeIDs: []string{"a"}, TeamID: "t", Goal: longText}), "goal is longer than 16384 bytes"},
		{"long node goal", ops(messages.DiffOp{Op: messages.OpAddNode, Node: &messages.PlanNode{ID: "n", Goal: longText}}), "node goal is longer"},
		{"long role", ops(messages.DiffOp{Op: messages.OpSetRole, NodeID: "a", Role: longText}), "role is longer"},
		{"id at the limit", ops(messages.DiffOp{Op: messages.OpRemoveNode, NodeID: long[1:]}), ""},
		{"second op reported", ops(messages.DiffOp{Op: messages.OpRemoveNode, NodeID: "a"}, messages.DiffOp{Op: messages.OpRemoveNode}), "ops[1] (remove_node): node_id is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.diff.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, messages.ErrInvalidGraphDiff) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want ErrInvalidGraphDiff containing %q", err, tt.want)
			}
		})
	}
}

func TestGraphDiff_ValidateReportsAll(t *testing.T) {
	t.Parallel()
	err := messages.GraphDiff{Ops: []messages.DiffOp{
		{Op: messages.OpRemoveNode, Role: "r"},
		{Op: "nope"},
	}}.Validate()
	for _, want := range []string{"ops[0] (remove_node): node_id is required", "ops[0] (remove_node): role does not belong", `ops[1]: unknown operation "nope"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to contain %q", err, want)
		}
	}
}

func TestDecodeGraphDiff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string // substring of the error; "" = valid
	}{
		{"remove", `{"ops":[{"op":"remove_node","node_id":"a"}]}`, ""},
		{"whitespace after", "{\"ops\":[{\"op\":\"remove_node\",\"node_id\":\"a\"}]}\n\t ", ""},
		{"add team node", `{"ops":[{"op":"add_node","node":{"id":"t","goal":"g","deps":["a"],"kind":"team","team":{"nodes":[{"id":"x","goal":"g"}]}}}]}`, ""},
		{"empty", ``, "messages: decode graph diff: messages: empty input"},
		{"invalid utf-8", "{\"ops\":[{\"op\":\"remove_node\",\"node_id\":\"a\xff\"}]}", "invalid UTF-8 at byte 40"},
		{"null", `null`, "no operations"},
		{"no ops", `{"ops":[]}`, "no operations"},
		{"not an object", `[]`, "messages: decode graph diff"},
		{"unknown field", `{"ops":[{"op":"remove_node","node_id":"a","force":true}]}`, `unknown field "force"`},
		{"unknown top field", `{"ops":[{"op":"remove_node","node_id":"a"}],"why":"x"}`, `unknown field "why"`},
		{"unknown node field", `{"ops":[{"op":"add_node","node":{"id":"a","colour":"red"}}]}`, `unknown field "colour"`},
		{"trailing object", `{"ops":[{"op":"remove_node","node_id":"a"}]} {}`, "unexpected data after the JSON value"},
		{"trailing brace", `{"ops":[{"op":"remove_node","node_id":"a"}]}}`, "unexpected data after the JSON value"},
		{"trailing junk", `{"ops":[{"op":"remove_node","node_id":"a"}]}x`, "unexpected data after the JSON value"},
		{"wrong type", `{"ops":[{"op":"remove_node","node_id":7}]}`, "messages: decode graph diff"},
		{"invalid op", `{"ops":[{"op":"remove_node","node_id":"a","goal":"g"}]}`, "goal does not belong to remove_node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := messages.DecodeGraphDiff(strings.NewReader(tt.in))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("DecodeGraphDiff = %v, want nil", err)
				}
				if len(d.Ops) == 0 {
					t.Fatal("DecodeGraphDiff returned no ops")
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), "messages: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("DecodeGraphDiff = %v, want an error containing %q", err, tt.want)
			}
			if d.Ops != nil {
				t.Fatalf("DecodeGraphDiff returned %+v with its error", d)
			}
		})
	}
}

// FuzzDecodeGraphDiff: DecodeGraphDiff never panics, and a diff it accepts
// re-encodes to JSON it accepts again, with the same encoding (the values
// may differ only where omitempty does not tell nil from empty).
func FuzzDecodeGraphDiff(f *testing.F) {
	for _, seed := range []string{
		`{"ops":[{"op":"remove_node","node_id":"a"}]}`,
		`{"ops":[{"op":"set_tools","node_id":"a","tools":[]}]}`,
		`{"ops":[{"op":"add_node","node":{"id":"d","goal":"g","kind":"debate","debate":{"agents":[{"id":"a0"},{"id":"a1","persona":"skeptic"}],"rounds":2,"judge":true}}}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := messages.DecodeGraphDiff(bytes.NewReader(data))
		if err != nil {
			if d.Ops != nil {
				t.Fatalf("DecodeGraphDiff returned ops with error %v", err)
			}
			return
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("decoded diff does not encode: %v\ninput: %q", err, data)
		}
		d2, err := messages.DecodeGraphDiff(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("re-encoded diff does not decode: %v\ninput:      %q\nre-encoded: %s", err, data, b)
		}
		b2, err := json.Marshal(d2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, b2) {
			t.Fatalf("decode(encode(d)) != d\ninput: %q\nfirst:  %s\nsecond: %s", data, b, b2)
		}
	})
}
