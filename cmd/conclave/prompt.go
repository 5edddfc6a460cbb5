package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/dag"
	"github.com/conclave-ai/conclave/messages"
)

// This file is the human side of --hitl: the asker answers the run's
// interrupts at the terminal (or automatically with --auto-approve),
// reading the answers with a lineReader (linereader.go).

const (
	// recheckEvery bounds each wait for an answer, so that a prompt notices
	// soon when its interrupt stopped pending (its run ended, or it was
	// answered elsewhere).
	recheckEvery = time.Second
	// settleWait bounds the wait for events while the next interrupt is
	// not in the engine's registry yet: interrupt_raised is published just
	// before the raising actor registers it.
	settleWait = 20 * time.Millisecond
	// maxShown caps the bytes of tool arguments and answers echoed back.
	maxShown = 200
	// raiseSettle: a prompt waits until no interrupt of the run was raised
	// for this long, so that interrupts raised together (the node
	// approvals of a wave: its nodes start in parallel and raise in any
	// order) are all queued, and asked in order, before the first question.
	// maxRaiseSettle bounds that wait for an interrupt, should raises never
	// pause.
	raiseSettle    = 50 * time.Millisecond
	maxRaiseSettle = 500 * time.Millisecond
)

// Prompts end without an answer with these.
var (
	errTimedOut = errors.New("the interrupt expired")
	errGone     = errors.New("the interrupt is no longer pending")
)

// queued is an interrupt of the run that waits for an answer.
type queued struct {
	raised *messages.InterruptRaisedPayload
	agent  string
	at     time.Time // when its event arrived (asker.now)
}

// asker answers the interrupts of one run, one at a time. The follow loop
// owns it and calls it from its goroutine only: event for every event of
// the run, and answerNext between batches of events while waiting reports
// queued interrupts. While it prompts, nobody reads the subscription; the
// events wait there.
//
// Of the interrupts waiting, it asks first the plan, then those of the
// plan's nodes in plan order (n001 before n002, whichever raised first:
// parallel nodes raise in any order), then the others, each group in the
// order raised.
type asker struct {
	eng    *actors.Engine
	tenant messages.TenantID
	// action is what an expired approval decides (--approval-timeout-action).
	action messages.Decision
	// auto answers every interrupt at once (--auto-approve); in is unused.
	auto bool
	in   *lineReader
	// w receives the prompts and confirmations; aside is called before
	// writing a notice to it, so the output makes room (erases its status
	// block), and prompting before asking a question (the output leaves
	// its status block above it).
	w         *bufio.Writer
	aside     func() error
	prompting func(id string) error
	answered  func(id string) // the engine took an answer to interrupt id
	now       func() time.Time

	queue      []queued
	lastRaised time.Time         // when the latest interrupt_raised arrived
	goals      map[string]string // node id → goal, from the plan
	order      map[string]int    // node id → its index in the plan
	// told holds the interrupts whose timeout was reported already.
	told map[string]bool
}

// waiting reports whether interrupts wait for an answer.
func (a *asker) waiting() bool { return len(a.queue) > 0 }

// event follows one event of the run.
func (a *asker) event(env *messages.Envelope) {
	switch p := env.Payload.(type) {
	case *messages.PlanProposedPayload:
		a.setGoals(&p.Plan)
	case *messages.PlanApprovedPayload:
		if p.Plan != nil {
			a.setGoals(p.Plan)
		}
	case *messages.InterruptRaisedPayload:
		a.lastRaised = a.now()
		a.queue = append(a.queue, queued{raised: p, agent: env.AgentID, at: a.lastRaised})
	case *messages.InterruptResolvedPayload:
		a.drop(p.InterruptID)
	case *messages.InterruptExpiredPayload:
		if q, ok := a.drop(p.InterruptID); ok && !a.told[p.InterruptID] {
			// It expired before its turn came (another prompt was open).
			_ = a.aside()
			a.timedOut(q)
			_ = a.w.Flush() // a write error shows at the output's next flush
		}
	}
}

func (a *asker) setGoals(p *messages.Plan) {
	a.goals = make(map[string]string, len(p.Nodes))
	a.order = make(map[string]int, len(p.Nodes))
	for i, n := range p.Nodes {
		a.goals[n.ID] = n.Goal
		a.order[n.ID] = i
	}
}

