package delegation_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/conclave-ai/conclave/actors/delegation"
	"github.com/conclave-ai/conclave/model"
)

// table returns a table with task "t" in the given status.
func table(t *testing.T, status string) *delegation.AsyncTasks {
	t.Helper()
	var a delegation.AsyncTasks
	if err := a.Start("t", "look it up"); err != nil {
		t.Fatal(err)
	}
	var err error
	switch status {
	case delegation.StatusPending:
	case delegation.StatusRunning:
		err = a.SetRunning("t")
	case delegation.StatusCompleted:
		err = a.Finish("t", "out", nil)
	case delegation.StatusFailed:
		err = a.Finish("t", "", errors.New("boom"))
	case delegation.StatusCancelled:
		err = a.Cancel("t")
	default:
		t.Fatalf("unknown status %q", status)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := a.Get("t"); got.Status != status {
		t.Fatalf("set up status %q, got %q", status, got.Status)
	}
	return &a
}

// TestAsyncTasks_Transitions applies every operation to a task in every
// status.
func TestAsyncTasks_Transitions(t *testing.T) {
	t.Parallel()
	const (
		pending   = delegation.StatusPending
		running   = delegation.StatusRunning
		completed = delegation.StatusCompleted
		failed    = delegation.StatusFailed
		cancelled = delegation.StatusCancelled
	)
	ops := map[string]func(*delegation.AsyncTasks) error{
		"SetRunning": func(a *delegation.AsyncTasks) error { return a.SetRunning("t") },
		"Complete":   func(a *delegation.AsyncTasks) error { return a.Finish("t", "result", nil) },
		"Fail":       func(a *delegation.AsyncTasks) error { return a.Finish("t", "partial", errors.New("sub-agent failed")) },
		"Cancel":     func(a *delegation.AsyncTasks) error { return a.Cancel("t") },
		"Update":     func(a *delegation.AsyncTasks) error { return a.Update("t") },
	}
	tests := []struct {
		from, op, to string
		err          error
	}{
		{pending, "SetRunning", running, nil},
		{pending, "Complete", completed, nil},
		{pending, "Fail", failed, nil},
		{pending, "Cancel", cancelled, nil},
		{pending, "Update", pending, nil},
		{running, "SetRunning", running, nil},
		{running, "Complete", completed, nil},
		{running, "Fail", failed, nil},
		{running, "Cancel", cancelled, nil},
		{running, "Update", running, nil},
	}
	for _, end := range []string{completed, failed, cancelled} {
		for _, op := range []string{"SetRunning", "Complete", "Fail", "Cancel", "Update"} {
			tests = append(tests, struct {
				from, op, to string
				err          error
			}{end, op, end, delegation.ErrTaskEnded})
		}
	}
	for _, tt := range tests {
		a := table(t, tt.from)
		before, _ := a.Get("t")
		err := ops[tt.op](a)
		if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("%s on %s: error %v, want %v", tt.op, tt.from, err, tt.err)
		}
		got, _ := a.Get("t")
		if got.Status != tt.to {
			t.Errorf("%s on %s: status %s, want %s", tt.op, tt.from, got.Status, tt.to)
		}
		if err != nil && got != before {
			t.Errorf("%s on %s failed but changed the task: %+v → %+v", tt.op, tt.from, before, got)
		}
	}
}

