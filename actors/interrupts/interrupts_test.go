package interrupts_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors/interrupts"
	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
)

func raised(id string, kind messages.InterruptKind) messages.Interrupt {
	return messages.Interrupt{InterruptRaisedPayload: &messages.InterruptRaisedPayload{InterruptID: id, Kind: kind},
		SessionID: "s", RunID: "r", AgentID: "n001", Seq: 1} // journaled: listed
}

// recorder collects deliveries.
type recorder struct {
	mu  sync.Mutex
	got []*messages.Resolution
}

func (r *recorder) deliver(res *messages.Resolution) {
	r.mu.Lock()
	r.got = append(r.got, res)
	r.mu.Unlock()
}

func (r *recorder) all() []*messages.Resolution {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*messages.Resolution(nil), r.got...)
}

func TestRegistry_ResolveLifecycle(t *testing.T) {
	t.Parallel()
	reg := interrupts.New(time.Now)
	var rec recorder
	reg.Raise("t1", raised("i1", messages.InterruptToolApproval), time.Hour, messages.DecisionReject, rec.deliver)

	if _, err := reg.Resolve(messages.Resume{Tenant: "t2", InterruptID: "i1", Decision: messages.DecisionApprove}); !errors.Is(err, interrupts.ErrNotFound) {
		t.Fatalf("other tenant: %v", err)
	}
	var invalid *interrupts.InvalidError
	if _, err := reg.Resolve(messages.Resume{Tenant: "t1", InterruptID: "i1"}); !errors.As(err, &invalid) {
		t.Fatalf("no decision: %v", err)
	}
	if list, _ := reg.Pending("t1", "s", "", 10); len(list) != 1 || list[0].Status != messages.InterruptPending {
		t.Fatalf("still pending after an invalid resume: %+v", list)
	}
	if _, err := reg.Resolve(messages.Resume{Tenant: "t1", InterruptID: "i1", Decision: messages.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Resolve(messages.Resume{Tenant: "t1", InterruptID: "i1", Decision: messages.DecisionApprove}); !errors.Is(err, interrupts.ErrConflict) {
		t.Fatalf("while resolving: %v", err)
	}
	reg.Done("i1")
	if _, err := reg.Resolve(messages.Resume{Tenant: "t1", InterruptID: "i1", Decision: messages.DecisionApprove}); !errors.Is(err, interrupts.ErrResolved) {
		t.Fatalf("after done: %v", err)
	}
	if got := rec.all(); len(got) != 1 || got[0].Decision != messages.DecisionApprove || got[0].Expired || got[0].Cancelled {
		t.Fatalf("deliveries %+v", got)
	}
	if list, _ := reg.Pending("t1", "s", "", 10); len(list) != 0 {
		t.Fatalf("pending after done: %+v", list)
	}
}

func TestRegistry_ExpiryAndCancel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := interrupts.New(time.Now)
		var rec recorder
		reg.Raise("t", raised("tool", messages.InterruptToolApproval), 30*time.Second, messages.DecisionApprove, rec.deliver)
		reg.Raise("t", raised("info", messages.InterruptInfoRequest), 30*time.Second, messages.DecisionApprove, rec.deliver)
		reg.Raise("t", raised("gone", messages.InterruptNodeApproval), time.Hour, messages.DecisionReject, rec.deliver)
		if in, _ := reg.Get("t", "tool"); !in.ExpiresAt.Equal(in.CreatedAt.Add(30 * time.Second)) {
			t.Fatalf("expires_at %v, created %v", in.ExpiresAt, in.CreatedAt)
		}
		time.Sleep(30 * time.Second) // virtual
		synctest.Wait()
		got := rec.all()
		if len(got) != 2 {
			t.Fatalf("%d deliveries after the timeout, want 2", len(got))
		}
		for _, r := range got {
			want := messages.DecisionApprove
			if r.Kind == messages.InterruptInfoRequest {
				want = messages.DecisionReject // nobody answered
			}
			if !r.Expired || r.Decision != want {
				t.Fatalf("expired delivery %+v", r)
			}
		}
		if _, err := reg.Resolve(messages.Resume{Tenant: "t", InterruptID: "tool", Decision: messages.DecisionApprove}); !errors.Is(err, interrupts.ErrExpired) {
			t.Fatalf("resume after expiry: %v", err)
		}
		reg.CancelRun("r")
		if got := rec.all(); len(got) != 3 || !got[2].Cancelled {
			t.Fatalf("cancel: %+v", got)
		}
		if reg.Cancel("gone") {
			t.Fatal("second cancel reported pending")
		}
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if n := len(rec.all()); n != 3 {
			t.Fatalf("a cancelled interrupt was delivered again (%d deliveries)", n)
		}
	})
}

