package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/internal/redact"
	"github.com/conclave-ai/conclave/internal/runlog"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/transport"
)

const (
	// abortGrace bounds how long an interrupted run may take to report its
	// terminal event after it was aborted.
	abortGrace = 10 * time.Second
	// shutdownGrace bounds the engine's shutdown.
	shutdownGrace = 10 * time.Second
	// batchMax is how many events one read from the subscription returns at most.
	batchMax = 256
)

// cliDefaults is the scenario of a run without --scenario, before the
// flags: a little more to watch than messages.DefaultScenario (reasoning,
// one tool call per node, and a token delay a person can follow, except
// with --json). Waves is left to WithDefaults: min(3, nodes).
func cliDefaults(jsonOut bool) messages.Scenario {
	s := messages.Scenario{Nodes: 6, Tokens: 24, ReasoningTokens: 4, ToolsPerNode: 1, TokenDelayMS: 15}
	if jsonOut {
		s.TokenDelayMS = 0
	}
	return s
}

// intFlag is a scenario field set by an integer flag.
type intFlag struct {
	name     string
	field    func(*messages.Scenario) *int
	min, max int
	usage    string
	// ownDefault: the usage states the default, which is not a constant.
	ownDefault bool
}

// scenarioIntFlags lists the integer fields of messages.Scenario, one flag
// each. Fields whose zero value means "the default" start at 1: an explicit
// 0 would silently become the default.
var scenarioIntFlags = []intFlag{
	{"nodes", func(s *messages.Scenario) *int { return &s.Nodes }, 1, messages.MaxNodes,
		"council worker nodes in the plan", false},
	{"waves", func(s *messages.Scenario) *int { return &s.Waves }, 1, messages.MaxNodes,
		"dependency levels the nodes are spread over, at most --nodes (default min(3, nodes))", true},
	{"fan-in", func(s *messages.Scenario) *int { return &s.FanIn }, 1, messages.MaxFanIn,
		"dependencies of each node on the previous wave, at most", false},
	{"tokens", func(s *messages.Scenario) *int { return &s.Tokens }, 1, messages.MaxTokens,
		"text tokens each worker node streams", false},
	{"reasoning-tokens", func(s *messages.Scenario) *int { return &s.ReasoningTokens }, 0, messages.MaxTokens,
		"reasoning tokens each worker node streams", false},
	{"synthesis-tokens", func(s *messages.Scenario) *int { return &s.SynthesisTokens }, 1, messages.MaxTokens,
		"text tokens the synthesiser streams", false},
	{"prefill-progress", func(s *messages.Scenario) *int { return &s.PrefillProgress }, 0, messages.MaxPrefillProgress,
		"prompt-progress reports (node_progress, synthesis_progress) per worker and synthesiser turn", false},
	{"token-delay-ms", func(s *messages.Scenario) *int { return &s.TokenDelayMS }, 0, messages.MaxTokenDelayMS,
		"delay before each streamed token in milliseconds; 0 by default with --json", false},
	{"tools-per-node", func(s *messages.Scenario) *int { return &s.ToolsPerNode }, 0, messages.MaxToolsPerNode,
		"tool calls each worker node makes", false},
	{"subagents-per-node", func(s *messages.Scenario) *int { return &s.SubagentsPerNode }, 0, messages.MaxSubagents,
		"sub-agents each worker node delegates to", false},
	{"panic-attempts", func(s *messages.Scenario) *int { return &s.PanicAttempts }, 1, 100,
		"attempts of each --panic-nodes node that panic before one succeeds", false},
	{"approvals", func(s *messages.Scenario) *int { return &s.Approvals }, 0, messages.MaxNodes,
		"search calls dealt to the nodes in id order; with --hitl tools each asks for approval (as every tool call does)", false},
	{"info-requests", func(s *messages.Scenario) *int { return &s.InfoRequests }, 0, messages.MaxNodes,
		"ask_human calls dealt to the nodes in id order; each asks you a question, whatever --hitl says", false},
	{"choices", func(s *messages.Scenario) *int { return &s.Choices }, 0, messages.MaxNodes,
		"ask_choice calls dealt to the nodes in id order; each asks you to choose among three options, whatever --hitl says", false},
	{"teams", func(s *messages.Scenario) *int { return &s.Teams }, 0, messages.MaxNodes,
		"team nodes (the first nodes in id order), each running a nested plan of --team-size nodes", false},
	{"team-size", func(s *messages.Scenario) *int { return &s.TeamSize }, 1, messages.MaxTeamSize,
		"nodes in each team's nested plan (default 3)", true},
}

