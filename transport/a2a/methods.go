package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/runindex"
	"github.com/conclave-ai/conclave/messages"
)

// ListTasks page sizes (as the reference server).
const (
	defaultPageSize = 50
	maxPageSize     = 100
)

// cancelWait bounds how long CancelTask waits for the run to end.
const cancelWait = 30 * time.Second

// call is one JSON-RPC call being served.
type call struct {
	h      *Handler
	w      http.ResponseWriter
	ctx    context.Context // the request's, cancelled with errShutdown by Shutdown
	tenant messages.TenantID
	id     json.RawMessage
	// streaming is set once the SSE response has begun: from then on
	// errors travel in-band.
	streaming bool
	// misdirected is the engine's error when another cluster node owns
	// the call's session: the call is answered 421 not_owner instead of a
	// JSON-RPC error, and the node's forwarder proxies it to the owner.
	misdirected error
	// traceParent is the request's W3C traceparent header.
	traceParent string
}

// task finds a task of the caller. Unknown ids, malformed ids and other
// tenants' tasks are all TaskNotFound.
func (c *call) task(id string) (messages.RunSummary, *RPCError) {
	run, err := messages.NewRunID(id)
	if err != nil {
		return messages.RunSummary{}, rpcErrorf(CodeTaskNotFound, "task %q not found", clip(id, 64))
	}
	sum, err := c.h.engine.Run(c.tenant, run)
	if err != nil {
		c.notOwner(err)
		return messages.RunSummary{}, rpcErrorf(CodeTaskNotFound, "task %q not found", id)
	}
	return sum, nil
}

// notOwner records err if it says another cluster node owns the session.
func (c *call) notOwner(err error) {
	if errors.Is(err, actors.ErrNotOwner) {
		c.misdirected = err
	}
}

// decodeSend decodes and checks SendMessage / SendStreamingMessage params.
func (c *call) decodeSend(params json.RawMessage) (*SendMessageRequest, *RPCError) {
	var req SendMessageRequest
	if rerr := c.decodeParams(params, &req); rerr != nil {
		return nil, rerr
	}
	if rerr := checkMessage(req.Message); rerr != nil {
		return nil, rerr
	}
	if cfg := req.Configuration; cfg != nil {
		if p := bytes.TrimSpace(cfg.TaskPushNotificationConfig); len(p) > 0 && string(p) != "null" {
			return nil, rpcErrorf(CodePushNotificationNotSupported, "push notifications are not supported")
		}
		if cfg.HistoryLength != nil && *cfg.HistoryLength < 0 {
			return nil, rpcErrorf(CodeInvalidParams, "configuration.historyLength must not be negative")
		}
	}
	return &req, nil
}

// start starts the run a new-task message asks for and follows it from
// before its first event.
func (c *call) start(msg *Message) (*follower, *RPCError) {
	cmd, rerr := startRunFrom(msg)
	if rerr != nil {
		return nil, rerr
	}
	cmd.Tenant, cmd.TraceParent = c.tenant, c.traceParent // the run's trace continues the caller's
	var after uint64                                      // every event of the run comes after the session's head of now
	if cmd.SessionID != "" {
		if head, err := c.h.engine.Head(c.ctx, c.tenant, cmd.SessionID); err == nil {
			after = head
		}
	}
	ref, err := c.h.engine.StartRun(c.ctx, cmd)
	c.notOwner(err)
	switch {
	case errors.Is(err, actors.ErrSessionNotFound):
		return nil, rpcErrorf(CodeInvalidParams, "message.contextId %q names another caller's context", cmd.SessionID)
	case err != nil:
		return nil, engineError(err)
	}
	sum, err := c.h.engine.Run(c.tenant, ref.RunID)
	if err != nil {
		return nil, engineError(err)
	}
	return c.follow(sum, after)
}

