package dag_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/actors/dag"
	"github.com/conclave-ai/conclave/messages"
)

func plan(nodes ...messages.PlanNode) messages.Plan { return messages.Plan{Nodes: nodes} }
func n(id string, deps ...string) messages.PlanNode {
	return messages.PlanNode{ID: id, Goal: "g", Deps: deps}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		plan messages.Plan
		want string // substring of the error; "" = valid
	}{
		{"valid diamond", plan(n("a"), n("b", "a"), n("c", "a"), n("d", "b", "c")), ""},
		{"empty", plan(), "no nodes"},
		{"empty id", plan(n("")), "empty id"},
		{"duplicate id", plan(n("a"), n("a")), `duplicate node id "a"`},
		{"unknown dep", plan(n("a", "zz")), `unknown node "zz"`},
		{"self dep", plan(n("a", "a")), "depends on itself"},
		{"dup dep", plan(n("a"), n("b", "a", "a")), "twice"},
		{"cycle", plan(n("a", "c"), n("b", "a"), n("c", "b")), "cycle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := dag.Validate(tt.plan)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, dag.ErrInvalidPlan) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want ErrInvalidPlan containing %q", err, tt.want)
			}
		})
	}
}

func TestValidate_LongChainNoStackBlowup(t *testing.T) {
	t.Parallel()
	nodes := []messages.PlanNode{n("x0")}
	for i := 1; i < 50000; i++ {
		nodes = append(nodes, n("x"+itoa(i), "x"+itoa(i-1)))
	}
	if err := dag.Validate(plan(nodes...)); err != nil {
		t.Fatal(err)
	}
	if w := dag.Waves(plan(nodes...)); len(w) != 50000 {
		t.Fatalf("waves = %d, want 50000", len(w))
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestWaves(t *testing.T) {
	t.Parallel()
	got := dag.Waves(plan(n("d", "b", "c"), n("c", "a"), n("b", "a"), n("a"), n("e")))
	want := [][]string{{"a", "e"}, {"b", "c"}, {"d"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Waves = %v, want %v", got, want)
	}
}

func TestDownstream(t *testing.T) {
	t.Parallel()
	p := plan(n("a"), n("b", "a"), n("c", "b"), n("d"))
	got := dag.Downstream(p, "a")
	if !reflect.DeepEqual(got, map[string]bool{"b": true, "c": true}) {
		t.Fatalf("Downstream(a) = %v", got)
	}
}