func TestRegistry_ConcurrentResumesOneWins(t *testing.T) {
	t.Parallel()
	reg := interrupts.New(time.Now)
	var rec recorder
	reg.Raise("t", raised("i", messages.InterruptToolApproval), time.Hour, messages.DecisionReject, rec.deliver)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := reg.Resolve(messages.Resume{Tenant: "t", InterruptID: "i", Decision: messages.DecisionApprove}); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok != 1 || len(rec.all()) != 1 {
		t.Fatalf("%d successes, %d deliveries", ok, len(rec.all()))
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	plan := &messages.Plan{Nodes: []messages.PlanNode{{ID: "a"}, {ID: "b", Deps: []string{"a"}}}}
	cyclic := &messages.Plan{Nodes: []messages.PlanNode{{ID: "a", Deps: []string{"b"}}, {ID: "b", Deps: []string{"a"}}}}
	tests := []struct {
		kind messages.InterruptKind
		res  messages.Resume
		ok   bool
	}{
		{messages.InterruptToolApproval, messages.Resume{Decision: messages.DecisionApprove}, true},
		{messages.InterruptToolApproval, messages.Resume{Decision: messages.DecisionReject, Feedback: "no"}, true},
		{messages.InterruptToolApproval, messages.Resume{Decision: messages.DecisionRevise, EditedArgs: json.RawMessage(`{"q":1}`)}, true},
		{messages.InterruptToolApproval, messages.Resume{Decision: messages.DecisionRevise}, false},
		{messages.InterruptToolApproval, messages.Resume{Decision: messages.DecisionRevise, EditedArgs: json.RawMessage(`"x"`)}, false},
		{messages.InterruptToolApproval, messages.Resume{}, false},
		{messages.InterruptToolApproval, messages.Resume{Decision: messages.DecisionCancel}, false},
		{messages.InterruptInfoRequest, messages.Resume{Response: "yes"}, true},
		{messages.InterruptInfoRequest, messages.Resume{Decision: messages.DecisionApprove}, false},
		{messages.InterruptPlanApproval, messages.Resume{Decision: messages.DecisionRevise, Plan: plan}, true},
		{messages.InterruptPlanApproval, messages.Resume{Decision: messages.DecisionRevise, Plan: cyclic}, false},
		{messages.InterruptPlanApproval, messages.Resume{Decision: messages.DecisionRevise}, false},
		{messages.InterruptNodeApproval, messages.Resume{Decision: messages.DecisionReject}, true},
		{messages.InterruptNodeApproval, messages.Resume{Decision: messages.DecisionRevise}, false},
		{messages.InterruptChoice, messages.Resume{Choices: []string{"a"}}, true},
		{messages.InterruptChoice, messages.Resume{Decision: messages.DecisionApprove}, false},
		{messages.InterruptChoice, messages.Resume{}, false},
		{messages.InterruptChoice, messages.Resume{Decision: messages.DecisionReject, Feedback: "none fits"}, true},
		{messages.InterruptChoice, messages.Resume{Decision: messages.DecisionReject, Choices: []string{"a"}}, false},
		{messages.InterruptChoice, messages.Resume{Decision: messages.DecisionRevise, Choices: []string{"a"}}, false},
		{"weird", messages.Resume{Decision: messages.DecisionApprove}, false},
	}
	for i, tt := range tests {
		res := tt.res
		err := interrupts.Validate(tt.kind, &res)
		var invalid *interrupts.InvalidError
		if tt.ok != (err == nil) || (err != nil && !errors.As(err, &invalid)) {
			t.Errorf("case %d (%s %+v): %v", i, tt.kind, tt.res, err)
		}
	}
}

// TestRegistry_CancelWhileResolving: a resume delivered to an actor that is
// then stopped (its continuation may never run, so Done never comes) is
// ended by the cancellation instead of staying "resolving" forever.
func TestRegistry_CancelWhileResolving(t *testing.T) {
	t.Parallel()
	reg := interrupts.New(time.Now)
	var rec recorder
	reg.Raise("t", raised("i1", messages.InterruptInfoRequest), time.Hour, messages.DecisionReject, rec.deliver)
	if _, err := reg.Resolve(messages.Resume{Tenant: "t", InterruptID: "i1", Decision: messages.DecisionApprove, Response: "yes"}); err != nil {
		t.Fatal(err)
	}
	if reg.Cancel("i1") {
		t.Fatal("Cancel reported a resolving interrupt as pending")
	}
	if list, _ := reg.Pending("t", "s", "", 10); len(list) != 0 {
		t.Fatalf("still listed after the cancellation: %+v", list)
	}
	if _, err := reg.Resolve(messages.Resume{Tenant: "t", InterruptID: "i1", Decision: messages.DecisionApprove, Response: "yes"}); !errors.Is(err, interrupts.ErrResolved) {
		t.Fatalf("resume after the cancellation: %v, want ErrResolved", err)
	}
	reg.Done("i1") // the continuation, if it runs after all: a no-op
	if got := rec.all(); len(got) != 1 || got[0].Cancelled {
		t.Fatalf("deliveries %+v, want only the resume", got)
	}
}

// TestRegistry_ConcurrentResumesOneWinner: of 20 concurrent resumes, one
// wins and the 19 others get ErrConflict (409), whether they arrive
// while the winner is applied or after it was (ErrResolved).
func TestRegistry_ConcurrentResumesOneWinner(t *testing.T) {
	t.Parallel()
	for try := range 50 {
		reg := interrupts.New(time.Now)
		var rec recorder
		reg.Raise("t", raised("i1", messages.InterruptToolApproval), time.Hour, messages.DecisionReject, func(r *messages.Resolution) {
			rec.deliver(r)
			reg.Done(r.InterruptID) // the parked actor applies it at once
		})
		var wg sync.WaitGroup
		errs := make([]error, 20)
		for i := range errs {
			wg.Go(func() {
				_, errs[i] = reg.Resolve(messages.Resume{Tenant: "t", InterruptID: "i1", Decision: messages.DecisionApprove})
			})
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, interrupts.ErrConflict):
				t.Fatalf("try %d: a loser got %v, want ErrConflict", try, err)
			}
		}
		if won != 1 || len(rec.all()) != 1 {
			t.Fatalf("try %d: %d winners, %d deliveries", try, won, len(rec.all()))
		}
	}
}

