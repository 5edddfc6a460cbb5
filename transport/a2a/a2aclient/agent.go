package a2aclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/remote"
	"github.com/conclave-ai/conclave/transport/a2a"
)

// Agent follows tasks of one remote agent for council nodes: it
// implements remote.Agent.
type Agent struct {
	name string
	c    *Client
}

var _ remote.Agent = (*Agent)(nil)

// NewAgent returns the agent registered as name, reached through c.
func NewAgent(name string, c *Client) *Agent { return &Agent{name: name, c: c} }

// Cancel cancels task id; a task already in a terminal state is not an error.
func (a *Agent) Cancel(ctx context.Context, id string) error {
	_, err := a.c.CancelTask(ctx, id)
	var rerr *a2a.RPCError
	if errors.As(err, &rerr) && rerr.Code == a2a.CodeTaskNotCancelable {
		return nil
	}
	return err
}

// Run makes the call req and follows its task (remote.Agent). A stream
// that drops (an error, an idle stream, or an end before the task is
// terminal or waits for input) is followed again with SubscribeToTask, up
// to Config.Retries times in a row with a growing backoff; a task that
// ended meanwhile (SubscribeToTask refuses a terminal task) is read with
// GetTask.
func (a *Agent) Run(ctx context.Context, req remote.Request, emit func(messages.Payload) error) (remote.Result, error) {
	f := &follower{agent: a.name, emit: emit, taskID: req.TaskID, contextID: req.ContextID, max: a.c.cfg.MaxOutputBytes}
	var st *Stream
	var err error
	if req.Resubscribe {
		st, err = a.c.SubscribeToTask(ctx, req.TaskID)
	} else {
		msg := &a2a.Message{MessageID: a.c.cfg.NewID(), Role: a2a.RoleUser, TaskID: req.TaskID, ContextID: req.ContextID,
			Parts: []a2a.Part{a2a.TextPart(req.Text)}}
		st, err = a.c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg})
		if err != nil && !dropped(err) {
			return remote.Result{}, err // refused: sending it again would not help
		}
	}
	backoff, failures := a.c.cfg.Backoff, 0
	for {
		if err == nil {
			var n int
			n, err = f.follow(st)
			st.Close()
			if n > 0 { // the stream got somewhere: a later drop starts counting again
				failures, backoff = 0, a.c.cfg.Backoff
			}
			if f.done {
				return f.result, nil
			}
			if err == nil {
				err = errors.New("the stream ended before the task did")
			} else if !dropped(err) {
				return remote.Result{}, err
			}
		}
		if ctx.Err() != nil {
			return remote.Result{}, ctx.Err()
		}
		if f.taskID == "" {
			return remote.Result{}, fmt.Errorf("a2aclient: %s: the stream dropped before the remote named the task: %w", a.name, err)
		}
		var rerr *a2a.RPCError
		if errors.As(err, &rerr) && (rerr.Code == a2a.CodeUnsupportedOperation || rerr.Code == a2a.CodeTaskNotFound && req.Resubscribe) {
			return a.fromTask(ctx, f) // terminal (or gone): its final state
		}
		if failures >= a.c.cfg.Retries {
			return remote.Result{}, fmt.Errorf("a2aclient: %s: task %s: the stream dropped %d times: %w", a.name, f.taskID, failures+1, err)
		}
		failures++
		if err := a.c.cfg.Sleep(ctx, backoff); err != nil {
			return remote.Result{}, err
		}
		backoff = min(backoff*2, a.c.cfg.MaxBackoff)
		st, err = a.c.SubscribeToTask(ctx, f.taskID)
	}
}

// fromTask ends a run from the task's current state (GetTask).
func (a *Agent) fromTask(ctx context.Context, f *follower) (remote.Result, error) {
	t, err := a.c.GetTask(ctx, f.taskID)
	if err != nil {
		return remote.Result{}, err
	}
	if err := f.apply(&a2a.StreamResponse{Task: t}); err != nil {
		return remote.Result{}, err
	}
	if !f.done {
		return remote.Result{}, fmt.Errorf("a2aclient: %s: task %s is %s but cannot be followed", a.name, f.taskID, t.Status.State)
	}
	return f.result, nil
}

