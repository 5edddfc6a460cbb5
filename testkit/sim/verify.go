package sim

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// maxInFlight is what backpressure allows between a run's models and the
// journal: the outbox window, plus the chunk each stream holds while it
// waits for a credit.
const maxInFlight = actors.StreamWindow + 64

// readAll reads every event the journal keeps of every session.
func (d *driver) readAll() (map[messages.SessionID][]*messages.Encoded, error) {
	keys, err := d.w.j.Sessions(d.ctx)
	if err != nil {
		return nil, err
	}
	out := map[messages.SessionID][]*messages.Encoded{}
	for _, k := range keys {
		var after uint64
		for {
			page, err := d.w.j.ReadAfter(d.ctx, k, after, 4096)
			if err != nil {
				return nil, fmt.Errorf("read session %s after %d: %w", k, after, err)
			}
			if len(page) == 0 {
				break
			}
			out[k] = append(out[k], page...)
			after = page[len(page)-1].Seq
		}
	}
	return out, nil
}

// envelopes decodes encs, on every core (a big council's journal is most
// of the checking's cost).
func envelopes(encs []*messages.Encoded) ([]*messages.Envelope, error) {
	out := make([]*messages.Envelope, len(encs))
	errs := make([]error, len(encs))
	workers := min(runtime.GOMAXPROCS(0), 1+len(encs)/1024)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(encs); i += workers {
				out[i], errs[i] = encs[i].Envelope()
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("seq %d: %w", encs[i].Seq, err)
		}
	}
	return out, nil
}

// verify checks the system's invariants at the end of a simulation.
func (d *driver) verify() {
	if d.w.j == nil {
		return
	}
	f := &d.w.flight
	f.mu.Lock()
	if f.worst > maxInFlight {
		d.fail("backpressure: %d streamed events of run %s were between its models and the journal (bound %d)", f.worst, f.worstRun, maxInFlight)
	}
	f.mu.Unlock()

	all, err := d.readAll()
	if err != nil {
		d.fail("read the journal: %v", err)
		return
	}
	var bySeq map[uint64]*messages.Encoded
	var decoded map[uint64]*messages.Envelope // the journal's, decoded once
	var events []*messages.Encoded
	for key, encs := range all {
		events = append(events, encs...)
		envs, err := envelopes(encs)
		if err != nil {
			d.fail("journal session %s: %v", key, err)
			continue
		}
		decoded = make(map[uint64]*messages.Envelope, len(envs))
		for _, env := range envs {
			decoded[env.Seq] = env
		}
		// A repaired journal lost events in the middle of runs: what
		// follows the loss cannot be a valid continuation of what it
		// lost, so only the checks below (every run ends, no seq reused)
		// apply to it.
		if !d.w.repaired {
			partial := len(encs) > 0 && encs[0].Seq != 1 || d.w.sc.Retention > 0
			for _, v := range check(envs, partial) {
				d.fail("journal: %s", v)
			}
			if d.w.opts.Check != nil {
				if err := d.w.opts.Check(envs); err != nil {
					d.fail("check: %v", err)
				}
			}
		}
		bySeq = make(map[uint64]*messages.Encoded, len(encs))
		for _, e := range encs {
			bySeq[e.Seq] = e
		}
	}
	d.res.Events = len(events)
	d.res.Digest = digest(events)
	if d.w.opts.KeepJournal {
		for _, e := range events {
			d.res.Journal = append(d.res.Journal, fmt.Sprintf("%d %s", e.Seq, e.JSON))
		}
	}
	d.checkRuns(bySeq)
	d.checkNoneOpen()
	d.checkCluster()
	head, _ := d.w.j.Head(d.ctx, journalKey)
	for _, c := range d.clients {
		d.checkClient(c, bySeq, decoded, head)
	}
}

func check(envs []*messages.Envelope, partial bool) []testkit.Violation {
	if partial {
		return testkit.CheckPartial(envs)
	}
	return testkit.Check(envs)
}