// TestRegistry_TombstonesExpire: an ended interrupt answers "resolved" or
// "expired" for TombstoneTTL, to its own tenant only, then is unknown.
func TestRegistry_TombstonesExpire(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := interrupts.New(time.Now)
		defer reg.Close()
		reg.Raise("t", raised("answered", messages.InterruptToolApproval), time.Hour, messages.DecisionReject, func(r *messages.Resolution) { reg.Done(r.InterruptID) })
		reg.Raise("t", raised("expires", messages.InterruptToolApproval), time.Second, messages.DecisionReject, func(*messages.Resolution) {})
		if _, err := reg.Resolve(messages.Resume{Tenant: "t", InterruptID: "answered", Decision: messages.DecisionApprove}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // virtual time: "expires" times out
		resume := func(tenant messages.TenantID, id string) error {
			_, err := reg.Resolve(messages.Resume{Tenant: tenant, InterruptID: id, Decision: messages.DecisionApprove})
			return err
		}
		if err := resume("t", "answered"); !errors.Is(err, interrupts.ErrResolved) {
			t.Fatalf("answered: %v", err)
		}
		if err := resume("t", "expires"); !errors.Is(err, interrupts.ErrExpired) {
			t.Fatalf("expired: %v", err)
		}
		if err := resume("other", "answered"); !errors.Is(err, interrupts.ErrNotFound) {
			t.Fatalf("another tenant: %v", err)
		}
		time.Sleep(interrupts.TombstoneTTL)
		// Tombstones are pruned as later interrupts end.
		reg.Raise("t", raised("later", messages.InterruptToolApproval), time.Second, messages.DecisionReject, func(*messages.Resolution) {})
		time.Sleep(2 * time.Second)
		if err := resume("t", "answered"); !errors.Is(err, interrupts.ErrNotFound) {
			t.Fatalf("answered, after the TTL: %v", err)
		}
		if err := resume("t", "expires"); !errors.Is(err, interrupts.ErrNotFound) {
			t.Fatalf("expired, after the TTL: %v", err)
		}
	})
}