// rank orders the queue (see asker): the plan approval, then interrupts of
// the plan's nodes by the node's place in the plan, then the rest.
func (a *asker) rank(q queued) int {
	const rest = math.MaxInt
	if q.raised.Kind == messages.InterruptPlanApproval {
		return -1
	}
	node := q.raised.NodeID
	if node == "" {
		// A node's own interrupt (a tool approval, a question) is raised by
		// its agent: "n001", or "n001/sub1" for its sub-agents.
		node, _, _ = strings.Cut(q.agent, "/")
	}
	if i, ok := a.order[node]; ok {
		return i
	}
	return rest
}

// next is the index in the queue of the interrupt to ask first.
func (a *asker) next() int {
	best := 0
	for i, q := range a.queue {
		if a.rank(q) < a.rank(a.queue[best]) {
			best = i
		}
	}
	return best
}

func (a *asker) drop(id string) (queued, bool) {
	for i, q := range a.queue {
		if q.raised.InterruptID == id {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			return q, true
		}
	}
	return queued{}, false
}

// answerNext answers the first queued interrupt (see asker for the
// order). It reports false when it is too early to ask (an interrupt was
// raised less than raiseSettle ago: more may follow) or the interrupt is
// not in the engine's registry: not registered yet, or ended already.
// Either way the next events settle it (the registration follows the
// event at once; an ended interrupt's event removes it from the queue), so
// the caller reads events for a moment and calls again. It returns ctx's
// error when ctx ends during a prompt.
func (a *asker) answerNext(ctx context.Context) (bool, error) {
	i := a.next()
	q := a.queue[i]
	if now := a.now(); now.Sub(a.lastRaised) < raiseSettle && now.Sub(q.at) < maxRaiseSettle {
		return false, nil
	}
	it, ok := a.eng.Interrupt(a.tenant, q.raised.InterruptID)
	if !ok {
		return false, nil
	}
	a.queue = slices.Delete(a.queue, i, i+1)
	switch it.Status {
	case messages.InterruptPending:
	case messages.InterruptTimedOut:
		if err := a.aside(); err != nil {
			return true, err
		}
		a.timedOut(q)
		return true, a.w.Flush()
	default: // someone else's answer is being applied; its event follows
		return true, nil
	}
	var err error
	if a.auto {
		if err = a.aside(); err == nil {
			err = a.answerAuto(q)
		}
	} else if err = a.prompting(q.raised.InterruptID); err == nil {
		err = a.prompt(ctx, q, it.ExpiresAt)
	}
	if ferr := a.w.Flush(); err == nil {
		err = ferr
	}
	return true, err
}

// answerAuto approves q (answers "ok" to a question, declines a choice)
// and says so.
func (a *asker) answerAuto(q queued) error {
	res := messages.Resume{Decision: messages.DecisionApprove}
	switch q.raised.Kind {
	case messages.InterruptInfoRequest:
		res = messages.Resume{Response: "ok"}
	case messages.InterruptChoice:
		// Auto-approval never picks an option for a human: it declines.
		res = messages.Resume{Decision: messages.DecisionReject, Feedback: "auto-approval picks no option"}
	}
	return a.resume(q, res, "auto-")
}

// prompt shows q and asks until it has an answer the engine takes, the
// interrupt expires or ends, or ctx ends.
func (a *asker) prompt(ctx context.Context, q queued, expires time.Time) error {
	a.describe(q, expires)
	for {
		res, err := a.question(ctx, q, expires)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			a.w.WriteString("\n")
			return ctx.Err()
		case errors.Is(err, errGone):
			a.w.WriteString("\nno longer waiting: answered elsewhere, or the run stopped\n")
			return nil
		case errors.Is(err, errTimedOut):
			a.w.WriteString("\n")
			a.timedOut(q)
			return nil
		default: // the input ended (or failed): nobody will answer
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(a.w, "\nreading the answer: %v", err)
			}
			a.w.WriteString("\n")
			if !a.now().Before(expires) {
				a.timedOut(q)
				return nil
			}
			return a.resume(q, noInput(q.raised.Kind), "")
		}
		err = a.resume(q, res, "")
		var invalid *actors.InvalidResumeError
		if !errors.As(err, &invalid) {
			return err
		}
		fmt.Fprintf(a.w, "the engine refused that answer: %s\n", invalid.Reason)
	}
}

