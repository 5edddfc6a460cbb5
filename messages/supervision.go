package messages

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SupervisionStrategy is what a supervisor does when one of its agents of
// a role fails (a panic, or a transient model error).
type SupervisionStrategy string

const (
	// SupervisionOneForOne restarts the failing agent alone.
	SupervisionOneForOne SupervisionStrategy = "one-for-one"
	// SupervisionAllForOne restarts the failing agent and every running
	// sibling of the same role under the same supervisor (a team's
	// members; a debate's whole round).
	SupervisionAllForOne SupervisionStrategy = "all-for-one"
	// SupervisionStop restarts nothing: the failing agent stops and its
	// lane closes as failed.
	SupervisionStop SupervisionStrategy = "stop"
)

// Bounds of a SupervisionPolicy, checked by Supervision.Validate.
const (
	MaxRestartLimit      = 100
	MaxSupervisionWindow = time.Hour
	MaxRestartBackoff    = 10 * time.Minute
)

// SupervisionPolicy is how the agents of one role are supervised. A zero
// field keeps the default: the server's, else the built-in one
// (one-for-one, except all-for-one for debaters; 3 restarts a minute;
// 100 ms first backoff).
type SupervisionPolicy struct {
	Strategy SupervisionStrategy `json:"strategy,omitempty"`
	// RestartLimit is how many restarts within the window an agent gets
	// before it is stopped (its lane fails), 1..MaxRestartLimit.
	RestartLimit int `json:"restart_limit,omitempty"`
	// WindowMS is the window of RestartLimit, in milliseconds.
	WindowMS int64 `json:"window_ms,omitempty"`
	// BackoffMS is the wait before a restarted agent's first turn after
	// its first failure, in milliseconds; each further failure doubles it.
	BackoffMS int64 `json:"backoff_ms,omitempty"`
}

// Supervision chooses, per role, how a run's agents are supervised. A nil
// role keeps the default. It is a run option (StartRun.Supervision,
// echoed in run_started with the server's defaults merged in) and a
// server setting (conclave.Options.Supervision, serve --supervision).
type Supervision struct {
	// Director is the planner, under the run supervisor.
	Director *SupervisionPolicy `json:"director,omitempty"`
	// Worker is the top-level plan's worker nodes, under the run supervisor.
	Worker *SupervisionPolicy `json:"worker,omitempty"`
	// Subagent is the sub-agents a node delegates to, under that node.
	Subagent *SupervisionPolicy `json:"subagent,omitempty"`
	// Debater is a debate node's agents and judge: all-for-one (the
	// default) restarts the round from its first speaker; stop fails the
	// debate node. one-for-one is refused: a round's speakers answer each
	// other's turns. A debate's restarts count over the whole debate (no
	// window).
	Debater *SupervisionPolicy `json:"debater,omitempty"`
	// Team is the members of a team node, under the team's supervisor.
	Team *SupervisionPolicy `json:"team,omitempty"`
}

// SupervisionRoles are the roles of Supervision, in the order String
// writes them.
var SupervisionRoles = []string{"director", "worker", "subagent", "debater", "team"}

// Role returns the policy of role (one of SupervisionRoles), nil when the
// role is not set or unknown.
func (s *Supervision) Role(role string) *SupervisionPolicy {
	if s == nil {
		return nil
	}
	if p := s.slot(role); p != nil {
		return *p
	}
	return nil
}

func (s *Supervision) slot(role string) **SupervisionPolicy {
	switch role {
	case "director":
		return &s.Director
	case "worker":
		return &s.Worker
	case "subagent":
		return &s.Subagent
	case "debater":
		return &s.Debater
	case "team":
		return &s.Team
	}
	return nil
}

// IsZero reports whether no role is set.
func (s *Supervision) IsZero() bool {
	if s == nil {
		return true
	}
	for _, r := range SupervisionRoles {
		if s.Role(r) != nil {
			return false
		}
	}
	return true
}

// Merge returns base with over's set fields applied on top, role by role
// and field by field. Neither is changed; nil is an empty Supervision.
func Merge(base, over *Supervision) *Supervision {
	if base.IsZero() && over.IsZero() {
		return nil
	}
	out := &Supervision{}
	for _, r := range SupervisionRoles {
		b, o := base.Role(r), over.Role(r)
		if b == nil && o == nil {
			continue
		}
		var p SupervisionPolicy
		if b != nil {
			p = *b
		}
		if o != nil {
			if o.Strategy != "" {
				p.Strategy = o.Strategy
			}
			if o.RestartLimit != 0 {
				p.RestartLimit = o.RestartLimit
			}
			if o.WindowMS != 0 {
				p.WindowMS = o.WindowMS
			}
			if o.BackoffMS != 0 {
				p.BackoffMS = o.BackoffMS
			}
		}
		*out.slot(r) = &p
	}
	return out
}