// councilFlags are the flags of the council and delegation behaviours
// that are not plain scenario integers.
type councilFlags struct {
	debate         bool
	debateAgents   int
	debateRounds   int
	debateMin      int
	judge          bool
	consensusRound int
	spawn          selectorFlag
	steer          []string
	advisor        bool
	advisorRedir   int
	advisorHalt    selectorFlag
	async          int
	delegDepth     int
	maxDelegation  int
	maxReplans     int
	calls          []string
	multipleChoice bool
	advisorConsult int
	maxConsults    int
	debateTools    []string
}

func (f *councilFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.debate, "debate", false, "make the node after the team nodes a debate node")
	fs.IntVar(&f.debateAgents, "debate-agents", 3, fmt.Sprintf("agents per debate, 2..%d", messages.MaxDebateAgents))
	fs.IntVar(&f.debateRounds, "debate-rounds", 3, fmt.Sprintf("rounds per debate, 1..%d", messages.MaxDebateRounds))
	fs.IntVar(&f.debateMin, "debate-min-rounds", 1, "rounds before the judge may stop a debate early")
	fs.BoolVar(&f.judge, "judge", false, "add a judge to every debate round")
	fs.StringSliceVar(&f.debateTools, "debate-tools", nil, "tools the debaters may call, each once per turn before arguing: `NAME,...` (e.g. search); their calls show on the debater's turn lane")
	fs.IntVar(&f.consensusRound, "consensus-round", 0, "first round whose judge reports consensus (0 = never)")
	fs.Var(&f.spawn, "spawn", "worker nodes that ask for a sub-team: ids (n001,n007) or a fraction (0.2)")
	fs.StringArrayVar(&f.steer, "steer", nil, "steering note posted when a wave starts, as WAVE:NOTE (repeatable); it applies at the next wave boundary")
	fs.BoolVar(&f.advisor, "advisor", false, "an advisor checks every worker's final turn (continue, redirect or halt)")
	fs.IntVar(&f.advisorRedir, "advisor-redirects", 0, "redirects the scripted advisor gives each worker before it lets it continue")
	fs.IntVar(&f.advisorConsult, "advisor-consults", 0, "consult mode: the advisor answers workers' consult_advisor calls (no gate); each scripted worker consults it this many times")
	fs.IntVar(&f.maxConsults, "max-consults", 0, fmt.Sprintf("consult mode: consults per agent before consult_advisor answers that the budget is spent (default %d)", messages.DefaultAdvisorConsults))
	fs.Var(&f.advisorHalt, "advisor-halt", "worker nodes the scripted advisor halts: ids or a fraction")
	fs.IntVar(&f.async, "async", 0, "async tasks each worker starts (start, update, check, list, cancel)")
	fs.IntVar(&f.delegDepth, "delegation-depth", 0, "delegation chain length the scripted sub-agents reach")
	fs.IntVar(&f.maxDelegation, "max-delegation-rounds", 0, "delegation soft cap: a warning at it, the run fails at twice it (default 3)")
	fs.IntVar(&f.maxReplans, "max-replans", messages.DefaultMaxReplans, "times the director plans again after a rejected plan, with its reason (0: a rejection ends the run)")
	fs.BoolVar(&f.multipleChoice, "multiple-choice", false, "make the --choices multiple choices (several options may be chosen)")
	fs.StringSliceVar(&f.calls, "calls", nil, "tools each worker calls once, with arguments made up from their schemas: `NAME,...` (e.g. everything.echo with --mcp everything=...)")
}

// advisorOptions is the run's advisor: in consult mode with
// --advisor-consults or --max-consults, else the gate, on with --advisor
// (or any scripted gate flag).
func (f *councilFlags) advisorOptions() *messages.AdvisorOptions {
	if f.advisorConsult > 0 || f.maxConsults > 0 {
		return &messages.AdvisorOptions{Mode: messages.AdvisorModeConsult, MaxConsults: f.maxConsults}
	}
	if !f.advisor && f.advisorRedir == 0 && f.advisorHalt.sel.IsZero() {
		return nil
	}
	return &messages.AdvisorOptions{}
}

