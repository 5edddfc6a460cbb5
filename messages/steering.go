package messages

// GraphDiff is a steering change to a live run's plan: a list of operations
// applied in order, atomically (all or none), at a wave boundary. Only nodes
// that have not started may be changed; actors/dag.Apply checks that and
// re-validates the whole plan.
type GraphDiff struct {
	Ops []DiffOp `json:"ops"`
}

// DiffOpKind names a graph diff operation.
type DiffOpKind string

// Graph diff operations. The fields each uses are listed; any other field
// set on the operation is an error.
const (
	// OpAddNode adds Node (its deps may name any node of the plan).
	OpAddNode DiffOpKind = "add_node"
	// OpRemoveNode removes NodeID; its dependents inherit its dependencies.
	// The last node of a plan cannot be removed.
	OpRemoveNode DiffOpKind = "remove_node"
	// OpSplitNode replaces NodeID by the nodes of Into: each takes NodeID's
	// dependencies, and NodeID's dependents depend on all of them.
	OpSplitNode DiffOpKind = "split_node"
	// OpRerouteEdge replaces the dependency From → To (To depends on From)
	// by NewFrom → To.
	OpRerouteEdge DiffOpKind = "reroute_edge"
	// OpSetRole sets the Role of NodeID.
	OpSetRole DiffOpKind = "set_role"
	// OpSetTools sets the Tools of NodeID.
	OpSetTools DiffOpKind = "set_tools"
	// OpWrapInTeam moves the nodes NodeIDs into a new team node TeamID
	// (with goal Goal): dependencies among them stay inside the team, their
	// other dependencies become the team's, and their dependents outside
	// depend on the team.
	OpWrapInTeam DiffOpKind = "wrap_in_team"
)

// DiffOp is one operation of a GraphDiff.
type DiffOp struct {
	Op DiffOpKind `json:"op"`
	// add_node
	Node *PlanNode `json:"node,omitempty"`
	// remove_node, split_node, set_role, set_tools
	NodeID string `json:"node_id,omitempty"`
	// split_node
	Into []PlanNode `json:"into,omitempty"`
	// reroute_edge
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	NewFrom string `json:"new_from,omitempty"`
	// set_role
	Role string `json:"role,omitempty"`
	// set_tools (an empty list clears the tools)
	Tools []string `json:"tools,omitempty"`
	// wrap_in_team
	NodeIDs []string `json:"node_ids,omitempty"`
	TeamID  string   `json:"team_id,omitempty"`
	Goal    string   `json:"goal,omitempty"`
}

// SteerNote is a steering request to a live run: a note for the model to
// turn into a GraphDiff, or a diff given directly (then the note is only
// recorded).
type SteerNote struct {
	Note string     `json:"note,omitempty"`
	Diff *GraphDiff `json:"diff,omitempty"`
}
