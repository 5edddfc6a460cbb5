package delegation

import (
	"errors"
	"fmt"
	"slices"

	"github.com/conclave-ai/conclave/model"
)

// Async task statuses, as check_async_task and list_async_tasks report them
// (model.AsyncTask.Status).
const (
	StatusPending   = "pending"
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// Ended reports whether status is terminal: completed, failed or cancelled.
func Ended(status string) bool {
	return status == StatusCompleted || status == StatusFailed || status == StatusCancelled
}

// Errors of AsyncTasks.
var (
	ErrUnknownTask   = errors.New("delegation: unknown async task")
	ErrTaskEnded     = errors.New("delegation: async task has ended")
	ErrDuplicateTask = errors.New("delegation: async task id already used")
)

// AsyncTasks is a supervisor's table of its async tasks (start_async_task
// and friends). Transitions:
//
//	pending → running → completed | failed
//	pending → completed | failed     (a task may end before it runs)
//	pending | running → cancelled
//
// A terminal task never changes again: a late Finish of a cancelled task is
// ErrTaskEnded and the task stays cancelled.
//
// AsyncTasks is not safe for concurrent use: it belongs to the actor that
// runs the supervising agent. The zero value is an empty table.
type AsyncTasks struct {
	tasks []model.AsyncTask // in start order
}

// find returns the index of task id, or -1.
func (a *AsyncTasks) find(id string) int {
	return slices.IndexFunc(a.tasks, func(t model.AsyncTask) bool { return t.ID == id })
}

// live returns the index of task id if it has not ended: ErrUnknownTask or
// ErrTaskEnded otherwise.
func (a *AsyncTasks) live(id string) (int, error) {
	i := a.find(id)
	if i < 0 {
		return -1, fmt.Errorf("%w %q", ErrUnknownTask, id)
	}
	if Ended(a.tasks[i].Status) {
		return -1, fmt.Errorf("%w: %q is %s", ErrTaskEnded, id, a.tasks[i].Status)
	}
	return i, nil
}

// Start records a new pending task. Ids are the supervisor's to choose and
// must be unique within the table: reusing one is ErrDuplicateTask (and the
// table is unchanged).
func (a *AsyncTasks) Start(id, task string) error {
	if a.find(id) >= 0 {
		return fmt.Errorf("%w: %q", ErrDuplicateTask, id)
	}
	a.tasks = append(a.tasks, model.AsyncTask{ID: id, Task: task, Status: StatusPending})
	return nil
}

// SetRunning marks a pending task running (a running one stays running).
// It is ErrUnknownTask or ErrTaskEnded for a task that is not live.
func (a *AsyncTasks) SetRunning(id string) error {
	i, err := a.live(id)
	if err != nil {
		return err
	}
	a.tasks[i].Status = StatusRunning
	return nil
}

// Finish ends a live task: completed with output when err is nil, else
// failed with err's text as its output. It is ErrUnknownTask or
// ErrTaskEnded (the task unchanged) for a task that is not live.
func (a *AsyncTasks) Finish(id, output string, err error) error {
	i, lerr := a.live(id)
	if lerr != nil {
		return lerr
	}
	if err != nil {
		a.tasks[i].Status, a.tasks[i].Output = StatusFailed, err.Error()
	} else {
		a.tasks[i].Status, a.tasks[i].Output = StatusCompleted, output
	}
	return nil
}

// Cancel marks a live task cancelled; the caller stops its sub-agent. It is
// ErrUnknownTask or ErrTaskEnded for a task that is not live.
func (a *AsyncTasks) Cancel(id string) error {
	i, err := a.live(id)
	if err != nil {
		return err
	}
	a.tasks[i].Status = StatusCancelled
	return nil
}

// Update checks that context may be injected into a task
// (update_async_task): nil while it is pending or running, else
// ErrUnknownTask or ErrTaskEnded. The caller delivers the context; the
// table does not keep it.
func (a *AsyncTasks) Update(id string) error {
	_, err := a.live(id)
	return err
}

// Get returns task id.
func (a *AsyncTasks) Get(id string) (model.AsyncTask, bool) {
	i := a.find(id)
	if i < 0 {
		return model.AsyncTask{}, false
	}
	return a.tasks[i], true
}

// List returns a copy of every task, in start order.
func (a *AsyncTasks) List() []model.AsyncTask { return slices.Clone(a.tasks) }

// Running returns the ids of the tasks that have not ended (pending or
// running), in start order: those to cancel when the supervisor stops.
func (a *AsyncTasks) Running() []string {
	var ids []string
	for _, t := range a.tasks {
		if !Ended(t.Status) {
			ids = append(ids, t.ID)
		}
	}
	return ids
}

// Len returns the number of tasks.
func (a *AsyncTasks) Len() int { return len(a.tasks) }

// Snapshot returns a copy of every task, in start order, for
// model.Request.AsyncTasks; nil when there are none, so that a request
// without tasks carries none.
func (a *AsyncTasks) Snapshot() []model.AsyncTask {
	if len(a.tasks) == 0 {
		return nil
	}
	return slices.Clone(a.tasks)
}