// apply sets the scenario fields of the council flags the user gave.
func (f *councilFlags) apply(fs *pflag.FlagSet, sc *messages.Scenario) error {
	if f.debate || fs.Changed("debate-agents") || fs.Changed("debate-rounds") || fs.Changed("judge") || fs.Changed("debate-tools") {
		d := sc.Debate
		if d == nil {
			d = &messages.DebateScenario{}
		}
		d.Agents, d.Rounds, d.MinRounds, d.Judge, d.ConsensusRound = f.debateAgents, f.debateRounds, f.debateMin, f.judge, f.consensusRound
		if fs.Changed("debate-tools") {
			d.Tools = f.debateTools
		}
		sc.Debate = d
	}
	if fs.Changed("spawn") {
		sc.Spawn = f.spawn.sel
	}
	for _, st := range f.steer {
		w, note, ok := strings.Cut(st, ":")
		wave, err := strconv.Atoi(w)
		if !ok || err != nil || note == "" {
			return fmt.Errorf("invalid --steer %q: want WAVE:NOTE, e.g. 1:add a node on costs", st)
		}
		sc.Steering = append(sc.Steering, messages.SteeringScript{AtWave: wave, Note: note})
	}
	if fs.Changed("advisor-redirects") || fs.Changed("advisor-halt") || fs.Changed("advisor-consults") {
		sc.Advisor = &messages.AdvisorScenario{Redirects: f.advisorRedir, Halt: f.advisorHalt.sel, Consults: f.advisorConsult}
	}
	if fs.Changed("async") || fs.Changed("delegation-depth") {
		sc.Delegations = &messages.DelegationScenario{Async: f.async, Depth: f.delegDepth}
	}
	if fs.Changed("calls") {
		sc.Calls = f.calls
	}
	sc.MultipleChoice = f.multipleChoice
	return nil
}

// runCmd holds the flags of `conclave run`.
type runCmd struct {
	app     *app
	tracing tracingFlags // serve_tracing.go

	// sc receives the scenario flags; only the flags the user set are
	// copied into the run's scenario.
	sc           messages.Scenario
	failNodes    selectorFlag
	panicNodes   selectorFlag
	scenarioFile string
	concurrency  int
	hitl         string
	// approvalTimeout is --approval-timeout; 0 leaves the engine's default.
	approvalTimeout time.Duration
	timeoutAction   string
	autoApprove     bool
	jsonOut         bool
	session         string
	logLevel        string
	logFormat       string // --log-format: text (default) or json
	council         councilFlags
	model           modelFlags
	tools           toolFlags
	// budgetTokens and budgetUSD are the run's budget (--budget-tokens,
	// --budget-usd), prices the --prices file its cost is estimated with.
	budgetTokens int64
	// files are the paths of the files the run starts with (--file).
	files     []string
	budgetUSD float64
	prices    string
	// supervision is --supervision (messages.ParseSupervision's form);
	// panicMembers are --panic-team-member's ids.
	supervision  string
	panicMembers []string
}