// resume answers the open interrupts of the task a message names (see
// resumesFrom for the message format). It returns the task's follower,
// folded up to now, and the ids of the interrupts it answered.
func (c *call) resume(msg *Message) (*follower, []string, *RPCError) {
	sum, rerr := c.task(msg.TaskID)
	if rerr != nil {
		return nil, nil, rerr
	}
	if msg.ContextID != "" && msg.ContextID != string(sum.SessionID) {
		return nil, nil, rpcErrorf(CodeInvalidParams, "message.contextId %q does not match task %s's contextId %q", clip(msg.ContextID, 64), sum.RunID, sum.SessionID)
	}
	if sum.Status.Terminal() {
		return nil, nil, rpcErrorf(CodeUnsupportedOperation, "task %s is in a terminal state (%s) and accepts no more messages", sum.RunID, summaryState(sum, false))
	}
	f, rerr := c.follow(sum, 0)
	if rerr != nil {
		return nil, nil, rerr
	}
	if rerr := c.foldToHead(f); rerr != nil {
		f.close()
		return nil, nil, rerr
	}
	st := f.proj.State()
	if st.Terminal() {
		f.close()
		return nil, nil, rpcErrorf(CodeUnsupportedOperation, "task %s is in a terminal state (%s) and accepts no more messages", sum.RunID, st)
	}
	open := f.proj.Open()
	if len(open) == 0 {
		f.close()
		return nil, nil, rpcErrorf(CodeUnsupportedOperation, "task %s is not waiting for input (%s): only a task in TASK_STATE_INPUT_REQUIRED takes a message", sum.RunID, st)
	}
	answers, rerr := resumesFrom(msg, string(sum.RunID), open)
	if rerr != nil {
		f.close()
		return nil, nil, rerr
	}
	ids := make([]string, 0, len(answers))
	for i, res := range answers {
		res.Tenant = c.tenant
		if _, err := c.h.engine.Resume(res); err != nil {
			f.close()
			rerr := resumeError(res.InterruptID, err)
			if i > 0 {
				rerr.Message += " (the answers before it were applied)"
			}
			return nil, nil, rerr
		}
		ids = append(ids, res.InterruptID)
	}
	return f, ids, nil
}

// resumeError maps the engine's resume errors.
func resumeError(id string, err error) *RPCError {
	var invalid *actors.InvalidResumeError
	switch {
	case errors.Is(err, actors.ErrInterruptNotFound):
		return rpcErrorf(CodeInvalidParams, "interrupt %q is no longer open", id)
	case errors.Is(err, actors.ErrInterruptResolved):
		return rpcErrorf(CodeInvalidParams, "interrupt %q was already answered, or cancelled with its run", id)
	case errors.Is(err, actors.ErrInterruptConflict):
		return rpcErrorf(CodeInvalidParams, "interrupt %q is being answered by another request", id)
	case errors.Is(err, actors.ErrInterruptExpired):
		return rpcErrorf(CodeInvalidParams, "interrupt %q expired; its timeout action was taken", id)
	case errors.As(err, &invalid):
		return rpcErrorf(CodeInvalidParams, "interrupt %q: %s", id, invalid.Reason)
	}
	return engineError(err)
}

// settled reports whether none of ids is open any more (or the task ended).
func settled(f *follower, ids []string) func() bool {
	return func() bool {
		if f.proj.State().Terminal() {
			return true
		}
		for _, id := range ids {
			if f.proj.IsOpen(id) {
				return false
			}
		}
		return true
	}
}

// sendMessage: SendMessage. Blocks until the task is terminal or waits for
// input, unless configuration.returnImmediately.
func (c *call) sendMessage(params json.RawMessage) (any, *RPCError) {
	req, rerr := c.decodeSend(params)
	if rerr != nil {
		return nil, rerr
	}
	now := req.Configuration != nil && req.Configuration.ReturnImmediately
	var f *follower
	if req.Message.TaskID == "" {
		if f, rerr = c.start(req.Message); rerr != nil {
			return nil, rerr
		}
		defer f.close()
		if now {
			rerr = c.foldToHead(f)
		}
	} else {
		var ids []string
		if f, ids, rerr = c.resume(req.Message); rerr != nil {
			return nil, rerr
		}
		defer f.close()
		if err := f.foldUntil(c.ctx, settled(f, ids)); err != nil {
			rerr = c.readError(err)
		}
	}
	if rerr == nil && !now {
		if err := f.foldUntil(c.ctx, f.proj.Final); err != nil {
			rerr = c.readError(err)
		}
	}
	if rerr != nil {
		return nil, rerr
	}
	return SendMessageResponse{Task: f.proj.Task()}, nil
}

// sendStreamingMessage: SendStreamingMessage. A new task streams from its
// submission; an answer streams from the moment its interrupts are
// settled.
func (c *call) sendStreamingMessage(params json.RawMessage) *RPCError {
	req, rerr := c.decodeSend(params)
	if rerr != nil {
		return rerr
	}
	if req.Message.TaskID == "" {
		f, rerr := c.start(req.Message)
		if rerr != nil {
			return rerr
		}
		defer f.close()
		c.stream(f, func() bool { return true })
		return nil
	}
	f, ids, rerr := c.resume(req.Message)
	if rerr != nil {
		return rerr
	}
	defer f.close()
	c.stream(f, settled(f, ids))
	return nil
}

