package cluster_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/conclave-ai/conclave/internal/natstest"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// lostAck matches JetStream's acknowledgement of a stored publish to the
// journal's stream: of an atomic batch, or of a single message.
func lostAck(batch bool) func(string, []byte) bool {
	return func(_ string, data []byte) bool {
		var a struct {
			Stream string          `json:"stream"`
			Seq    uint64          `json:"seq"`
			Batch  string          `json:"batch"`
			Dup    bool            `json:"duplicate"`
			Error  json.RawMessage `json:"error"`
		}
		return json.Unmarshal(data, &a) == nil && a.Stream == "CONCLAVE" && a.Seq > 0 && !a.Dup && a.Error == nil && (a.Batch != "") == batch
	}
}

// The journal's answer to an append is lost after JetStream stored it
// (the stream leader killed between the two): the append is sent again
// and succeeds, so the run goes on and finishes. Two runs in one session,
// parked on their plan gate until the drop is armed: the first loses the
// acknowledgement of a single message (an event after the gate), the
// second that of the atomic batch of its run_finished (which ends it in
// the run catalogue). Each ends with one terminal event, the session's
// stream has every event once, and both are listed finished. Before the
// fix the hub failed: every later event was "not recorded" and the runs
// stayed running.
func TestEngines_LostAppendAckRunFinishes(t *testing.T) {
	srv := natstest.Start(t)
	p := natstest.StartProxy(t, srv)
	nc, err := nats.Connect(p.URL(), nats.Name(t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// A short request timeout: a lost acknowledgement is given up on, and
	// the publish sent again, after it.
	a := startNodeWith(t, nc, "a", journal.JetStreamOptions{Timeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()

	var runs []messages.RunID
	for _, batch := range []bool{false, true} {
		ref, err := a.engine.StartRun(ctx, messages.StartRun{Question: "q", HITL: messages.HITLPlan, SessionID: "s",
			Scenario: &messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4}})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, ref.RunID)
		probe, err := testkit.NewProbe(ctx, a.engine, "", "s", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer probe.Close()
		var gate string
		if _, err := probe.Until(ctx, func(env *messages.Envelope) bool {
			pl, ok := env.Payload.(*messages.InterruptRaisedPayload)
			if ok && env.RunID == ref.RunID {
				gate = pl.InterruptID
			}
			return gate != ""
		}); err != nil {
			t.Fatal(err)
		}
		dropped := p.DropOnce(lostAck(batch))
		if _, err := a.engine.Resume(messages.Resume{InterruptID: gate, Decision: messages.DecisionApprove}); err != nil {
			t.Fatal(err)
		}
		evs, err := probe.Until(ctx, testkit.TerminalOf(ref.RunID))
		if err != nil {
			t.Fatalf("run %d (the lost ack is a batch's: %v): %v", len(runs), batch, err)
		}
		select {
		case <-dropped:
		case <-ctx.Done():
			t.Fatal("no acknowledgement was dropped")
		}
		if last := evs[len(evs)-1]; last.Type != messages.RunFinished {
			t.Fatalf("run %s ended with %s", ref.RunID, last.Type)
		}
	}

	// The whole session, read back from the journal: gapless, each run
	// with one terminal event (the invariants), and both runs finished.
	probe, err := testkit.NewProbe(ctx, a.engine, "", "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	events, err := probe.Until(ctx, testkit.TerminalOf(runs[1]))
	if err != nil {
		t.Fatal(err)
	}
	for i, env := range events {
		if env.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: a gap or a duplicate", i, env.Seq)
		}
	}
	testkit.AssertInvariants(t, events)
	// A subscriber may see the events (the journal's tail) before the
	// owner has the acknowledgement the run index waits for.
	for _, id := range runs {
		until(t, 10*time.Second, "run "+string(id)+" is listed finished", func() bool {
			sum, err := a.engine.Run("", id)
			return err == nil && sum.Status == messages.StatusFinished
		})
	}
}