// resume sends res and reports the outcome in one line; prefix says how
// the answer came about ("auto-"). It returns an
// *actors.InvalidResumeError unreported, so that the caller asks again.
func (a *asker) resume(q queued, res messages.Resume, prefix string) error {
	res.Tenant, res.InterruptID = a.tenant, q.raised.InterruptID
	_, err := a.eng.Resume(res)
	var invalid *actors.InvalidResumeError
	switch {
	case err == nil:
		a.answered(q.raised.InterruptID)
		fmt.Fprintf(a.w, "%s\n", confirmation(q, res, prefix))
	case errors.As(err, &invalid):
		return err
	case errors.Is(err, actors.ErrInterruptExpired):
		a.timedOut(q)
	case errors.Is(err, actors.ErrInterruptConflict), errors.Is(err, actors.ErrInterruptNotFound):
		a.w.WriteString("someone else answered first (or the run stopped); your answer was not used\n")
	default:
		return fmt.Errorf("resume interrupt %s: %w", q.raised.InterruptID, err)
	}
	return nil
}

// timedOut reports that q expired and what the engine did instead.
func (a *asker) timedOut(q queued) {
	a.told[q.raised.InterruptID] = true
	switch q.raised.Kind {
	case messages.InterruptInfoRequest:
		a.w.WriteString("question timed out: no answer\n")
		return
	case messages.InterruptChoice:
		a.w.WriteString("choice timed out: nothing chosen\n")
		return
	}
	fmt.Fprintf(a.w, "approval timed out: %s\n", a.action)
}

// noInput is the answer when stdin has ended: reject (a choice is
// declined: nothing is chosen), or for a question (which cannot be
// rejected) the response "no input".
func noInput(kind messages.InterruptKind) messages.Resume {
	switch kind {
	case messages.InterruptInfoRequest:
		return messages.Resume{Response: "no input"}
	case messages.InterruptPlanApproval:
		return messages.Resume{Decision: messages.DecisionReject, Reason: "no input"}
	}
	return messages.Resume{Decision: messages.DecisionReject, Feedback: "no input"}
}

// describe shows what q asks for and until when.
func (a *asker) describe(q queued, expires time.Time) {
	p := q.raised
	left := max(0, expires.Sub(a.now())).Round(time.Second)
	deadline := fmt.Sprintf("answer within %s, or it is %s", left, past(a.action))
	switch p.Kind {
	case messages.InterruptToolApproval:
		fmt.Fprintf(a.w, "%s wants to run %s %s (%s)\n", q.agent, p.ToolName, shorten(string(p.ToolArgs)), deadline)
	case messages.InterruptInfoRequest:
		fmt.Fprintf(a.w, "%s asks: %s\n", q.agent, p.Question)
		if p.ContextSnippet != "" {
			fmt.Fprintf(a.w, "  context: %s\n", shorten(p.ContextSnippet))
		}
		fmt.Fprintf(a.w, "  (answer within %s)\n", left)
	case messages.InterruptChoice:
		fmt.Fprintf(a.w, "%s asks you to choose: %s\n", q.agent, p.Question)
		if p.ContextSnippet != "" {
			fmt.Fprintf(a.w, "  context: %s\n", shorten(p.ContextSnippet))
		}
		writeChoiceOptions(a.w, p)
		fmt.Fprintf(a.w, "  (answer within %s, or nothing is chosen)\n", left)
	case messages.InterruptPlanApproval:
		if p.Plan == nil {
			fmt.Fprintf(a.w, "the plan needs your approval (%s)\n", deadline)
			break
		}
		waves := dag.Waves(*p.Plan)
		fmt.Fprintf(a.w, "the plan needs your approval: %s (%s)\n", nodesInWaves(len(p.Plan.Nodes), len(waves)), deadline)
		const maxWaves, maxIDs = 10, 12
		for w, ids := range waves[:min(len(waves), maxWaves)] {
			more := ""
			if len(ids) > maxIDs {
				ids, more = ids[:maxIDs], fmt.Sprintf(" … (+%d)", len(ids)-maxIDs)
			}
			fmt.Fprintf(a.w, "  wave %d: %s%s\n", w, strings.Join(ids, " "), more)
		}
		if len(waves) > maxWaves {
			fmt.Fprintf(a.w, "  … %d more waves\n", len(waves)-maxWaves)
		}
	case messages.InterruptNodeApproval:
		goal := ""
		if g := a.goals[p.NodeID]; g != "" {
			goal = ": " + shorten(g)
		}
		fmt.Fprintf(a.w, "node %s is ready to start%s (%s)\n", p.NodeID, goal, deadline)
	case messages.InterruptSpawnApproval:
		fmt.Fprintf(a.w, "node %s asks for a sub-team: %s, roles %s (%s)\n", p.NodeID, shorten(p.Goal), strings.Join(p.SuggestedRoles, ", "), deadline)
	default:
		fmt.Fprintf(a.w, "%s asks for a %s (%s)\n", q.agent, p.Kind, deadline)
	}
}

