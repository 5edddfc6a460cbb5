package actors

import "testing"

// TestRemoteFollower_Take: only the running call's end is taken, and it
// keeps the task's ids in the agent's shared state (for a restart).
func TestRemoteFollower_Take(t *testing.T) {
	t.Parallel()
	cur := &remoteHandle{}
	cur.ids.Store(&remoteIDs{task: "t1", context: "c1"})
	f := remoteFollower{cur: cur}
	sh := &agentShared{}
	if f.take(sh, &remoteDone{h: &remoteHandle{}}) {
		t.Fatal("took a stale call's end")
	}
	if f.cur != cur || sh.remoteTask != "" {
		t.Fatalf("a stale end changed the follower (%p) or the ids (%q)", f.cur, sh.remoteTask)
	}
	if !f.take(sh, &remoteDone{h: cur}) {
		t.Fatal("did not take the running call's end")
	}
	if f.cur != nil || sh.remoteTask != "t1" || sh.remoteContext != "c1" || !sh.remoteOpen {
		t.Fatalf("after take: cur %p, shared %q %q open=%v", f.cur, sh.remoteTask, sh.remoteContext, sh.remoteOpen)
	}
	if f.take(sh, &remoteDone{h: cur}) {
		t.Fatal("took the same end twice")
	}
}