// Validate checks every set role. Errors are *FieldError naming the field
// (supervision.<role>.<field>).
func (s *Supervision) Validate() error {
	for _, r := range SupervisionRoles {
		p := s.Role(r)
		if p == nil {
			continue
		}
		bad := func(field, format string, args ...any) error {
			return &FieldError{Field: "supervision." + r + "." + field, Problem: fmt.Sprintf(format, args...)}
		}
		switch p.Strategy {
		case "", SupervisionOneForOne, SupervisionAllForOne, SupervisionStop:
		default:
			return bad("strategy", "must be one-for-one, all-for-one or stop, got %q", truncate(string(p.Strategy), 32))
		}
		if r == "debater" && p.Strategy == SupervisionOneForOne {
			// A round's speakers answer each other's turns: a turn restarted
			// alone would answer a round that has moved on.
			return bad("strategy", "must be all-for-one (the round restarts) or stop for debaters, got one-for-one")
		}
		if p.RestartLimit < 0 || p.RestartLimit > MaxRestartLimit {
			return bad("restart_limit", "must be in 1..%d, got %d", MaxRestartLimit, p.RestartLimit)
		}
		if p.WindowMS < 0 || p.WindowMS > MaxSupervisionWindow.Milliseconds() {
			return bad("window_ms", "must be in 1..%d, got %d", MaxSupervisionWindow.Milliseconds(), p.WindowMS)
		}
		if p.BackoffMS < 0 || p.BackoffMS > MaxRestartBackoff.Milliseconds() {
			return bad("backoff_ms", "must be in 1..%d, got %d", MaxRestartBackoff.Milliseconds(), p.BackoffMS)
		}
	}
	return nil
}

// ParseSupervision reads the command-line form of a Supervision: a
// comma-separated list of ROLE=SPEC, where ROLE is one of
// SupervisionRoles and SPEC is
//
//	STRATEGY[:LIMIT[/WINDOW]][@BACKOFF]
//
// STRATEGY is one-for-one, all-for-one or stop ("restart" is
// one-for-one; "default" keeps the role's default strategy), LIMIT the restart limit, WINDOW and BACKOFF Go durations
// (10s, 1m, 250ms). Examples: "team=all-for-one",
// "worker=restart:3/10s", "subagent=one-for-one:5/1m@200ms,director=stop".
// A role given twice is an error. The result is validated.
func ParseSupervision(s string) (*Supervision, error) {
	out := &Supervision{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		role, spec, ok := strings.Cut(item, "=")
		slot := out.slot(role)
		switch {
		case !ok:
			return nil, fmt.Errorf("supervision %q: want ROLE=STRATEGY[:LIMIT[/WINDOW]][@BACKOFF]", item)
		case slot == nil:
			return nil, fmt.Errorf("supervision %q: role must be one of %s", item, strings.Join(SupervisionRoles, ", "))
		case *slot != nil:
			return nil, fmt.Errorf("supervision %q: role %s given twice", item, role)
		}
		p, err := parsePolicy(spec)
		if err != nil {
			return nil, fmt.Errorf("supervision %q: %w", item, err)
		}
		*slot = p
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return out, nil
}

func parsePolicy(spec string) (*SupervisionPolicy, error) {
	p := &SupervisionPolicy{}
	spec, backoff, hasBackoff := strings.Cut(spec, "@")
	strategy, limit, hasLimit := strings.Cut(spec, ":")
	switch SupervisionStrategy(strategy) {
	case "default": // keeps the default strategy; only the limits change
	case "restart", SupervisionOneForOne:
		p.Strategy = SupervisionOneForOne
	case SupervisionAllForOne, SupervisionStop:
		p.Strategy = SupervisionStrategy(strategy)
	default:
		return nil, fmt.Errorf("strategy must be one-for-one (or restart), all-for-one, stop or default, got %q", strategy)
	}
	if hasLimit {
		n, window, hasWindow := strings.Cut(limit, "/")
		v, err := strconv.Atoi(n)
		if err != nil || v < 1 || v > MaxRestartLimit {
			return nil, fmt.Errorf("restart limit must be an integer in 1..%d, got %q", MaxRestartLimit, n)
		}
		p.RestartLimit = v
		if hasWindow {
			d, err := positiveDuration(window, MaxSupervisionWindow)
			if err != nil {
				return nil, fmt.Errorf("window: %w", err)
			}
			p.WindowMS = d.Milliseconds()
		}
	}
	if hasBackoff {
		d, err := positiveDuration(backoff, MaxRestartBackoff)
		if err != nil {
			return nil, fmt.Errorf("backoff: %w", err)
		}
		p.BackoffMS = d.Milliseconds()
	}
	return p, nil
}

func positiveDuration(s string, max time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Millisecond || d > max {
		return 0, fmt.Errorf("must be a duration in 1ms..%v, got %q", max, s)
	}
	return d, nil
}

// String is the command-line form (ParseSupervision) of the set roles;
// "" for none.
func (s *Supervision) String() string {
	var parts []string
	for _, r := range SupervisionRoles {
		p := s.Role(r)
		if p == nil {
			continue
		}
		spec := string(p.Strategy)
		if spec == "" {
			spec = "default"
		}
		if p.RestartLimit > 0 {
			spec += ":" + strconv.Itoa(p.RestartLimit)
			if p.WindowMS > 0 {
				spec += "/" + (time.Duration(p.WindowMS) * time.Millisecond).String()
			}
		}
		if p.BackoffMS > 0 {
			spec += "@" + (time.Duration(p.BackoffMS) * time.Millisecond).String()
		}
		parts = append(parts, r+"="+spec)
	}
	return strings.Join(parts, ",")
}
