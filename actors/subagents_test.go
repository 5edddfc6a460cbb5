package actors

import (
	"testing"

	"github.com/conclave-ai/conclave/messages"
)

func TestSubagentSet_Live(t *testing.T) {
	t.Parallel()
	done := &agentShared{}
	done.done.Store(&messages.AgentDone{})
	ss := subagentSet{
		"a": {shared: &agentShared{}, reported: true},
		"b": {shared: done},
	}
	if ss.live() {
		t.Fatal("live with every sub-agent reported or done")
	}
	ss["c"] = &subagent{shared: &agentShared{}}
	if !ss.live() {
		t.Fatal("not live with a sub-agent working")
	}
	if (subagentSet{}).live() || subagentSet(nil).live() {
		t.Fatal("an empty set is live")
	}
}

func TestSubagentSet_AsyncLive(t *testing.T) {
	t.Parallel()
	ss := subagentSet{
		"a": {shared: &agentShared{}},                              // working, not async
		"b": {shared: &agentShared{}, async: true, reported: true}, // ended
	}
	if ss.asyncLive() {
		t.Fatal("async live with no async task running")
	}
	ss["c"] = &subagent{shared: &agentShared{}, async: true, cancel: true} // cancelled, not terminated
	if !ss.asyncLive() {
		t.Fatal("not async live with a cancelled task's lane open")
	}
}

func TestSubagentSet_ByTask(t *testing.T) {
	t.Parallel()
	sync := &subagent{taskID: "x.sub1"}
	async := &subagent{taskID: "x.sub2", async: true}
	ss := subagentSet{"p1": sync, "p2": async}
	if got := ss.byTask("x.sub2"); got != async {
		t.Fatalf("byTask(x.sub2) = %+v", got)
	}
	if got := ss.byTask("x.sub1"); got != nil {
		t.Fatalf("byTask found a delegate sub-agent: %+v", got)
	}
}