// TestRegistry_RaisedAfterCancelRun: an interrupt a stopped run raises is
// cancelled at once, and a resume of it is told so (not "not found").
func TestRegistry_RaisedAfterCancelRun(t *testing.T) {
	t.Parallel()
	reg := interrupts.New(time.Now)
	defer reg.Close()
	reg.CancelRun("r")
	var rec recorder
	reg.Raise("t", raised("late", messages.InterruptPlanApproval), time.Hour, messages.DecisionReject, rec.deliver)
	if got := rec.all(); len(got) != 1 || !got[0].Cancelled {
		t.Fatalf("deliveries %+v, want one cancellation", got)
	}
	if _, err := reg.Resolve(messages.Resume{Tenant: "t", InterruptID: "late", Decision: messages.DecisionApprove}); !errors.Is(err, interrupts.ErrResolved) {
		t.Fatalf("resume of it = %v, want ErrResolved", err)
	}
	reg.ForgetRun("r")
	reg.Raise("t", raised("after", messages.InterruptPlanApproval), time.Hour, messages.DecisionReject, rec.deliver)
	if len(rec.all()) != 1 {
		t.Fatal("an interrupt raised after ForgetRun was cancelled")
	}
}

// TestRegistry_PendingAll: a tenant's open interrupts across its sessions,
// oldest first, paged; another tenant's are not listed; a page goes on
// after an interrupt resolved since; a malformed cursor is refused.
// TestMergePages: pages of three registries (cluster nodes), each with
// some sessions, merged page by page, list what one registry holding every
// session lists, page for page; an interrupt two registries list (a session
// changing owner) is listed once.
func TestMergePages(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var rec recorder
	now := func() time.Time { return at }
	nodes := []*interrupts.Registry{interrupts.New(now), interrupts.New(now), interrupts.New(now)}
	var want []string // in raise order: as one registry would list them
	for i, node := range []int{0, 1, 1, 2, 0, 0, 2, 1, 2, 0} {
		in := raised(fmt.Sprintf("i%02d", i), messages.InterruptNodeApproval)
		in.SessionID = messages.SessionID(fmt.Sprintf("s%d", node))
		created := at.Add(time.Duration(i/2) * time.Second) // pairs share a time: ordered by id
		nodes[node].RaiseAt("t1", in, created, created.Add(time.Hour), messages.DecisionReject, rec.deliver, nil)
		if i == 4 { // also still on node 2, its former owner
			nodes[2].RaiseAt("t1", in, created, created.Add(time.Hour), messages.DecisionReject, rec.deliver, nil)
		}
		want = append(want, in.InterruptID)
	}

	var got []string
	cursor := ""
	for page := 0; ; page++ {
		var pages []messages.InterruptList
		for _, n := range nodes {
			list, next, err := n.PendingAll("t1", cursor, 3)
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, messages.InterruptList{Interrupts: list, NextCursor: next})
		}
		merged := interrupts.MergePages(3, pages...)
		if len(merged.Interrupts) > 3 {
			t.Fatalf("page %d: %d interrupts, limit 3", page, len(merged.Interrupts))
		}
		for _, in := range merged.Interrupts {
			got = append(got, in.InterruptID)
		}
		if merged.NextCursor == "" {
			break
		}
		if page > 10 {
			t.Fatal("no last page")
		}
		cursor = merged.NextCursor
	}
	if !slices.Equal(got, want) {
		t.Fatalf("merged pages list %v, want %v", got, want)
	}
	if m := interrupts.MergePages(3); len(m.Interrupts) != 0 || m.NextCursor != "" {
		t.Fatalf("no pages: %+v", m)
	}
}