// dropped reports whether err is a failure of the connection or stream,
// worth subscribing again after, rather than the remote's answer.
func dropped(err error) bool {
	var rerr *a2a.RPCError
	switch {
	case errors.As(err, &rerr):
		return rerr.Code == a2a.CodeUnsupportedOperation || rerr.Code == a2a.CodeInternal || rerr.Code == a2a.CodeQuotaExceeded
	case errors.Is(err, context.Canceled), errors.Is(err, ErrBadCard), errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrTooLarge):
		return false
	}
	return true
}

// follower folds a task's frames into the node lane's events and the
// call's result.
type follower struct {
	agent     string
	emit      func(messages.Payload) error
	taskID    string
	contextID string
	announced bool // the RemoteTaskPayload with the id was emitted
	state     a2a.TaskState
	order     []string          // artifact ids, first seen first
	texts     map[string]string // each artifact's text as the remote has it
	shown     map[string]string // what of it the lane has (text_delta)
	size      int
	max       int
	done      bool
	result    remote.Result
}

// follow applies st's frames until the task ends, waits for input, or
// the stream ends (nil) or fails; n counts the frames that changed
// something (a snapshot that repeats what was known does not).
func (f *follower) follow(st *Stream) (n int, err error) {
	for !f.done {
		fr, err := st.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if fr.Task == nil {
			n++
		}
		if err := f.apply(fr); err != nil {
			return n, err
		}
	}
	return n, nil
}

// apply folds one frame.
func (f *follower) apply(fr *a2a.StreamResponse) error {
	switch {
	case fr.Task != nil:
		t := fr.Task
		if err := f.ids(t.ID, t.ContextID, t.Status.State); err != nil {
			return err
		}
		for _, art := range t.Artifacts { // a snapshot: what the lane lacks of each
			if err := f.artifact(art, false); err != nil {
				return err
			}
		}
		return f.status(t.Status, true)
	case fr.StatusUpdate != nil:
		u := fr.StatusUpdate
		if err := f.ids(u.TaskID, u.ContextID, u.Status.State); err != nil {
			return err
		}
		return f.status(u.Status, false)
	case fr.ArtifactUpdate != nil:
		u := fr.ArtifactUpdate
		if err := f.ids(u.TaskID, u.ContextID, workingIfUnset(f.state)); err != nil {
			return err
		}
		return f.artifact(u.Artifact, u.Append)
	case fr.Message != nil: // a direct answer, no task
		f.done = true
		f.result = remote.Result{TaskID: f.taskID, ContextID: f.contextID, Outcome: remote.Completed, Output: partsText(fr.Message.Parts)}
	}
	return nil
}

// workingIfUnset is s, or WORKING before any state is known.
func workingIfUnset(s a2a.TaskState) a2a.TaskState {
	if s == "" {
		return a2a.StateWorking
	}
	return s
}

// ids checks a frame's task id and announces the task on its first frame.
func (f *follower) ids(taskID, contextID string, state a2a.TaskState) error {
	if taskID == "" {
		return fmt.Errorf("%w: a frame without a taskId", ErrProtocol)
	}
	if f.taskID != "" && taskID != f.taskID {
		return fmt.Errorf("%w: a frame of task %q on the stream of task %q", ErrProtocol, taskID, f.taskID)
	}
	f.taskID = taskID
	if contextID != "" {
		f.contextID = contextID
	}
	if f.announced {
		return nil
	}
	f.announced, f.state = true, state
	return f.emit(&messages.RemoteTaskPayload{Agent: f.agent, TaskID: f.taskID, ContextID: f.contextID, State: string(state)})
}