// subscribeToTask: SubscribeToTask. The current Task, then its updates.
func (c *call) subscribeToTask(params json.RawMessage) *RPCError {
	var req SubscribeToTaskRequest
	if rerr := c.decodeParams(params, &req); rerr != nil {
		return rerr
	}
	sum, rerr := c.task(req.ID)
	if rerr != nil {
		return rerr
	}
	if sum.Status.Terminal() {
		return rpcErrorf(CodeUnsupportedOperation, "task %s is in a terminal state (%s) and cannot be subscribed to", sum.RunID, summaryState(sum, false))
	}
	f, rerr := c.follow(sum, 0)
	if rerr != nil {
		return rerr
	}
	defer f.close()
	head, err := c.h.engine.Head(c.ctx, c.tenant, sum.SessionID)
	if err != nil {
		return engineError(err)
	}
	c.stream(f, func() bool { return f.last >= head })
	return nil
}

// getTask: GetTask. The task with its status and artifacts (Conclave keeps
// no message history, so historyLength changes nothing).
func (c *call) getTask(params json.RawMessage) (any, *RPCError) {
	var req GetTaskRequest
	if rerr := c.decodeParams(params, &req); rerr != nil {
		return nil, rerr
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, rpcErrorf(CodeInvalidParams, "historyLength must not be negative")
	}
	sum, rerr := c.task(req.ID)
	if rerr != nil {
		return nil, rerr
	}
	return c.snapshot(sum)
}

// snapshot is the task folded from all its events so far.
func (c *call) snapshot(sum messages.RunSummary) (*Task, *RPCError) {
	f, rerr := c.follow(sum, 0)
	if rerr != nil {
		return nil, rerr
	}
	defer f.close()
	if rerr := c.foldToHead(f); rerr != nil {
		return nil, rerr
	}
	return f.proj.Task(), nil
}

// cancelTask: CancelTask. Aborts the run and waits (bounded) for its end.
func (c *call) cancelTask(params json.RawMessage) (any, *RPCError) {
	var req CancelTaskRequest
	if rerr := c.decodeParams(params, &req); rerr != nil {
		return nil, rerr
	}
	sum, rerr := c.task(req.ID)
	if rerr != nil {
		return nil, rerr
	}
	notCancelable := func(st TaskState) *RPCError {
		return rpcErrorf(CodeTaskNotCancelable, "task %s is in a terminal state (%s) and cannot be canceled", sum.RunID, st)
	}
	if sum.Status.Terminal() {
		return nil, notCancelable(summaryState(sum, false))
	}
	f, rerr := c.follow(sum, 0) // subscribed before the abort, so its end is seen
	if rerr != nil {
		return nil, rerr
	}
	defer f.close()
	err := c.h.engine.Abort(c.ctx, messages.AbortRun{Tenant: c.tenant, RunID: sum.RunID, Reason: "canceled by an A2A client"})
	if err != nil && !errors.Is(err, actors.ErrRunTerminal) {
		return nil, engineError(err)
	}
	ctx, cancel := context.WithTimeout(c.ctx, cancelWait)
	defer cancel()
	if ferr := f.foldUntil(ctx, func() bool { return f.proj.State().Terminal() }); ferr != nil {
		if c.ctx.Err() != nil || !errors.Is(ferr, context.DeadlineExceeded) {
			return nil, c.readError(ferr)
		}
		// Still stopping after cancelWait: report where it is.
	}
	if st := f.proj.State(); st.Terminal() && st != StateCanceled {
		return nil, notCancelable(st) // it ended by itself before the abort took effect
	}
	return f.proj.Task(), nil
}

// summaryState is the task state of a run summary, as the projector would
// have it: waiting says whether the run has open interrupts.
func summaryState(sum messages.RunSummary, waiting bool) TaskState {
	switch sum.Status {
	case messages.StatusFinished:
		return StateCompleted
	case messages.StatusAborted:
		return StateCanceled
	case messages.StatusFailed, messages.StatusInterrupted:
		return errorState(sum.ErrorCode)
	}
	if waiting {
		return StateInputRequired
	}
	return StateWorking
}