func TestRegistry_PendingAll(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	reg := interrupts.New(func() time.Time { clock = clock.Add(time.Second); return clock })
	var rec recorder
	for i, s := range []messages.SessionID{"a", "b", "a", "c", "b"} {
		in := raised(string(rune('1'+i)), messages.InterruptNodeApproval)
		in.SessionID = s
		reg.Raise("t1", in, time.Hour, messages.DecisionReject, rec.deliver)
	}
	other := raised("x", messages.InterruptNodeApproval)
	reg.Raise("t2", other, time.Hour, messages.DecisionReject, rec.deliver)

	page1, next, err := reg.PendingAll("t1", "", 2)
	if err != nil || len(page1) != 2 || page1[0].InterruptID != "1" || page1[1].InterruptID != "2" || next == "" {
		t.Fatalf("page 1: %+v, %q, %v", page1, next, err)
	}
	// The last interrupt of the page is resolved before the next page.
	if _, err := reg.Resolve(messages.Resume{Tenant: "t1", InterruptID: "2", Decision: messages.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	reg.Done("2")
	page2, next, err := reg.PendingAll("t1", next, 2)
	if err != nil || len(page2) != 2 || page2[0].InterruptID != "3" || page2[1].InterruptID != "4" || next == "" {
		t.Fatalf("page 2: %+v, %q, %v", page2, next, err)
	}
	page3, next, err := reg.PendingAll("t1", next, 2)
	if err != nil || len(page3) != 1 || page3[0].InterruptID != "5" || page3[0].SessionID != "b" || next != "" {
		t.Fatalf("page 3: %+v, %q, %v", page3, next, err)
	}
	if all, _, _ := reg.PendingAll("t2", "", 10); len(all) != 1 || all[0].InterruptID != "x" {
		t.Fatalf("tenant t2: %+v", all)
	}
	var invalid *interrupts.InvalidError
	for _, c := range []string{"nope", "12", "x.1", "5."} {
		if _, _, err := reg.PendingAll("t1", c, 2); !errors.As(err, &invalid) {
			t.Errorf("cursor %q: %v, want an InvalidError", c, err)
		}
	}
}

// TestRegistry_ListsOnlyJournaled: an interrupt raised but whose
// interrupt_raised is not journaled yet is not listed (a crash would lose
// it), though it can already be resolved; once journaled it is, with its seq.
func TestRegistry_ListsOnlyJournaled(t *testing.T) {
	t.Parallel()
	reg := interrupts.New(time.Now)
	var rec recorder
	in := raised("j1", messages.InterruptNodeApproval)
	in.Seq = 0 // raised, not journaled yet
	reg.Raise("t1", in, time.Hour, messages.DecisionReject, rec.deliver)
	if list, _ := reg.Pending("t1", "s", "", 10); len(list) != 0 {
		t.Fatalf("listed before it is journaled: %+v", list)
	}
	if all, _, _ := reg.PendingAll("t1", "", 10); len(all) != 0 {
		t.Fatalf("listed across sessions before it is journaled: %+v", all)
	}
	if _, ok := reg.Get("t1", "j1"); ok {
		t.Fatal("Get finds it before it is journaled")
	}
	reg.Journaled([]*messages.Envelope{{Seq: 42, Type: messages.InterruptRaised, Payload: in.InterruptRaisedPayload}})
	list, _ := reg.Pending("t1", "s", "", 10)
	if len(list) != 1 || list[0].Seq != 42 {
		t.Fatalf("after it is journaled: %+v", list)
	}
	if got, ok := reg.Get("t1", "j1"); !ok || got.Seq != 42 {
		t.Fatalf("Get after it is journaled: %+v %v", got, ok)
	}
}

// TestRegistry_Sleep: a run's interrupts put to sleep stay pending and
// answerable; an outcome decided while they sleep wakes the run and
// reaches the actor that parks on them again; one that comes after it
// parked again goes to it directly.
func TestRegistry_Sleep(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := interrupts.New(time.Now)
		var old recorder
		reg.Raise("t", raised("a", messages.InterruptToolApproval), time.Minute, messages.DecisionReject, old.deliver)
		reg.Raise("t", raised("b", messages.InterruptNodeApproval), time.Hour, messages.DecisionReject, old.deliver)
		unjournaled := raised("c", messages.InterruptNodeApproval)
		unjournaled.RunID, unjournaled.Seq = "r2", 0
		reg.Raise("t", unjournaled, time.Hour, messages.DecisionReject, old.deliver)

		woken := 0
		wake := func() { woken++ }
		if reg.Sleep("r", 1, wake) || reg.Sleep("r", 3, wake) || reg.Sleep("r2", 1, wake) || reg.Sleep("none", 0, wake) {
			t.Fatal("slept with the wrong count, or with an interrupt not journaled")
		}
		if !reg.Sleep("r", 2, wake) || reg.Asleep() != 2 {
			t.Fatalf("did not sleep: %d asleep", reg.Asleep())
		}
		// Answered while asleep: accepted, kept, and the run is woken.
		if _, err := reg.Resolve(messages.Resume{Tenant: "t", InterruptID: "b", Decision: messages.DecisionApprove}); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Resolve(messages.Resume{Tenant: "t", InterruptID: "b", Decision: messages.DecisionReject}); !errors.Is(err, interrupts.ErrConflict) {
			t.Fatalf("a second answer: %v", err)
		}
		if woken != 1 || len(old.all()) != 0 {
			t.Fatalf("woken %d times; the stopped actors got %v", woken, old.all())
		}
		if list, _ := reg.Pending("t", "s", "", 10); len(list) != 2 { // a and b (c is not journaled)
			t.Fatalf("listed while asleep: %+v", list)
		}
		// The rebuilt run parks on them again: b's answer is delivered at
		// once, a stays pending with its own timer.
		var parkedA, parkedB recorder
		reg.RaiseAt("t", raised("b", messages.InterruptNodeApproval), time.Now(), time.Now().Add(time.Hour), messages.DecisionReject, parkedB.deliver, nil)
		reg.RaiseAt("t", raised("a", messages.InterruptToolApproval), time.Now(), time.Now().Add(time.Hour), messages.DecisionReject, parkedA.deliver, nil)
		if got := parkedB.all(); len(got) != 1 || got[0].Decision != messages.DecisionApprove {
			t.Fatalf("b's answer after waking: %+v", got)
		}
		reg.Done("b")
		if reg.Asleep() != 0 {
			t.Fatalf("%d still asleep", reg.Asleep())
		}
		if list, _ := reg.Pending("t", "s", "", 10); len(list) != 1 || list[0].InterruptID != "a" {
			t.Fatalf("listed after waking: %+v (a, once)", list)
		}
		// a keeps its first expiry (one minute, not the hour RaiseAt asked).
		time.Sleep(time.Minute + time.Second)
		if got := parkedA.all(); len(got) != 1 || !got[0].Expired {
			t.Fatalf("a after its expiry: %+v", got)
		}
		if woken != 1 || len(old.all()) != 0 {
			t.Fatalf("woken %d times; the stopped actors got %v", woken, old.all())
		}
	})
}