// checkRuns: every run ended with exactly one terminal event, and an
// accepted abort ended its run with run_error{code:"aborted"}.
func (d *driver) checkRuns(bySeq map[uint64]*messages.Encoded) {
	terminals := map[messages.RunID]int{}
	for _, e := range bySeq {
		if e.Type.Terminal() {
			terminals[e.RunID]++
		}
	}
	for _, id := range d.runs {
		if d.lost[id] {
			continue
		}
		info, ok, err := d.w.j.Run(d.ctx, id)
		switch {
		case err != nil:
			d.fail("run %s: %v", id, err)
			continue
		case !ok && d.w.repaired:
			continue // its start was lost with the damaged log
		case !ok:
			d.fail("run %s is not in the journal's catalogue", id)
			continue
		case info.LastSeq == 0:
			d.fail("run %s never ended", id)
			continue
		}
		if n := terminals[id]; n > 1 {
			d.fail("run %s has %d terminal events", id, n)
		}
		last := bySeq[info.LastSeq]
		if last == nil || !d.aborted[id] || d.w.repaired {
			// A repair may have cut the abort's record: the run went on.
			continue
		}
		env, err := last.Envelope()
		if err != nil {
			continue
		}
		if p, ok := env.Payload.(*messages.RunErrorPayload); !ok || p.Code != messages.ErrCodeAborted {
			d.fail("run %s: its abort was accepted, yet it ended with %s", id, describe(env))
		}
	}
}

// checkNoneOpen: once every run has ended, no interrupt is listed as
// pending (the journal's side is testkit's rule interrupts-closed).
func (d *driver) checkNoneOpen() {
	for _, in := range d.pendingInterrupts() {
		d.fail("interrupt %s of run %s is still pending after every run ended", in.InterruptID, in.RunID)
	}
}

func describe(env *messages.Envelope) string {
	if p, ok := env.Payload.(*messages.RunErrorPayload); ok {
		return fmt.Sprintf("%s{code:%q}", env.Type, p.Code)
	}
	return string(env.Type)
}

// checkClient: what a client received is a valid stream window, every
// event of it is in the journal with the same bytes (no seq handed out
// twice, nothing acknowledged lost), and nothing is beyond the head.
func (d *driver) checkClient(c *client, bySeq map[uint64]*messages.Encoded, decoded map[uint64]*messages.Envelope, head uint64) {
	for _, p := range c.problems() {
		d.fail("client %d (%s): %s", c.id, c.kind, p)
	}
	got, _ := c.received()
	if len(got) == 0 {
		return
	}
	envs := make([]*messages.Envelope, len(got))
	for i, e := range got {
		if j := bySeq[e.Seq]; j != nil && bytes.Equal(j.JSON, e.JSON) && j.Type == e.Type {
			envs[i] = decoded[e.Seq] // the same bytes: decoded once
			continue
		}
		env, err := e.Envelope()
		if err != nil {
			d.fail("client %d: seq %d: %v", c.id, e.Seq, err)
			return
		}
		if env.Seq != e.Seq || env.Type != e.Type {
			// An SSE frame's id and event, or what a WebSocket client read
			// of a line, must be its envelope's seq and type.
			d.fail("client %d (%s): a frame of seq %d, type %s carries the envelope of seq %d, type %s", c.id, c.kind, e.Seq, e.Type, env.Seq, env.Type)
			return
		}
		envs[i] = env
	}
	if !d.w.repaired {
		// A replay_truncated marker stands for events the client can no
		// longer get (retention): each stretch between markers is a
		// window of its own.
		from := 0
		for i := 0; i <= len(envs); i++ {
			if i < len(envs) && envs[i].Type != messages.ReplayTruncated {
				continue
			}
			for _, v := range testkit.CheckPartial(envs[from:i]) {
				d.fail("client %d: %s", c.id, v)
			}
			from = i + 1
		}
	}
	d.checkMarkers(c, got, envs)
	for i := 1; i < len(got); i++ {
		if got[i].Seq <= got[i-1].Seq && got[i].Type != messages.ReplayTruncated {
			d.fail("client %d: seq %d after seq %d (a duplicate or a step back)", c.id, got[i].Seq, got[i-1].Seq)
			break
		}
	}
	d.res.Delivered += len(got)
	if c.kind != direct {
		d.res.HTTP += len(got)
		c.mu.Lock()
		d.res.Restarts += c.restarts
		c.mu.Unlock()
	}
	for _, e := range got {
		if e.Type == messages.ReplayTruncated {
			continue
		}
		if e.Seq > head {
			d.fail("client %d got seq %d, beyond the journal's head %d", c.id, e.Seq, head)
			return
		}
		if j := bySeq[e.Seq]; j != nil && !bytes.Equal(j.JSON, e.JSON) {
			d.fail("seq %d handed out twice: client %d got %s, the journal now holds %s", e.Seq, c.id, e.Type, j.Type)
			return
		}
	}
}