func newRunCmd(a *app) *cobra.Command {
	c := &runCmd{app: a}
	cmd := &cobra.Command{
		Use:   "run QUESTION [flags]",
		Short: "Run a council in-process and show it live",
		Long: `Run a council on an in-process engine (in-memory journal, scripted model unless
--model openai) and show its progress live: a status block on a terminal, plain
progress lines otherwise, then the answer. With --json, print every event as one JSON envelope per line.

With --hitl, the run stops at its gates (each mode includes the ones before:
plan, then each node, then each tool call) and asks you inline: approve, reject
or edit. Questions of --info-requests are asked with any --hitl. Answers are
read from stdin, one per line, so a script can pipe them in; prompts go to the
terminal (stderr unless the status block is on stdout). An unanswered prompt
gives up when the interrupt expires (--approval-timeout), and the engine takes
--approval-timeout-action; at the end of stdin, approvals are rejected with
"no input". --auto-approve approves everything and says what it approved.

The scenario flags mirror the fields of a scenario file one to one. Without
--scenario the defaults below apply; with --scenario the file's fields apply
(unset ones take the scenario defaults) and only the flags given override them.

Exit status: 0 when the run finished, 1 when it ended with run_error,
2 for bad usage, 130 when interrupted (the run is aborted first).`,
		Example: `  conclave run "why is the sky blue"
  conclave run "why is the sky blue" --nodes 12 --waves 4 --fail-nodes 0.1 --json
  conclave run "why is the sky blue" --scenario scenario.json --seed 7
  conclave run "why is the sky blue" --hitl tools --approvals 2 --nodes 2 --approval-timeout 2m
  conclave run "why is the sky blue" --supervision team=all-for-one --panic-team-member n002`,
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return usageError(errors.New(`missing question: conclave run "your question" [flags]`))
			case len(args) > 1:
				return usageError(fmt.Errorf("expected one question, got %d arguments (quote the question)", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.run(cmd.Context(), cmd.Flags(), cmd.InOrStdin(), args[0])
		},
	}
	fs := cmd.Flags()
	defaults := cliDefaults(false).WithDefaults()
	for _, f := range scenarioIntFlags {
		def := *f.field(&defaults)
		if f.ownDefault {
			def = 0 // pflag shows no default for a zero value
		}
		fs.IntVar(f.field(&c.sc), f.name, def, f.usage)
	}
	fs.Var(&c.failNodes, "fail-nodes", "nodes that fail halfway: ids (n001,n007) or a fraction of all nodes (0.05)")
	fs.Var(&c.panicNodes, "panic-nodes", "nodes that panic and are restarted: ids (n001,n007) or a fraction (0.05)")
	fs.StringSliceVar(&c.panicMembers, "panic-team-member", nil, "team members that panic on their first --panic-attempts attempts: a member id (n001/m2), "+
		"a team node id (n002: its first member, n002/m1; the plan's nodes up to it become teams when --teams is lower), or a debate agent (n003:a2)")
	fs.StringVar(&c.supervision, "supervision", "", "how failing agents are supervised, per role (director, worker, subagent, debater, team): "+
		"`ROLE=STRATEGY[:LIMIT[/WINDOW]][@BACKOFF],...` with STRATEGY one-for-one (or restart), all-for-one or stop, "+
		"e.g. team=all-for-one,worker=restart:3/10s@200ms")
	fs.Int64Var(&c.sc.Seed, "seed", 0, "seed of the scripted model; the same seed replays the same run")
	fs.StringVar(&c.scenarioFile, "scenario", "", "JSON scenario `file`; the flags given override its fields")
	fs.IntVar(&c.concurrency, "concurrency", 0, fmt.Sprintf("nodes of one wave running at once, 1..%d (default 8)", actors.MaxConcurrency))
	fs.StringVar(&c.hitl, "hitl", string(messages.HITLNone), "human-in-the-loop gates, each mode including the ones before: none|plan|node|tools")
	fs.DurationVar(&c.approvalTimeout, "approval-timeout", 0, "how long each interrupt waits for an answer, in whole seconds: 30s, 5m (default 10m)")
	fs.StringVar(&c.timeoutAction, "approval-timeout-action", string(messages.DecisionReject), "what an approval nobody answered in time decides: reject|approve")
	fs.BoolVar(&c.autoApprove, "auto-approve", false, "approve every interrupt (answer questions \"ok\") at once, printing what it approved")
	c.tracing.register(fs)
	fs.BoolVar(&c.jsonOut, "json", false, "print each event's JSON envelope, one per line (JSONL), and nothing else")
	fs.StringVar(&c.session, "session", "", "session id to run in (default: a new one)")
	fs.StringVar(&c.logLevel, "log-level", "warn", "engine log level on stderr: debug|info|warn|error")
	registerLogFormat(fs, &c.logFormat)
	fs.StringArrayVar(&c.files, "file", nil, fmt.Sprintf("attach this `PATH` to the run (repeatable; at most %d files, %d KiB each, %d KiB in all): text files go in the agents' context, images and PDFs to a model that takes them (--model-inputs)",
		messages.MaxFiles, messages.MaxFileBytes>>10, messages.MaxRunFilesBytes>>10))
	fs.Int64Var(&c.budgetTokens, "budget-tokens", 0, "the run's token budget: past it the run ends with run_error budget_exceeded (0: none)")
	fs.Float64Var(&c.budgetUSD, "budget-usd", 0, "the run's cost budget in USD at the model prices (--prices): past it, likewise (0: none)")
	fs.StringVar(&c.prices, "prices", "", "JSON file of model prices in USD per million tokens overriding and extending the built-in ones (as serve --prices)")
	c.council.register(fs)
	c.model.register(fs)
	c.tools.register(fs)
	return cmd
}

// scenario builds the run's scenario: the file or the CLI defaults, then
// the flags the user set. Every error is a usage error naming the flag or
// field.
func (c *runCmd) scenario(fs *pflag.FlagSet) (messages.Scenario, error) {
	sc := cliDefaults(c.jsonOut)
	if c.scenarioFile != "" {
		var err error
		if sc, err = readScenario(c.scenarioFile); err != nil {
			return sc, usageError(fmt.Errorf("--scenario %s: %w", c.scenarioFile, err))
		}
	}
	for _, f := range scenarioIntFlags {
		if !fs.Changed(f.name) {
			continue
		}
		v := *f.field(&c.sc)
		if v < f.min || v > f.max {
			return sc, usageError(fmt.Errorf("invalid --%s %d: must be in %d..%d", f.name, v, f.min, f.max))
		}
		*f.field(&sc) = v
	}
	if fs.Changed("seed") {
		sc.Seed = c.sc.Seed
	}
	if fs.Changed("fail-nodes") {
		sc.FailNodes = c.failNodes.sel
	}
	if fs.Changed("panic-nodes") {
		sc.PanicNodes = c.panicNodes.sel
	}
	if err := c.council.apply(fs, &sc); err != nil {
		return sc, usageError(err)
	}
	if err := c.applyPanicMembers(fs, &sc); err != nil {
		return sc, usageError(err)
	}
	sc = sc.WithDefaults()
	if err := sc.Validate(); err != nil {
		return sc, usageError(err)
	}
	return sc, nil
}

// applyPanicMembers sets Scenario.PanicMembers from --panic-team-member:
// a bare node id nNNN names that team's first member, and makes the
// plan's first NNN nodes teams unless --teams (or the scenario file) says
// how many there are; then the node must be one of them.
func (c *runCmd) applyPanicMembers(fs *pflag.FlagSet, sc *messages.Scenario) error {
	for _, id := range c.panicMembers {
		if strings.ContainsAny(id, "/:") {
			sc.PanicMembers = append(sc.PanicMembers, id)
			continue
		}
		k, err := strconv.Atoi(strings.TrimPrefix(id, "n"))
		if !strings.HasPrefix(id, "n") || err != nil || k < 1 {
			return fmt.Errorf("invalid --panic-team-member %q: want a member id (n001/m2), a team node id (n002) or a debate agent (n003:a2)", id)
		}
		switch {
		case sc.Teams >= k:
		case fs.Changed("teams") || sc.Teams > 0:
			return fmt.Errorf("invalid --panic-team-member %q: node %d is not a team node (there are %d teams, the first nodes)", id, k, sc.Teams)
		default:
			sc.Teams = k
			sc.Nodes = max(sc.Nodes, k)
		}
		sc.PanicMembers = append(sc.PanicMembers, id+"/m1")
	}
	return nil
}

// readScenario decodes a scenario file with messages.DecodeScenario, which
// validates it, and returns its fields before defaults: a flag that
// overrides one field must not leave a defaulted other field behind (a file
// without waves and --nodes 2 gets min(3, 2) waves, not 3).
func readScenario(path string) (messages.Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return messages.Scenario{}, err
	}
	if _, err := messages.DecodeScenario(bytes.NewReader(b)); err != nil {
		return messages.Scenario{}, err
	}
	var raw messages.Scenario
	if err := json.Unmarshal(b, &raw); err != nil { // cannot fail after DecodeScenario
		return messages.Scenario{}, err
	}
	return raw, nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	switch strings.ToLower(s) {
	case "debug":
		l = slog.LevelDebug
	case "info":
		l = slog.LevelInfo
	case "warn", "warning":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		return l, fmt.Errorf("invalid --log-level %q: must be debug, info, warn or error", s)
	}
	return l, nil
}