// TestRegistry_SleepExpiresAndCancels: an interrupt that times out or is
// cancelled while asleep is delivered so to the actor that parks on it
// again, once.
func TestRegistry_SleepExpiresAndCancels(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := interrupts.New(time.Now)
		var old recorder
		reg.Raise("t", raised("a", messages.InterruptToolApproval), time.Minute, messages.DecisionApprove, old.deliver)
		reg.Raise("t", raised("b", messages.InterruptNodeApproval), time.Hour, messages.DecisionReject, old.deliver)
		var wakes sync.WaitGroup
		wakes.Add(2)
		if !reg.Sleep("r", 2, func() { wakes.Done() }) {
			t.Fatal("did not sleep")
		}
		time.Sleep(2 * time.Minute) // a expires
		reg.CancelRun("r")          // b is cancelled
		wakes.Wait()
		var parked recorder
		for _, id := range []string{"a", "b"} {
			reg.RaiseAt("t", raised(id, messages.InterruptNodeApproval), time.Now(), time.Now().Add(time.Hour), messages.DecisionReject, parked.deliver, nil)
		}
		got := parked.all()
		if len(got) != 2 || !got[0].Expired || got[0].Decision != messages.DecisionApprove || !got[1].Cancelled || len(old.all()) != 0 {
			t.Fatalf("deliveries %+v; old %+v", got, old.all())
		}
		if list, _ := reg.Pending("t", "s", "", 10); len(list) != 0 {
			t.Fatalf("pending: %+v", list)
		}
	})
}