// artifact takes an artifact (chunk): its new text goes to the lane.
func (f *follower) artifact(art a2a.Artifact, appendTo bool) error {
	if f.texts == nil {
		f.texts, f.shown = map[string]string{}, map[string]string{}
	}
	id, text := art.ArtifactID, partsText(art.Parts)
	old, seen := f.texts[id]
	if !seen {
		f.order = append(f.order, id)
	}
	if appendTo {
		text = old + text
	}
	if f.size += len(text) - len(old); f.size > f.max {
		return fmt.Errorf("a2aclient: %s: task %s: its artifacts passed %d bytes", f.agent, f.taskID, f.max)
	}
	f.texts[id] = text
	// Only what extends what the lane shows is new: a snapshot after a
	// re-subscription repeats the chunks seen before, and a replacing
	// chunk (the final text) usually repeats them too.
	if sh := f.shown[id]; len(text) > len(sh) && strings.HasPrefix(text, sh) {
		f.shown[id] = text
		return f.emit(&messages.TextDeltaPayload{Delta: text[len(sh):]})
	}
	return nil
}

// status takes a status: reported on the lane when it says something or
// changes the state; a terminal or interrupted one ends the call.
func (f *follower) status(s a2a.TaskStatus, snapshot bool) error {
	var text string
	if s.Message != nil {
		text = partsText(s.Message.Parts)
	}
	if s.State != f.state || (text != "" && !snapshot) {
		f.state = s.State
		if err := f.emit(&messages.RemoteTaskPayload{Agent: f.agent, TaskID: f.taskID, ContextID: f.contextID, State: string(s.State), Message: text}); err != nil {
			return err
		}
	}
	r := remote.Result{TaskID: f.taskID, ContextID: f.contextID}
	switch s.State {
	case a2a.StateCompleted:
		r.Outcome, r.Output = remote.Completed, text
		if r.Output == "" {
			r.Output = f.output()
		}
	case a2a.StateFailed, a2a.StateRejected, a2a.StateCanceled:
		r.Outcome, r.Reason = remote.Failed, string(s.State)
		if text != "" {
			r.Reason += ": " + text
		}
	case a2a.StateAuthRequired:
		r.Outcome, r.Reason = remote.Failed, string(s.State)+": the remote asks for authentication Conclave cannot give"
	case a2a.StateInputRequired:
		r.Outcome, r.Input = remote.InputRequired, input(s.Message, text)
	default:
		return nil
	}
	f.done, f.result = true, r
	return nil
}

// output is the task's artifacts' text, in the order they appeared.
func (f *follower) output() string {
	parts := make([]string, 0, len(f.order))
	for _, id := range f.order {
		if t := f.texts[id]; t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n\n")
}

// input reads an INPUT_REQUIRED status message: a tool approval when a
// data part says so (Conclave's InterruptData, reason tool_approval), else
// a question, the message's text.
func input(m *a2a.Message, text string) *remote.Input {
	in := &remote.Input{Kind: messages.InterruptInfoRequest, Question: text}
	if m == nil {
		return in
	}
	for _, p := range m.Parts {
		if p.Data == nil {
			continue
		}
		var d a2a.InterruptData
		if json.Unmarshal(p.Data, &d) != nil {
			continue
		}
		switch messages.InterruptKind(d.Reason) {
		case messages.InterruptToolApproval:
			in.Kind, in.ToolName, in.ToolArgs = messages.InterruptToolApproval, d.ToolName, d.ToolArgs
			return in
		case messages.InterruptInfoRequest:
			if d.Question != "" {
				in.Question = d.Question
			}
			return in
		}
	}
	if in.Question == "" {
		in.Question = "The remote agent needs input."
	}
	return in
}

// partsText joins a message's or artifact's text parts, and the compact
// JSON of its data parts.
func partsText(parts []a2a.Part) string {
	var b strings.Builder
	for _, p := range parts {
		switch {
		case p.Text != nil:
			b.WriteString(*p.Text)
		case p.Data != nil && len(parts) == 1:
			b.Write(p.Data)
		}
	}
	return b.String()
}