// question asks what q needs and returns the answer as a resume.
func (a *asker) question(ctx context.Context, q queued, expires time.Time) (messages.Resume, error) {
	ask := func(prompt string) (string, error) { return a.ask(ctx, q.raised.InterruptID, prompt, expires) }
	switch q.raised.Kind {
	case messages.InterruptInfoRequest:
		for {
			s, err := ask("answer? ")
			if err != nil || s != "" {
				return messages.Resume{Response: s}, err
			}
		}
	case messages.InterruptChoice:
		for {
			s, err := ask(choicePrompt(q.raised))
			if err != nil {
				return messages.Resume{}, err
			}
			if res, ok := choiceAnswer(q.raised, s); ok {
				if res.Decision == messages.DecisionReject {
					res.Feedback, err = ask("feedback for the agent (optional)? ")
				}
				return res, err
			}
			if s != "" {
				fmt.Fprintf(a.w, "please answer with option numbers, ids or labels, or r\n")
			}
		}
	case messages.InterruptToolApproval:
		for {
			s, err := ask("[a]pprove, [r]eject, [e]dit args? ")
			if err != nil {
				return messages.Resume{}, err
			}
			switch choice(s, "approve", "reject", "edit") {
			case "approve":
				return messages.Resume{Decision: messages.DecisionApprove}, nil
			case "reject":
				fb, err := ask("feedback for the agent (optional)? ")
				return messages.Resume{Decision: messages.DecisionReject, Feedback: fb}, err
			case "edit":
				args, err := a.editArgs(ask)
				if err != nil || args != nil {
					return messages.Resume{Decision: messages.DecisionRevise, EditedArgs: args}, err
				}
			default:
				if s != "" {
					a.w.WriteString("please answer a (or y), r (or n) or e\n")
				}
			}
		}
	case messages.InterruptPlanApproval:
		for {
			s, err := ask("[a]pprove, [r]eject, [e]dit plan? ")
			if err != nil {
				return messages.Resume{}, err
			}
			switch choice(s, "approve", "reject", "edit") {
			case "approve":
				return messages.Resume{Decision: messages.DecisionApprove}, nil
			case "reject":
				reason, err := ask("reason? ")
				if reason == "" {
					reason = "rejected at the prompt"
				}
				return messages.Resume{Decision: messages.DecisionReject, Reason: reason}, err
			case "edit":
				plan, err := a.editPlan(ask)
				if err != nil || plan != nil {
					return messages.Resume{Decision: messages.DecisionRevise, Plan: plan}, err
				}
			default:
				if s != "" {
					a.w.WriteString("please answer a (or y), r (or n) or e\n")
				}
			}
		}
	default: // node_approval, spawn_approval
		for {
			s, err := ask("[a]pprove, [r]eject? ")
			if err != nil {
				return messages.Resume{}, err
			}
			switch choice(s, "approve", "reject") {
			case "approve":
				return messages.Resume{Decision: messages.DecisionApprove}, nil
			case "reject":
				return messages.Resume{Decision: messages.DecisionReject}, nil
			default:
				if s != "" {
					a.w.WriteString("please answer a (or y) or r (or n)\n")
				}
			}
		}
	}
}

// editArgs reads the replacement arguments of a tool call: one JSON
// object on one line. An empty line goes back (nil, nil).
func (a *asker) editArgs(ask func(string) (string, error)) (json.RawMessage, error) {
	for {
		s, err := ask("new args, one JSON object on one line (empty: back)? ")
		if err != nil || s == "" {
			return nil, err
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &obj); err != nil || obj == nil {
			if err == nil {
				err = errors.New("null")
			}
			fmt.Fprintf(a.w, "not a JSON object (%v); try again\n", err)
			continue
		}
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(s)); err != nil { // cannot fail after Unmarshal
			return nil, err
		}
		return b.Bytes(), nil
	}
}

// editPlan reads the path of a JSON plan file and decodes it; the engine
// validates the graph. An empty line goes back (nil, nil).
func (a *asker) editPlan(ask func(string) (string, error)) (*messages.Plan, error) {
	for {
		path, err := ask("path of the edited plan, a JSON file (empty: back)? ")
		if err != nil || path == "" {
			return nil, err
		}
		plan, err := readPlan(path)
		if err != nil {
			fmt.Fprintf(a.w, "%v; try again\n", err)
			continue
		}
		return &plan, nil
	}
}