// TestRegistry_SignedExpiryRejects: an interrupt that needs approvers'
// signatures (raised with a Signing, or journaled with an approval rule)
// is rejected at its expiry whatever the run's timeout action, with no
// signature, with fewer than it needs, and after a restart (raised again
// past its expiry); a signature arriving after the expiry is refused.
func TestRegistry_SignedExpiryRejects(t *testing.T) {
	t.Parallel()
	pk, sk, _, err := governance.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	pk2, sk2, _, err := governance.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]*governance.PublicKey{"alice": pk, "bob": pk2}
	signing := func(id string) *interrupts.Signing {
		return &interrupts.Signing{
			Tally:  governance.NewTally(id, "sha256:d", governance.Rule{Required: 2, Approvers: []string{"alice", "bob"}}, 1, keys),
			Digest: "sha256:d",
			Record: func(governance.Signature, int, int, bool) error { return nil },
		}
	}
	sign := func(t *testing.T, id string, who string, key *governance.PrivateKey) messages.Resume {
		st := messages.ApprovalStatement{InterruptID: id, EvidenceDigest: "sha256:d", Decision: messages.DecisionApprove}
		sig, err := governance.Sign(key, st)
		if err != nil {
			t.Fatal(err)
		}
		return messages.Resume{Tenant: "t", InterruptID: id, Decision: messages.DecisionApprove, Signature: &messages.ResumeSignature{Approver: who, Signature: sig}}
	}
	for _, action := range []messages.Decision{messages.DecisionApprove, messages.DecisionReject, ""} {
		for _, signatures := range []int{0, 1} {
			t.Run(fmt.Sprintf("%q/%d", action, signatures), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					reg := interrupts.New(time.Now)
					var rec recorder
					now := time.Now()
					reg.RaiseAt("t", raised("i", messages.InterruptToolApproval), now, now.Add(time.Minute), action, rec.deliver, signing("i"))
					if signatures == 1 {
						if info, err := reg.Resolve(sign(t, "i", "alice", sk)); err != nil || info.Status != messages.InterruptPending {
							t.Fatalf("first signature: %+v %v", info, err)
						}
					}
					time.Sleep(time.Minute)
					synctest.Wait()
					if got := rec.all(); len(got) != 1 || !got[0].Expired || got[0].Decision != messages.DecisionReject {
						t.Fatalf("expired with action %q and %d signatures: %+v, want rejected", action, signatures, got)
					}
					if _, err := reg.Resolve(sign(t, "i", "bob", sk2)); !errors.Is(err, interrupts.ErrExpired) {
						t.Fatalf("a signature after the expiry: %v, want ErrExpired", err)
					}

					// Journaled with its rule but raised again without a
					// Signing (the server lost its approvers): still covered.
					in := raised("j", messages.InterruptToolApproval)
					in.Approval = &messages.ApprovalRequirement{EvidenceDigest: "sha256:d", Required: 2, RejectRequired: 1}
					reg.RaiseAt("t", in, now, now.Add(time.Second), action, rec.deliver, nil) // past its expiry: at once
					synctest.Wait()
					if got := rec.all(); len(got) != 2 || !got[1].Expired || got[1].Decision != messages.DecisionReject {
						t.Fatalf("raised again past its expiry: %+v, want rejected", got)
					}
				})
			})
		}
	}
}