// listTasks: ListTasks. The caller's tasks, most recently updated first,
// filtered by contextId, status and statusTimestampAfter; the page token
// is the id of the last task of the previous page.
func (c *call) listTasks(params json.RawMessage) (any, *RPCError) {
	var req ListTasksRequest
	if rerr := c.decodeParams(params, &req); rerr != nil {
		return nil, rerr
	}
	size := int32(defaultPageSize)
	if req.PageSize != nil {
		if *req.PageSize < 1 || *req.PageSize > maxPageSize {
			return nil, rpcErrorf(CodeInvalidParams, "pageSize must be in 1..%d", maxPageSize)
		}
		size = *req.PageSize
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, rpcErrorf(CodeInvalidParams, "historyLength must not be negative")
	}
	want, ok := ParseTaskState(req.Status)
	if !ok {
		return nil, rpcErrorf(CodeInvalidParams, "status %q is not a task state", clip(req.Status, 64))
	}
	var since time.Time
	if req.StatusTimestampAfter != "" {
		t, err := time.Parse(time.RFC3339Nano, req.StatusTimestampAfter)
		if err != nil {
			return nil, rpcErrorf(CodeInvalidParams, "statusTimestampAfter must be an ISO 8601 timestamp such as 2026-01-02T15:04:05Z")
		}
		since = t
	}
	f := runindex.Filter{Tenant: c.tenant, Limit: 1000}
	if req.ContextID != "" {
		id, err := messages.NewSessionID(req.ContextID)
		if err != nil {
			return nil, rpcErrorf(CodeInvalidParams, "contextId: %v", err)
		}
		f.Session = id
	}
	type row struct {
		sum   messages.RunSummary
		state TaskState
	}
	var rows []row
	waiting := map[messages.SessionID]map[messages.RunID]bool{} // open interrupts per session, fetched once
	for {
		page, next, err := c.h.engine.Runs(c.ctx, f)
		if err != nil {
			return nil, engineError(err)
		}
		for _, sum := range page {
			w := false
			if !sum.Status.Terminal() {
				runs, ok := waiting[sum.SessionID]
				if !ok {
					runs = c.waitingRuns(sum.SessionID)
					waiting[sum.SessionID] = runs
				}
				w = runs[sum.RunID]
			}
			st := summaryState(sum, w)
			if (want != "" && st != want) || (!since.IsZero() && sum.UpdatedAt.Before(since)) {
				continue
			}
			rows = append(rows, row{sum, st})
		}
		if next == "" {
			break
		}
		f.After = next
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		if d := b.sum.UpdatedAt.Compare(a.sum.UpdatedAt); d != 0 {
			return d
		}
		return strings.Compare(string(b.sum.RunID), string(a.sum.RunID))
	})
	start := 0
	if req.PageToken != "" {
		i := slices.IndexFunc(rows, func(r row) bool { return string(r.sum.RunID) == req.PageToken })
		if i < 0 {
			return nil, rpcErrorf(CodeInvalidParams, "pageToken does not name a task of this listing")
		}
		start = i + 1
	}
	end := min(start+int(size), len(rows))
	resp := &ListTasksResponse{Tasks: []Task{}, PageSize: size, TotalSize: int32(len(rows))}
	for _, r := range rows[start:end] {
		if req.IncludeArtifacts {
			t, rerr := c.snapshot(r.sum)
			if rerr != nil {
				return nil, rerr
			}
			resp.Tasks = append(resp.Tasks, *t)
			continue
		}
		resp.Tasks = append(resp.Tasks, Task{ID: string(r.sum.RunID), ContextID: string(r.sum.SessionID),
			Status: TaskStatus{State: r.state, Timestamp: timestamp(r.sum.UpdatedAt)}, Metadata: taskMeta(r.sum.Question)})
	}
	if end < len(rows) {
		resp.NextPageToken = string(rows[end-1].sum.RunID)
	}
	return resp, nil
}

// waitingRuns lists the runs of a session that have open interrupts.
func (c *call) waitingRuns(session messages.SessionID) map[messages.RunID]bool {
	out := map[messages.RunID]bool{}
	after := ""
	for {
		list, next, err := c.h.engine.PendingInterrupts(c.ctx, c.tenant, session, after, 200)
		if err != nil {
			return out
		}
		for _, in := range list {
			out[in.RunID] = true
		}
		if next == "" {
			return out
		}
		after = next
	}
}