func TestAsyncTasks_Output(t *testing.T) {
	t.Parallel()
	var a delegation.AsyncTasks
	_ = a.Start("ok", "task one")
	_ = a.Start("bad", "task two")
	_ = a.SetRunning("ok")
	if err := a.Finish("ok", "the answer", nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Finish("bad", "ignored", errors.New("model: error")); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.Get("ok"); got != (model.AsyncTask{ID: "ok", Task: "task one", Status: "completed", Output: "the answer"}) {
		t.Fatalf("completed task = %+v", got)
	}
	if got, _ := a.Get("bad"); got != (model.AsyncTask{ID: "bad", Task: "task two", Status: "failed", Output: "model: error"}) {
		t.Fatalf("failed task = %+v", got)
	}
}

func TestAsyncTasks_UnknownTask(t *testing.T) {
	t.Parallel()
	a := table(t, delegation.StatusRunning)
	for name, err := range map[string]error{
		"SetRunning": a.SetRunning("x"),
		"Finish":     a.Finish("x", "", nil),
		"Cancel":     a.Cancel("x"),
		"Update":     a.Update("x"),
	} {
		if !errors.Is(err, delegation.ErrUnknownTask) {
			t.Errorf("%s(unknown) = %v, want ErrUnknownTask", name, err)
		}
	}
	if _, ok := a.Get("x"); ok {
		t.Error("Get(unknown) found a task")
	}
	if a.Len() != 1 {
		t.Errorf("Len = %d after failed operations", a.Len())
	}
}

func TestAsyncTasks_DuplicateStart(t *testing.T) {
	t.Parallel()
	a := table(t, delegation.StatusCompleted)
	if err := a.Start("t", "again"); !errors.Is(err, delegation.ErrDuplicateTask) {
		t.Fatalf("Start(dup) = %v", err)
	}
	if got, _ := a.Get("t"); got.Task != "look it up" || got.Status != delegation.StatusCompleted || a.Len() != 1 {
		t.Fatalf("duplicate Start changed the table: %+v", a.List())
	}
}

func TestAsyncTasks_ListRunningSnapshot(t *testing.T) {
	t.Parallel()
	var a delegation.AsyncTasks
	if a.List() != nil || a.Snapshot() != nil || a.Running() != nil || a.Len() != 0 {
		t.Fatal("zero table is not empty")
	}
	for _, id := range []string{"c", "a", "d", "b", "e"} {
		if err := a.Start(id, "task "+id); err != nil {
			t.Fatal(err)
		}
	}
	_ = a.SetRunning("a")
	_ = a.Finish("d", "done", nil)
	_ = a.Cancel("b")
	_ = a.SetRunning("e")
	_ = a.Finish("e", "", errors.New("x"))

	wantIDs := []string{"c", "a", "d", "b", "e"}
	var ids []string
	for _, task := range a.List() {
		ids = append(ids, task.ID)
	}
	if !reflect.DeepEqual(ids, wantIDs) {
		t.Fatalf("List order %v, want %v", ids, wantIDs)
	}
	if got := a.Running(); !reflect.DeepEqual(got, []string{"c", "a"}) {
		t.Fatalf("Running = %v, want [c a]", got)
	}
	snap := a.Snapshot()
	if !reflect.DeepEqual(snap, a.List()) {
		t.Fatalf("Snapshot %+v differs from List", snap)
	}
	// Copies: changing them does not change the table.
	snap[0].Status = "hacked"
	l := a.List()
	l[1].Output = "hacked"
	if got, _ := a.Get("c"); got.Status != delegation.StatusPending {
		t.Fatal("Snapshot shares the table")
	}
	if got, _ := a.Get("a"); got.Output != "" {
		t.Fatal("List shares the table")
	}
}

func TestEnded(t *testing.T) {
	t.Parallel()
	for status, want := range map[string]bool{
		"pending": false, "running": false, "completed": true, "failed": true, "cancelled": true, "": false, "other": false,
	} {
		if got := delegation.Ended(status); got != want {
			t.Errorf("Ended(%q) = %v", status, got)
		}
	}
}

func TestAsyncTasks_ErrorPrefix(t *testing.T) {
	t.Parallel()
	a := table(t, delegation.StatusCancelled)
	for _, err := range []error{a.Cancel("t"), a.Update("nope"), a.Start("t", "")} {
		if msg := err.Error(); len(msg) < 12 || msg[:12] != "delegation: " {
			t.Errorf("error %q is not prefixed", msg)
		}
	}
}