func TestTimeoutDecision(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind   messages.InterruptKind
		signed bool
		action messages.Decision
		want   messages.Decision
	}{
		{messages.InterruptToolApproval, false, messages.DecisionApprove, messages.DecisionApprove},
		{messages.InterruptToolApproval, false, "", messages.DecisionReject},
		{messages.InterruptToolApproval, true, messages.DecisionApprove, messages.DecisionReject},
		{messages.InterruptPlanApproval, true, messages.DecisionApprove, messages.DecisionReject},
		{messages.InterruptSpawnApproval, true, messages.DecisionReject, messages.DecisionReject},
		{messages.InterruptInfoRequest, false, messages.DecisionApprove, messages.DecisionReject},
		{messages.InterruptChoice, false, messages.DecisionApprove, messages.DecisionReject}, // a timer never picks an option
	} {
		if got := interrupts.TimeoutDecision(tc.kind, tc.signed, tc.action); got != tc.want {
			t.Errorf("TimeoutDecision(%s, signed %v, %q) = %s, want %s", tc.kind, tc.signed, tc.action, got, tc.want)
		}
	}
}

// TestRegistry_PendingByKind counts only the interrupts still waiting for
// an answer: one being resolved or cancelled no longer counts.
func TestRegistry_PendingByKind(t *testing.T) {
	t.Parallel()
	reg := interrupts.New(time.Now)
	defer reg.Close()
	var rec recorder
	reg.Raise("t1", raised("a", messages.InterruptToolApproval), time.Hour, messages.DecisionReject, rec.deliver)
	reg.Raise("t1", raised("b", messages.InterruptToolApproval), time.Hour, messages.DecisionReject, rec.deliver)
	reg.Raise("t2", raised("c", messages.InterruptPlanApproval), time.Hour, messages.DecisionReject, rec.deliver)
	reg.Raise("t2", raised("d", messages.InterruptInfoRequest), time.Hour, messages.DecisionReject, rec.deliver)
	if _, err := reg.Resolve(messages.Resume{Tenant: "t1", InterruptID: "a", Decision: messages.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	reg.Cancel("d")
	got := reg.PendingByKind()
	want := map[messages.InterruptKind]int{messages.InterruptToolApproval: 1, messages.InterruptPlanApproval: 1}
	if !maps.Equal(got, want) {
		t.Fatalf("PendingByKind %v, want %v", got, want)
	}
}

// TestRegistry_ResolveChoice: a choice's answer is checked against the
// options it offered (422 through the API: an *InvalidError) and leaves
// the interrupt pending; a valid one is delivered as an approval with the
// chosen ids.
func TestRegistry_ResolveChoice(t *testing.T) {
	t.Parallel()
	reg := interrupts.New(time.Now)
	defer reg.Close()
	var rec recorder
	in := raised("c1", messages.InterruptChoice)
	in.Options = []messages.ChoiceOption{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}, {ID: "c", Label: "C"}}
	reg.Raise("t", in, time.Hour, messages.DecisionApprove, rec.deliver)
	for _, bad := range [][]string{nil, {"z"}, {"a", "b"}} {
		_, err := reg.Resolve(messages.Resume{Tenant: "t", InterruptID: "c1", Choices: bad})
		var invalid *interrupts.InvalidError
		if !errors.As(err, &invalid) {
			t.Fatalf("choices %v: %v, want an InvalidError", bad, err)
		}
	}
	if len(rec.all()) != 0 {
		t.Fatalf("an invalid answer was delivered: %+v", rec.all())
	}
	if _, err := reg.Resolve(messages.Resume{Tenant: "t", InterruptID: "c1", Choices: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	got := rec.all()
	if len(got) != 1 || got[0].Decision != messages.DecisionApprove || len(got[0].Choices) != 1 || got[0].Choices[0] != "b" {
		t.Fatalf("delivered %+v", got)
	}
}

// TestRegistry_ExpireChoice: a choice that nobody answers expires
// rejected, with no option chosen, even when the run's timeout action is
// approve.
func TestRegistry_ExpireChoice(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := interrupts.New(time.Now)
		defer reg.Close()
		var rec recorder
		in := raised("c1", messages.InterruptChoice)
		in.Options = []messages.ChoiceOption{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}}
		reg.Raise("t", in, time.Minute, messages.DecisionApprove, rec.deliver)
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		got := rec.all()
		if len(got) != 1 || !got[0].Expired || got[0].Decision != messages.DecisionReject || len(got[0].Choices) != 0 {
			t.Fatalf("delivered %+v", got)
		}
	})
}