// startRequest is the run the flags ask for, checked by the same
// StartRun.Options the server uses (one set of rules and messages; the
// CLI names its flags where the API names JSON fields). --approval-timeout
// is a duration here: it must be whole seconds.
func (c *runCmd) startRequest(fs *pflag.FlagSet, question string, sc messages.Scenario) (messages.StartRun, messages.RunOptions, error) {
	req := messages.StartRun{
		SessionID:             messages.SessionID(c.session),
		Question:              question,
		HITL:                  messages.HITLMode(c.hitl),
		Scenario:              &sc,
		Concurrency:           c.concurrency,
		ApprovalTimeoutAction: messages.Decision(c.timeoutAction),
		Advisor:               c.council.advisorOptions(),
		MaxDelegationRounds:   c.council.maxDelegation,
		MaxReplans:            &c.council.maxReplans,
	}
	if c.budgetTokens != 0 || c.budgetUSD != 0 {
		req.Budget = &messages.RunBudget{Tokens: c.budgetTokens, CostUSD: c.budgetUSD}
	}
	if c.supervision != "" {
		sup, err := messages.ParseSupervision(c.supervision)
		if err != nil {
			return req, messages.RunOptions{}, usageError(fmt.Errorf("invalid --supervision: %w", err))
		}
		req.Supervision = sup
	}
	if fs.Changed("approval-timeout") {
		d := c.approvalTimeout
		if d < time.Second || d%time.Second != 0 {
			return req, messages.RunOptions{}, usageError(fmt.Errorf("invalid --approval-timeout %s: must be whole seconds, at least 1s", d))
		}
		req.ApprovalTimeoutSeconds = int(d / time.Second) // Options checks the range
	}
	if fs.Changed("concurrency") && c.concurrency == 0 {
		req.Concurrency = -1 // --concurrency 0 is refused, not the default
	}
	for _, path := range c.files {
		f, err := readInputFile(path)
		if err != nil {
			return req, messages.RunOptions{}, usageError(err)
		}
		req.Files = append(req.Files, f)
	}
	o, err := req.Options(messages.RunDefaults{Concurrency: actors.DefaultConcurrency, ApprovalTimeout: actors.DefaultInterruptTimeout})
	if err != nil {
		return req, o, usageError(flagError(err))
	}
	return req, o, nil
}

