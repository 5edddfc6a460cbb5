package actors

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/model"
)

func TestToolBatch_Reset(t *testing.T) {
	t.Parallel()
	var b toolBatch
	b.next = 3
	b.reset([]model.ToolCall{{ID: "c1", Name: "search"}, {ID: "c2", Name: "fetch", Args: json.RawMessage(`{"url":"x"}`)}}, 2)
	if b.next != 0 || len(b.results) != 2 || len(b.began) != 2 {
		t.Fatalf("reset left next %d, %d results, %d start times", b.next, len(b.results), len(b.began))
	}
	if want := []string{"c1#2", "c2#2"}; !slices.Equal(b.callIDs, want) {
		t.Fatalf("call ids %v, want %v (the attempt appended after a restart)", b.callIDs, want)
	}
	if got := string(b.calls[0].Args); got != "{}" {
		t.Fatalf("no arguments became %q, want {}", got)
	}
	if r := b.results[1]; r.CallID != "c2" || r.Name != "fetch" {
		t.Fatalf("result %+v, want the call's id and name", r)
	}
	b.reset([]model.ToolCall{{ID: "c1"}}, 1)
	if b.callIDs[0] != "c1" {
		t.Fatalf("first attempt's call id %q, want c1", b.callIDs[0])
	}
}

// TestToolBatch_Ready: results leave in call order, whatever order they
// came in, and the batch is idle once every call ran and none works.
func TestToolBatch_Ready(t *testing.T) {
	t.Parallel()
	var b toolBatch
	b.reset(make([]model.ToolCall, 3), 1)
	now := time.Unix(100, 0)
	for i := range 3 {
		b.next++
		b.startWorking(now, i)
	}
	if b.began[1] != now || b.waiting != 3 {
		t.Fatalf("began %v, waiting %d", b.began[1], b.waiting)
	}
	b.answer(2, answer{out: "third"})
	b.answer(1, answer{err: errors.New("second")})
	if _, _, ok := b.ready(); ok {
		t.Fatal("a result left before the first call's")
	}
	b.answer(0, answer{out: "first"})
	var got []int
	for {
		k, _, ok := b.ready()
		if !ok {
			break
		}
		got = append(got, k)
	}
	if !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("results left in order %v, want [0 1 2]", got)
	}
	if !b.idle() {
		t.Fatalf("not idle with every call answered (waiting %d)", b.waiting)
	}
	b.reset(make([]model.ToolCall, 1), 1)
	if b.idle() {
		t.Fatal("idle with a call not run yet")
	}
}
