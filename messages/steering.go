package messages

import (
	"errors"
	"fmt"
	"io"
	"slices"
)

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

// Graph diff limits, checked by GraphDiff.Validate.
const (
	// MaxDiffOps bounds the operations of one GraphDiff.
	MaxDiffOps = 64
	// MaxDiffIDLen bounds every id a diff names (node ids, dependencies,
	// tools, team ids); it matches actors/dag.MaxIDLen.
	MaxDiffIDLen = 128
	// MaxDiffTextLen bounds every free text of a diff (goals, roles); it
	// matches actors/dag.MaxGoalLen.
	MaxDiffTextLen = 16 << 10
)

// ErrInvalidGraphDiff wraps every GraphDiff.Validate failure.
var ErrInvalidGraphDiff = errors.New("messages: invalid graph diff")

// DecodeGraphDiff strictly decodes a graph diff with DecodeStrict (unknown
// fields, trailing data and invalid UTF-8 are errors) and validates it (GraphDiff.Validate). It reads
// r to the end of the JSON value; bounding r's size is the caller's job.
func DecodeGraphDiff(r io.Reader) (GraphDiff, error) {
	var d GraphDiff
	if err := DecodeStrictReader(r, &d); err != nil {
		return GraphDiff{}, fmt.Errorf("messages: decode graph diff: %w", err)
	}
	if err := d.Validate(); err != nil {
		return GraphDiff{}, err
	}
	return d, nil
}

// diffOpFields lists, for each operation, the fields it uses (by JSON
// name). All are required except set_tools' tools (empty clears them); any
// other field set is an error. A field counts as set when it is not its
// zero value, as omitempty encodes it.
var diffOpFields = map[DiffOpKind][]string{
	OpAddNode:     {"node"},
	OpRemoveNode:  {"node_id"},
	OpSplitNode:   {"node_id", "into"},
	OpRerouteEdge: {"from", "to", "new_from"},
	OpSetRole:     {"node_id", "role"},
	OpSetTools:    {"node_id", "tools"},
	OpWrapInTeam:  {"node_ids", "team_id", "goal"},
}

// setFields returns the JSON names of op's fields that are set, in
// declaration order.
func (op *DiffOp) setFields() []string {
	var set []string
	add := func(name string, ok bool) {
		if ok {
			set = append(set, name)
		}
	}
	add("node", op.Node != nil)
	add("node_id", op.NodeID != "")
	add("into", len(op.Into) > 0)
	add("from", op.From != "")
	add("to", op.To != "")
	add("new_from", op.NewFrom != "")
	add("role", op.Role != "")
	add("tools", len(op.Tools) > 0)
	add("node_ids", len(op.NodeIDs) > 0)
	add("team_id", op.TeamID != "")
	add("goal", op.Goal != "")
	return set
}

// Validate checks a diff's structure without a plan: one to MaxDiffOps
// operations, each of a known kind, with its fields set and no others,
// split_node with at least two nodes, wrap_in_team with distinct node ids,
// and ids and texts within MaxDiffIDLen and MaxDiffTextLen. Whether the
// diff fits the plan (ids exist, nodes have not started, the result is a
// valid plan) is actors/dag.Apply's job. All problems are reported
// together, wrapped in ErrInvalidGraphDiff.
func (d GraphDiff) Validate() error {
	var errs []error
	if len(d.Ops) == 0 {
		errs = append(errs, errors.New("no operations"))
	}
	if len(d.Ops) > MaxDiffOps {
		// Not worth checking each of them.
		return fmt.Errorf("%w: %d operations, more than %d", ErrInvalidGraphDiff, len(d.Ops), MaxDiffOps)
	}
	for i := range d.Ops {
		op := &d.Ops[i]
		fields, known := diffOpFields[op.Op]
		if !known {
			errs = append(errs, fmt.Errorf("ops[%d]: unknown operation %.32q", i, op.Op))
			continue
		}
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("ops[%d] (%s): %s", i, op.Op, fmt.Sprintf(format, args...)))
		}
		set := op.setFields()
		for _, f := range fields {
			if !slices.Contains(set, f) && !(op.Op == OpSetTools && f == "tools") {
				bad("%s is required", f)
			}
		}
		for _, f := range set {
			if !slices.Contains(fields, f) {
				bad("%s does not belong to %s", f, op.Op)
			}
		}
		checkID := func(what, id string) {
			if len(id) > MaxDiffIDLen {
				bad("%s %.32q… is longer than %d bytes", what, id, MaxDiffIDLen)
			}
		}
		checkText := func(what, s string) {
			if len(s) > MaxDiffTextLen {
				bad("%s is longer than %d bytes", what, MaxDiffTextLen)
			}
		}
		checkNode := func(what string, n *PlanNode) {
			if n.ID == "" {
				bad("%s has an empty id", what)
			}
			checkID(what+" id", n.ID)
			checkText(what+" goal", n.Goal)
			checkText(what+" role", n.Role)
			for _, dep := range n.Deps {
				checkID(what+" dependency", dep)
			}
			for _, tool := range n.Tools {
				checkID(what+" tool", tool)
			}
		}
		if op.Node != nil {
			checkNode("node", op.Node)
		}
		for j := range op.Into {
			checkNode(fmt.Sprintf("into[%d]", j), &op.Into[j])
		}
		if op.Op == OpSplitNode && len(op.Into) == 1 {
			bad("into needs at least 2 nodes")
		}
		checkID("node_id", op.NodeID)
		checkID("from", op.From)
		checkID("to", op.To)
		checkID("new_from", op.NewFrom)
		checkID("team_id", op.TeamID)
		checkText("role", op.Role)
		checkText("goal", op.Goal)
		for _, tool := range op.Tools {
			checkID("tool", tool)
		}
		seen := make(map[string]bool, len(op.NodeIDs))
		for _, id := range op.NodeIDs {
			checkID("node_ids entry", id)
			if id == "" {
				bad("node_ids has an empty id")
			} else if seen[id] {
				bad("node_ids lists %.32q twice", id)
			}
			seen[id] = true
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidGraphDiff, errors.Join(errs...))
	}
	return nil
}