// readInputFile reads a --file: at most one byte over the per-file limit
// (StartRun.Options says what is wrong with it), named by its base name.
func readInputFile(path string) (messages.InputFile, error) {
	fh, err := os.Open(path)
	if err != nil {
		return messages.InputFile{}, fmt.Errorf("--file: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, messages.MaxFileBytes+1))
	if err != nil {
		return messages.InputFile{}, fmt.Errorf("--file %s: %w", path, err)
	}
	if data == nil {
		data = []byte{}
	}
	return messages.InputFile{Name: filepath.Base(path), Data: data}, nil
}

// flagNames are the flags of StartRun's fields.
var flagNames = map[string]string{
	"hitl": "--hitl", "approval_timeout_seconds": "--approval-timeout", "approval_timeout_action": "--approval-timeout-action",
	"concurrency": "--concurrency", "max_delegation_rounds": "--max-delegation-rounds", "max_replans": "--max-replans", "question": "question",
	"budget.tokens": "--budget-tokens", "budget.cost_usd": "--budget-usd",
}

// flagError renames the field a StartRun error is about to its flag.
func flagError(err error) error {
	var fe *messages.FieldError
	if errors.As(err, &fe) {
		if name, ok := flagNames[fe.Field]; ok {
			return fmt.Errorf("invalid %s: %s", name, fe.Problem)
		}
		if strings.HasPrefix(fe.Field, "scenario.calls[") {
			return fmt.Errorf("invalid --calls: %s", fe.Problem)
		}
	}
	if errors.Is(err, messages.ErrInvalidID) {
		return fmt.Errorf("invalid --session: %w", err)
	}
	var file *messages.FileError
	if errors.As(err, &file) {
		return fmt.Errorf("invalid --file (%s): %w", file.Code, err)
	}
	return err
}

// run starts the council, follows it to its terminal event and maps the
// outcome to an exit status. Interrupts are answered with what stdin
// says. The engine is always shut down before it returns.
func (c *runCmd) run(ctx context.Context, fs *pflag.FlagSet, stdin io.Reader, question string) (err error) {
	logH, err := logHandler(c.app.stderr, c.logLevel, c.logFormat)
	if err != nil {
		return usageError(err)
	}
	sc, err := c.scenario(fs)
	if err != nil {
		return err
	}
	req, opts, err := c.startRequest(fs, question, sc)
	if err != nil {
		return err
	}
	secretValues := secrets(c.app.env, transport.Tokens{}, &c.tools) // masked in logs, events and tool results
	logger := slog.New(redact.New(secretValues...).Handler(logH))
	// The engine stamps events and interrupt expiries with the app's
	// clock, which the prompts compare deadlines with.
	models, closeModel, err := c.model.factory(c.app.env, logger)
	if err != nil {
		return usageError(err)
	}
	defer closeModel() // after the engine's shutdown (deferred later, run first)
	// The MCP servers stop after the engine (defers run last first).
	tools, mcpServers, err := c.tools.engineTools(ctx, logger, models == nil)
	if err != nil {
		return err
	}
	defer func() {
		if serr := stopTools(mcpServers, logger); serr != nil && err == nil {
			err = failure(serr)
		}
	}()
	ecfg := actors.Config{Logger: logger, Now: c.app.now, Models: models, Tools: tools, Secrets: secretValues,
		Observers: []actors.Observer{runlog.New(runlog.Config{Logger: logger})}}
	tracer, err := c.tracing.start(ctx, c.app.env, logger, tools)
	if err != nil {
		return err
	}
	if tracer != nil {
		ecfg.Tracer = tracer
		defer shutdownTracer(tracer, logger) // after the engine's shutdown (deferred later, run first)
	}
	req.TraceParent = c.app.env("TRACEPARENT") // a calling process's trace, as otel-cli and CI tools pass it
	if err := c.model.bounds(&ecfg); err != nil {
		return usageError(err)
	}
	if ecfg.Prices, err = loadPrices(c.prices); err != nil {
		return usageError(err)
	}
	if c.budgetUSD > 0 {
		if unknown := ecfg.Prices.Unknown(c.model.modelNames()...); len(unknown) > 0 {
			return usageError(fmt.Errorf("--budget-usd needs a price for every model, and %s has none: add it to a --prices file, or use --budget-tokens", strings.Join(unknown, ", ")))
		}
	}
	eng, err := actors.New(ecfg)
	if err != nil {
		return failure(err)
	}
	defer func() {
		// The signal context may be done already: shut down on our own clock.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		if serr := eng.Shutdown(sctx); serr != nil {
			logger.Error("engine shutdown", "err", serr)
			if err == nil {
				err = failure(fmt.Errorf("engine shutdown: %w", serr))
			}
		}
	}()

	ref, err := eng.StartRun(ctx, req)
	if err != nil {
		if errors.Is(err, actors.ErrInvalidRequest) {
			return usageError(flagError(err))
		}
		return failure(err)
	}
	start := c.app.now()
	sub, err := eng.Subscribe(ctx, messages.Subscribe{SessionID: ref.SessionID})
	if err != nil {
		return failure(err)
	}
	defer sub.Close()

	f := &follower{eng: eng, sub: sub, ref: ref, sc: sc, stderr: c.app.stderr, logger: logger}
	w := bufio.NewWriter(c.app.stdout)
	// Prompts go where a person sees them: stderr, unless stdout is the
	// terminal (the status block is redrawn around them).
	pw := bufio.NewWriter(c.app.stderr)
	switch {
	case c.jsonOut:
		f.out = &jsonOutput{w: w}
	case c.app.isTTY(c.app.stdout):
		f.out = &ttyOutput{w: w, r: newRenderer(ref.RunID), now: c.app.now, start: start, width: terminalWidth(c.app.stdout),
			color: c.app.env("NO_COLOR") == ""}
		f.tick = redrawEvery
		pw = w
	default:
		f.out = &plainOutput{w: w, r: newRenderer(ref.RunID)}
	}
	in := newLineReader(stdin)
	defer in.close()
	// A signal ends the prompt being answered at once; no goroutine is
	// left reading stdin (see lineReader).
	stopCancel := context.AfterFunc(ctx, in.cancel)
	defer stopCancel()
	f.ask = &asker{
		eng: eng, tenant: ref.Tenant, action: opts.ApprovalTimeoutAction, auto: c.autoApprove, in: in,
		w: pw, aside: f.out.aside, prompting: f.out.prompt, answered: f.out.answered, now: c.app.now, told: make(map[string]bool),
	}
	term, err := f.follow(ctx)
	if err != nil {
		_ = f.out.finish(nil) // best effort: says the run did not end
		if f.interrupted {
			return &exitError{code: exitInterrupted, err: fmt.Errorf("interrupted: %w", err)}
		}
		return failure(err)
	}
	if err := f.out.finish(term); err != nil {
		return failure(fmt.Errorf("write output: %w", err))
	}
	if f.interrupted {
		return &exitError{code: exitInterrupted, err: errors.New("interrupted")}
	}
	return outcome(term, c.jsonOut)
}

// outcome maps a run's terminal event to the command's result: nil for
// run_finished, exit status 1 for run_error (whatever its code: a plan
// rejected, a node failed, no node completed, …), with the error on stderr
// for --json (the human outputs have shown it in their summary).
func outcome(term *messages.Envelope, jsonOut bool) error {
	p, ok := term.Payload.(*messages.RunErrorPayload)
	if !ok {
		return nil
	}
	if jsonOut {
		return failure(fmt.Errorf("run %s failed (%s): %s", term.RunID, p.Code, p.Message))
	}
	return &exitError{code: exitFailed}
}

// follower reads a run's session from the start until the run's terminal
// event, feeding out.
type follower struct {
	eng    *actors.Engine
	sub    *actors.Subscription
	ref    actors.RunRef
	sc     messages.Scenario
	out    output
	ask    *asker // answers the run's interrupts
	stderr io.Writer
	logger *slog.Logger
	// tick, when > 0, bounds each wait for events so out.idle runs
	// (the live clock on a terminal).
	tick time.Duration

	interrupted bool // ctx ended and the run was aborted
	// unsettled: the next interrupt to answer was not in the engine's
	// registry yet, or more may be raised with it (asker.answerNext); wait
	// a moment for events before asking again.
	unsettled bool
}

// follow returns the run's terminal event. When ctx ends first, it aborts
// the run and keeps reading for at most abortGrace, so that even an
// interrupted run shows how it ended.
//
// Interrupts of the run are answered between batches, one per batch, in
// the order they were raised. While a prompt waits for the human, events
// wait in the subscription (it loses nothing: see actors/feed); while
// interrupts are queued, reads do not wait for events.
func (f *follower) follow(ctx context.Context) (*messages.Envelope, error) {
	readCtx := ctx
	var batch []*messages.Encoded
	for {
		asking := f.canAsk(ctx)
		f.unsettled = f.unsettled && asking
		wait := f.tick
		if f.unsettled {
			wait = settleWait
		}
		waitCtx, cancel := readCtx, context.CancelFunc(func() {})
		if wait > 0 {
			waitCtx, cancel = context.WithTimeout(readCtx, wait)
		}
		var err error
		if asking && !f.unsettled {
			batch, err = f.sub.Poll(readCtx, batch, batchMax)
		} else {
			batch, err = f.sub.Next(waitCtx, batch, batchMax)
		}
		cancel()
		var term *messages.Envelope
		for _, enc := range batch {
			env, derr := enc.Envelope()
			if derr != nil {
				return nil, fmt.Errorf("decode event seq %d: %w", enc.Seq, derr)
			}
			f.out.event(enc, env)
			if env.RunID != f.ref.RunID {
				continue
			}
			f.ask.event(env)
			if p, ok := env.Payload.(*messages.PlanProposedPayload); ok {
				f.warnUnknownNodes(p)
			}
			if env.Type.Terminal() {
				term = env
				break
			}
		}
		if ferr := f.out.flush(); ferr != nil {
			return nil, fmt.Errorf("write output: %w", ferr)
		}
		if term != nil {
			return term, nil
		}
		switch {
		case err == nil:
		case errors.Is(err, context.DeadlineExceeded) && readCtx.Err() == nil: // our wait ended
			if f.tick == 0 {
				break
			}
			if ierr := f.out.idle(); ierr != nil {
				return nil, fmt.Errorf("write output: %w", ierr)
			}
		case ctx.Err() != nil && !f.interrupted:
			f.interrupted = true
			f.abort(ctx)
			var cancelGrace context.CancelFunc
			readCtx, cancelGrace = context.WithTimeout(context.WithoutCancel(ctx), abortGrace)
			defer cancelGrace()
		default:
			return nil, fmt.Errorf("read events of run %s: %w", f.ref.RunID, err)
		}
		if f.canAsk(ctx) {
			answered, aerr := f.ask.answerNext(ctx)
			f.unsettled = !answered
			if aerr != nil && ctx.Err() == nil {
				return nil, fmt.Errorf("answer interrupt: %w", aerr)
			}
			// When ctx ended during the prompt, the next read fails with
			// its error, and the run is aborted as above.
		}
	}
}

// canAsk reports whether an interrupt waits for an answer and may be asked:
// not once the command is being interrupted.
func (f *follower) canAsk(ctx context.Context) bool {
	return f.ask.waiting() && !f.interrupted && ctx.Err() == nil
}

func (f *follower) abort(ctx context.Context) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortGrace)
	defer cancel()
	err := f.eng.Abort(actx, messages.AbortRun{RunID: f.ref.RunID, Reason: "interrupted by signal"})
	if err != nil && !errors.Is(err, actors.ErrRunTerminal) {
		f.logger.Warn("abort run", "run_id", f.ref.RunID, "err", err)
	}
}