// checkMarkers: a replay_truncated marker stands just before the first
// event the journal still had (its seq is first_retained-1), says what
// the client had (after: the seq it asked to resume after), skips
// something (first_retained > after+1), and the next event the client
// got is the first retained one.
func (d *driver) checkMarkers(c *client, got []*messages.Encoded, envs []*messages.Envelope) {
	for i, env := range envs {
		p, ok := env.Payload.(*messages.ReplayTruncatedPayload)
		if !ok {
			continue
		}
		d.res.Markers++
		switch {
		case env.Seq != p.FirstRetained-1:
			d.fail("client %d: replay_truncated has seq %d; want first_retained-1 = %d", c.id, env.Seq, p.FirstRetained-1)
		case p.FirstRetained <= p.After+1:
			d.fail("client %d: replay_truncated after %d, first retained %d: nothing was skipped", c.id, p.After, p.FirstRetained)
		case i+1 < len(got) && got[i+1].Type != messages.ReplayTruncated && got[i+1].Seq != p.FirstRetained:
			d.fail("client %d: replay_truncated says the first retained seq is %d, and seq %d came next", c.id, p.FirstRetained, got[i+1].Seq)
		case i > 0 && got[i-1].Type != messages.ReplayTruncated && got[i-1].Seq > p.After:
			d.fail("client %d: replay_truncated after %d, but the client already had seq %d", c.id, p.After, got[i-1].Seq)
		}
	}
}

// checkParked: after a restart, every interrupt the journal shows raised
// and not closed, of a run that has not ended, is listed as pending.
func (d *driver) checkParked() {
	all, err := d.readAll()
	if err != nil {
		d.fail("read the journal after a restart: %v", err)
		return
	}
	open := map[string]messages.RunID{}
	for _, encs := range all {
		for _, e := range encs {
			switch e.Type {
			case messages.InterruptRaised, messages.InterruptResolved, messages.InterruptExpired:
			default:
				continue
			}
			env, err := e.Envelope()
			if err != nil {
				continue
			}
			switch p := env.Payload.(type) {
			case *messages.InterruptRaisedPayload:
				open[p.InterruptID] = env.RunID
			case *messages.InterruptResolvedPayload:
				delete(open, p.InterruptID)
			case *messages.InterruptExpiredPayload:
				delete(open, p.InterruptID)
			}
		}
	}
	listed := map[string]bool{}
	for _, in := range d.pendingInterrupts() {
		listed[in.InterruptID] = true
	}
	for id, run := range open {
		info, ok, err := d.w.j.Run(d.ctx, run)
		if err != nil || !ok || info.LastSeq != 0 {
			continue // the run ended: its interrupts with it
		}
		if !listed[id] {
			d.fail("after restart %d: interrupt %s of live run %s is in the journal but not pending", d.crashes, id, run)
		}
	}
}
