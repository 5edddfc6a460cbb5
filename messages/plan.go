package messages

// Plan is the director's task graph: nodes and their dependencies. It is
// validated (ids, unknown dependencies, cycles) before anything runs; see
// actors/dag.
type Plan struct {
	Nodes []PlanNode `json:"nodes"`
}

// PlanNode is one unit of work in a plan.
type PlanNode struct {
	ID    string   `json:"id"`
	Goal  string   `json:"goal"`
	Deps  []string `json:"deps,omitempty"`
	Tools []string `json:"tools,omitempty"`
}
