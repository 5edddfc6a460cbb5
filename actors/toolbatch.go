package actors

import (
	"strconv"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// toolBatch is the tool calls of an agent's last turn on their way to
// results: the calls with their lane-unique ids, the next of them to run,
// their results, and the working calls (a sub-agent, a tool, a consult
// answers them later), whose results the agent publishes in call order
// (agentActor.callAnswered). The agent alone touches it; a turn that
// calls tools resets it (reset), and the next turn takes the calls and
// results into its history.
type toolBatch struct {
	calls   []model.ToolCall   // the calls of the last turn
	next    int                // the next of them to run
	results []model.ToolResult // their results
	callIDs []string           // their lane-unique ids
	began   []time.Time        // when each started running (zero: it did not run)
	waiting int                // calls still working: sub-agents and tools
	// working are the working calls of the turn not published yet, in call
	// order, and answers their results as they come.
	working []int
	answers map[int]answer
}

// answer is a working call's result, until its turn to be published.
type answer struct {
	out     string
	err     error
	sources []model.Source         // a tool's, numbered as the result is published
	files   []messages.FilePayload // a tool's, published right before its result
	at      time.Time              // when a tool's result came back: its sources' first_seen_at
}

// reset makes calls, a turn's, the batch: none run yet, each with an
// empty result and its lane-unique id (the attempt is appended after a
// restart), and its arguments as the agent publishes them (callArgs).
func (b *toolBatch) reset(calls []model.ToolCall, attempt int) {
	b.calls, b.next = calls, 0
	b.results = make([]model.ToolResult, len(calls))
	b.callIDs = make([]string, len(calls))
	b.began = make([]time.Time, len(calls))
	for i, c := range calls {
		id := c.ID
		if attempt > 1 {
			id += "#" + strconv.Itoa(attempt) // keep call ids unique on the lane across restarts
		}
		b.callIDs[i] = id
		b.results[i] = model.ToolResult{CallID: c.ID, Name: c.Name}
		b.calls[i].Args = callArgs(c.Args)
	}
}

// startWorking marks call i as working from now: a sub-agent or a tool
// answers it later (answer).
func (b *toolBatch) startWorking(now time.Time, i int) {
	b.began[i] = now
	b.waiting++
	b.working = append(b.working, i)
}

// answer takes the result of working call i.
func (b *toolBatch) answer(i int, r answer) {
	if b.answers == nil {
		b.answers = map[int]answer{}
	}
	b.answers[i] = r
}

// ready takes the first working call's result, if it came: results leave
// in call order, a fast call's after the slower calls before it.
func (b *toolBatch) ready() (int, answer, bool) {
	if len(b.working) == 0 {
		return 0, answer{}, false
	}
	k := b.working[0]
	r, ok := b.answers[k]
	if !ok {
		return 0, answer{}, false
	}
	delete(b.answers, k)
	b.working = b.working[1:]
	b.waiting--
	return k, r, true
}

// idle reports whether every call of the batch ran and none is working.
func (b *toolBatch) idle() bool { return b.waiting == 0 && b.next == len(b.calls) }