// warnUnknownNodes tells on stderr about --fail-nodes and --panic-nodes ids
// that are not in the plan: the scripted model ignores them, so a typo
// (n1 for n001) would otherwise go unnoticed.
func (f *follower) warnUnknownNodes(p *messages.PlanProposedPayload) {
	for _, s := range []struct {
		field string
		ids   []string
	}{{"fail_nodes", f.sc.FailNodes.IDs}, {"panic_nodes", f.sc.PanicNodes.IDs}} {
		for _, id := range s.ids {
			if !slices.ContainsFunc(p.Plan.Nodes, func(n messages.PlanNode) bool { return n.ID == id }) {
				fmt.Fprintf(f.stderr, "conclave: warning: %s: %q is not a node of the plan; ignored\n", s.field, id)
			}
		}
	}
}

// selectorFlag is a messages.NodeSelector as a flag: a comma-separated list
// of node ids (n001,n007) or a fraction of all nodes in [0, 1] (0.05).
type selectorFlag struct{ sel messages.NodeSelector }

var _ pflag.Value = (*selectorFlag)(nil)

func (s *selectorFlag) String() string {
	if len(s.sel.IDs) > 0 {
		return strings.Join(s.sel.IDs, ",")
	}
	if s.sel.Fraction == 0 {
		return ""
	}
	return strconv.FormatFloat(s.sel.Fraction, 'g', -1, 64)
}

func (s *selectorFlag) Type() string { return "ids|fraction" }

func (s *selectorFlag) Set(v string) error {
	sel, err := parseSelector(v)
	if err != nil {
		return err
	}
	s.sel = sel
	return nil
}

var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func parseSelector(v string) (messages.NodeSelector, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return messages.NodeSelector{}, errors.New("want node ids (n001,n007) or a fraction in [0, 1]")
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if !(f >= 0 && f <= 1) { // also rejects NaN
			return messages.NodeSelector{}, fmt.Errorf("fraction %s is not in [0, 1]", v)
		}
		return messages.NodeSelector{Fraction: f}, nil
	}
	ids := strings.Split(v, ",")
	for i, id := range ids {
		id = strings.TrimSpace(id)
		if id == "" {
			return messages.NodeSelector{}, fmt.Errorf("empty node id at position %d of the list", i+1)
		}
		if !nodeIDPattern.MatchString(id) {
			return messages.NodeSelector{}, fmt.Errorf("node id %q: want letters, digits, '_' or '-'", id)
		}
		ids[i] = id
	}
	return messages.NodeSelector{IDs: ids}, nil
}