// readPlan strictly decodes a messages.Plan from a file.
func readPlan(path string) (messages.Plan, error) {
	var p messages.Plan
	b, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	if err := messages.DecodeStrict(b, &p); err != nil {
		return p, fmt.Errorf("%s: not a plan: %w", path, err)
	}
	if len(p.Nodes) == 0 {
		return p, fmt.Errorf("%s: the plan has no nodes", path)
	}
	return p, nil
}

// ask writes prompt and returns the next line typed, trimmed. It gives up
// with errTimedOut once expires has passed, with errGone when the
// interrupt id stops pending, and with ctx's error when ctx ends (which
// cancels the read in progress: see lineReader.cancel). At the end of the
// input it returns io.EOF.
func (a *asker) ask(ctx context.Context, id, prompt string, expires time.Time) (string, error) {
	a.w.WriteString(prompt)
	if err := a.w.Flush(); err != nil {
		return "", err
	}
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		now := a.now()
		if !now.Before(expires) {
			return "", errTimedOut
		}
		switch it, ok := a.eng.Interrupt(a.tenant, id); {
		case ok && it.Status == messages.InterruptTimedOut:
			return "", errTimedOut
		case !ok || it.Status != messages.InterruptPending:
			return "", errGone
		}
		deadline := now.Add(recheckEvery)
		if expires.Before(deadline) {
			deadline = expires
		}
		line, err := a.in.line(deadline)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue // a deadline of ours: check again, then read on
		}
		if err == nil && !a.in.terminal() {
			// Nobody typed it: show it, so the transcript reads well.
			a.w.WriteString(line + "\n")
		}
		return strings.TrimSpace(line), err
	}
}

// choice returns the option s names, by its first letter or in full
// (case-insensitive), or "". y and yes name approve, n and no reject.
func choice(s string, options ...string) string {
	s = strings.ToLower(s)
	switch s {
	case "y", "yes":
		s = "approve"
	case "n", "no":
		s = "reject"
	}
	for _, o := range options {
		if s == o || s == o[:1] {
			return o
		}
	}
	return ""
}

// confirmation is the line that reports an accepted answer.
func confirmation(q queued, res messages.Resume, prefix string) string {
	p := q.raised
	mark := "✓"
	if res.Decision == messages.DecisionReject {
		mark = "✗"
	}
	verb := prefix + past(res.Decision)
	why := func(s string) string {
		if s == "" {
			return ""
		}
		return ": " + s
	}
	switch p.Kind {
	case messages.InterruptToolApproval:
		switch res.Decision {
		case messages.DecisionRevise:
			return fmt.Sprintf("%s %s %s %s", mark, verb, p.ToolName, shorten(string(res.EditedArgs)))
		case messages.DecisionReject:
			return fmt.Sprintf("%s %s %s%s", mark, verb, p.ToolName, why(res.Feedback))
		}
		return fmt.Sprintf("%s %s %s %s", mark, verb, p.ToolName, shorten(string(p.ToolArgs)))
	case messages.InterruptInfoRequest:
		return fmt.Sprintf("%s %sanswered %s: %s", mark, prefix, q.agent, shorten(res.Response))
	case messages.InterruptChoice:
		if res.Decision == messages.DecisionReject {
			return fmt.Sprintf("%s %sdeclined the choice of %s%s", mark, prefix, q.agent, why(res.Feedback))
		}
		return fmt.Sprintf("%s %schose for %s: %s", mark, prefix, q.agent, shorten(chosenLabels(p, res.Choices)))
	case messages.InterruptPlanApproval:
		if res.Decision == messages.DecisionRevise {
			return fmt.Sprintf("%s %s the plan: %s", mark, verb, nodesInWaves(len(res.Plan.Nodes), len(dag.Waves(*res.Plan))))
		}
		return fmt.Sprintf("%s %s the plan%s", mark, verb, why(res.Reason))
	case messages.InterruptNodeApproval:
		return fmt.Sprintf("%s %s node %s%s", mark, verb, p.NodeID, why(res.Feedback))
	}
	return fmt.Sprintf("%s %s the %s of %s", mark, verb, p.Kind, q.agent)
}

// past is a decision as a verb in the past tense.
func past(d messages.Decision) string {
	switch d {
	case messages.DecisionApprove:
		return "approved"
	case messages.DecisionReject:
		return "rejected"
	case messages.DecisionRevise:
		return "approved with edits"
	}
	return string(d)
}

// shorten cuts s to maxShown bytes (on a rune boundary) for display.
func shorten(s string) string {
	if len(s) <= maxShown {
		return s
	}
	cut := maxShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
