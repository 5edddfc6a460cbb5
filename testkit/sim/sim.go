package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/tool"
)

// Options are what a simulation runs on besides its scenario: your own
// models and tools join it here (they are wrapped by WrapModel and
// WrapTool), and the limits of the driver.
//
// Model, Models and Tools mean what they mean in conclave.Options, so the
// options a program builds its engine with carry over.
type Options struct {
	// Model answers the turns of every run. Set Model or Models, not both.
	Model model.Model
	// Models builds each run's model from its scenario. Default (neither
	// Model nor Models): the scripted model.
	Models model.Factory
	// Tools the agents may call. Default: the scripted search and publish.
	// With the scripted model and tools of your own, the scripted search is
	// there too unless one of Tools is named "search", as in conclave.New.
	Tools []tool.Tool
	// Check is your own invariant, checked at the end of each simulation
	// (unless a repair of a damaged journal lost events) on the session's
	// events in the journal, in seq order: every event from seq 1, or the
	// newest ones if Scenario.Retention trimmed the others. An error is a
	// failure of the simulation, in Result.Failures as "check: …", so
	// Shrink can shrink it and its seed reproduces it. It runs in the
	// simulation's synctest bubble, after the engine went quiet.
	Check func(events []*messages.Envelope) error
	// Logger receives the engine's and the journal's logs. Default: discard.
	Logger *slog.Logger
	// Concurrency is the engine's default nodes per wave (0: the engine's).
	Concurrency int
	// KeepJournal keeps the journal's events in Result.Journal.
	KeepJournal bool
	// MaxSteps fails a simulation that has not ended after this many
	// steps. Default 200,000.
	MaxSteps int
}

// Simulation limits, in virtual time.
const (
	// DriverPatience is how long the driver waits, with nothing to do, for
	// a timer of the engine (a restart's backoff, a slow tool) before it
	// counts an idle round; 30 idle rounds in a row fail the simulation.
	DriverPatience = time.Minute
	// ToolTimeout is the engine's tool timeout: what a hanging tool costs.
	ToolTimeout = 30 * time.Second
)

// Result is what a simulation did and found.
type Result struct {
	Seed      uint64 `json:"seed"`
	Steps     int    `json:"steps"`
	Runs      int    `json:"runs"`
	Events    int    `json:"events"`    // in the journal at the end
	Delivered int    `json:"delivered"` // events received by clients, all together
	Crashes   int    `json:"crashes"`
	Resumes   int    `json:"resumes"`
	Aborts    int    `json:"aborts"`  // accepted
	Sleeps    int    `json:"sleeps"`  // runs put to sleep (and woken by what came next)
	Markers   int    `json:"markers"` // replay_truncated markers clients got (retention outran them)
	// HTTP is how many of the events delivered went to the clients that
	// read the SSE or WebSocket stream through the transport server, and
	// Restarts how many times a WebSocket client's subscribe frame
	// restarted its stream on an open connection.
	HTTP     int `json:"http"`
	Restarts int `json:"restarts"`
	// CommitCrashes counts the power losses inside a group commit.
	CommitCrashes int `json:"commit_crashes"`
	// In cluster mode (Scenario.Nodes > 1): Takeovers counts the sessions
	// a node took over from a crashed or paused one, Stale the paused
	// owners that resumed after that, and Fenced the appends the shared
	// journal refused to a node that no longer owned the session.
	Takeovers int      `json:"takeovers,omitempty"`
	Stale     int      `json:"stale,omitempty"`
	Fenced    int      `json:"fenced,omitempty"`
	Failures  []string `json:"failures,omitempty"`
	// Digest is a SHA-256 of the journal's events at the end (seq and
	// bytes): the same seed gives the same digest.
	Digest string `json:"digest"`
	// Virtual is how much virtual time the simulation took.
	Virtual time.Duration `json:"virtual"`
	// Journal is the journal's events at the end, one line each (seq and
	// JSON), with Options.KeepJournal.
	Journal []string `json:"-"`
	// Trace is the driver's decisions, one line per step, with
	// Options.KeepJournal.
	Trace []string `json:"-"`
}

// Failed reports whether an invariant did not hold.
func (r Result) Failed() bool { return len(r.Failures) > 0 }

// Run simulates sc in a synctest bubble of t and returns what it found.
// Invariant violations are in Result.Failures, not reported to t, so that
// a caller can shrink a failing scenario; t fails only when the
// simulation itself cannot run (or a goroutine is left behind, which
// synctest reports).
func Run(t *testing.T, sc Scenario, opts Options) Result {
	var res Result
	synctest.Test(t, func(t *testing.T) {
		res = run(sc, opts)
	})
	return res
}

// driver takes the simulation's decisions, all from the seed.
type driver struct {
	w     *world
	rng   *rand.Rand
	ctx   context.Context
	res   *Result
	step  int
	runs  []messages.RunID
	ended map[messages.RunID]bool
	// aborted: runs whose abort was accepted (journaled: it holds across
	// crashes, not across a repair that cut it).
	aborted map[messages.RunID]bool
	lost    map[messages.RunID]bool // runs whose start a repaired journal lost
	clients []*client
	crashes int
	aborts  []int // steps of the aborts planned and not yet made
	fail    func(format string, args ...any)
	began   time.Time
}

func run(sc Scenario, opts Options) (res Result) {
	res.Seed = sc.Seed
	fails := map[string]bool{}
	failf := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if !fails[msg] && len(res.Failures) < 20 {
			fails[msg] = true
			res.Failures = append(res.Failures, msg)
		}
	}
	ctx := context.Background()
	w, err := newWorld(sc, opts)
	if err != nil {
		failf("setup: %v", err)
		return res
	}
	d := &driver{w: w, rng: rand.New(rand.NewPCG(sc.Seed, 0xd21fe2)), ctx: ctx, res: &res,
		ended: map[messages.RunID]bool{}, aborted: map[messages.RunID]bool{}, lost: map[messages.RunID]bool{}, fail: failf, began: time.Now()}
	for i := range sc.Clients {
		d.clients = append(d.clients, newClient(i, sc.Seed, sc.clientKind(i)))
	}
	if err := w.boot(ctx); err != nil {
		failf("boot: %v", err)
		return res
	}
	d.loop(opts.MaxSteps)
	d.drain()
	d.verify()
	for _, c := range d.clients {
		c.disconnect()
	}
	if err := w.halt(ctx); err != nil && !isJournalFailure(err) {
		failf("shutdown: %v", err)
	}
	res.Virtual = time.Since(d.began)
	// Let the timers the engine left behind fire (protoactor's dead-letter
	// throttle ends one interval after a dead letter): virtual time.
	time.Sleep(time.Minute)
	return res
}

// sleepEvery is how often, in steps, the driver puts the runs parked at
// that moment to sleep.
const sleepEvery = 5

// loop takes steps until every run has ended and nothing waits.
func (d *driver) loop(maxSteps int) {
	if maxSteps <= 0 {
		maxSteps = 200_000
	}
	sc := d.w.sc
	idle := 0
	for d.step = 1; ; d.step++ {
		synctest.Wait()
		if d.w.hang != nil && d.w.hang.held() {
			d.res.CommitCrashes++
			d.restart(func() error { return d.w.crashInCommit(d.ctx) })
		}
		d.res.Steps = d.step
		if d.step > maxSteps {
			d.fail("not over after %d steps: runs %v still live", maxSteps, d.live())
			return
		}
		if d.w.e == nil { // a failed restart
			return
		}
		d.planned(sc)
		if d.w.e == nil {
			return
		}
		synctest.Wait() // what the planned actions set off settles first
		gates := d.w.sched.Pending()
		interrupts := d.pendingInterrupts()
		if len(gates) == 0 && len(interrupts) == 0 {
			if len(d.live()) == 0 {
				if d.w.faults != nil && d.w.faults.err() != nil {
					// The disk failed as the last runs ended: their ends
					// were refused. The server restarts (as the real one
					// exits on a failed journal), and recovery ends them.
					d.crash(false)
					continue
				}
				if d.allStarted() {
					return
				}
				continue // nothing runs: on to the step the next run starts at
			}
			if d.w.opts.KeepJournal {
				d.res.Trace = append(d.res.Trace, fmt.Sprintf("step %d at %v: idle, live %v", d.step, time.Since(d.began), d.live()))
			}
			if idle++; idle > 30 {
				d.fail("stalled at step %d: runs %v live, no gate and no interrupt waits", d.step, d.live())
				return
			}
			d.waitForGate()
			continue
		}
		idle = 0
		if len(interrupts) > 0 && d.step%sleepEvery == 0 {
			// Every parked run falls asleep (its actors stop; it wakes on
			// the next answer, timeout or abort, rebuilt from the journal).
			// On a step count, not a draw: the seeds' choices stay theirs.
			before := d.w.e.Stats().AsleepRuns
			d.w.e.SleepParked(0)
			synctest.Wait()
			d.res.Sleeps += int(max(0, d.w.e.Stats().AsleepRuns-before))
		}
		if d.w.opts.KeepJournal {
			d.res.Trace = append(d.res.Trace, fmt.Sprintf("step %d at %v: gates %v interrupts %d", d.step, time.Since(d.began), gates, len(interrupts)))
		}
		if slices.Contains(sc.CommitCrashes, d.step) && len(gates) > 0 {
			// A gate goes on, and the power fails inside the first group
			// commit it sets off (checked at the next step). Only a gate:
			// an answer or a client's move may wait on the held journal.
			d.w.hang.arm()
			d.w.sched.Release(gates[d.rng.IntN(len(gates))])
			time.Sleep(time.Duration(1 + d.rng.IntN(999_999)))
			continue
		}
		switch r := d.rng.IntN(100); {
		case len(interrupts) > 0 && (r < 15 || len(gates) == 0):
			d.answer(interrupts[d.rng.IntN(len(interrupts))])
		case r < 20 && len(d.clients) > 0:
			d.clientMove(d.clients[d.rng.IntN(len(d.clients))])
		default:
			d.w.sched.Release(gates[d.rng.IntN(len(gates))])
		}
		time.Sleep(time.Duration(1 + d.rng.IntN(999_999))) // the clock moves between steps (up to 1 ms)
	}
}

// waitForGate lets virtual time pass until a gate is reached (a backoff
// or a slow tool ends) or DriverPatience passed.
func (d *driver) waitForGate() {
	select {
	case <-d.w.sched.Arrived():
	default:
	}
	select {
	case <-d.w.sched.Arrived():
	case <-time.After(DriverPatience):
	}
}

// planned does what the scenario planned for this step. Each action
// settles (synctest.Wait) before the next, so that what one sets off
// never races the next.
func (d *driver) planned(sc Scenario) {
	for _, r := range sc.Runs {
		if r.At == d.step {
			d.start(r.Start)
			synctest.Wait()
		}
	}
	if d.w.faults != nil && d.w.faults.err() != nil { // the disk failed: the server is restarted
		d.crash(false)
		return
	}
	if slices.Contains(sc.Crashes, d.step) {
		d.crash(sc.DamageWAL && d.crashes == 0)
	}
	if d.w.cl != nil && d.w.e != nil && slices.Contains(sc.Pauses, d.step) {
		d.pause()
	}
	if d.w.e == nil {
		return
	}
	if slices.Contains(sc.DiskFaults, d.step) {
		d.w.faults.after = d.rng.IntN(2) == 0
		d.w.faults.armed.Store(true)
	}
	if slices.Contains(sc.Aborts, d.step) {
		d.aborts = append(d.aborts, d.step)
	}
	d.abortWhenDue()
	synctest.Wait()
	if slices.Contains(sc.Steers, d.step) {
		if live := d.live(); len(live) > 0 {
			_, _ = d.w.e.Steer(d.ctx, messages.Steer{RunID: live[d.rng.IntN(len(live))], SteerNote: messages.SteerNote{Note: "sim: weigh the risks"}})
		}
		synctest.Wait()
	}
	if slices.Contains(sc.Rewinds, d.step) {
		d.rewind()
		synctest.Wait()
	}
	if slices.Contains(sc.Stalls, d.step) {
		d.stall()
		synctest.Wait()
	}
	if sc.Retention > 0 && d.step%25 == 0 {
		d.retain(sc.Retention)
	}
}

func (d *driver) start(st messages.StartRun) {
	st.SessionID = session
	ref, err := d.w.e.StartRun(d.ctx, st)
	if err != nil {
		if d.w.faults.err() == nil { // a failed journal refuses runs: the server restarts next step
			d.fail("start a run: %v", err)
		}
		return
	}
	d.runs = append(d.runs, ref.RunID)
	d.res.Runs++
}

func (d *driver) allStarted() bool {
	for _, r := range d.w.sc.Runs {
		if r.At > d.step {
			return false
		}
	}
	return true
}

// live lists the runs that have not ended.
func (d *driver) live() []messages.RunID {
	var out []messages.RunID
	for _, id := range d.runs {
		if d.ended[id] {
			continue
		}
		sum, err := d.w.e.Run("", id)
		switch {
		case err == nil && sum.Status.Terminal():
			d.ended[id] = true
			continue
		case errors.Is(err, actors.ErrRunNotFound) && d.w.repaired:
			d.ended[id] = true // its start was lost with the damaged log
			d.lost[id] = true
			continue
		}
		out = append(out, id)
	}
	return out
}

// adopt adds the runs the journal holds that the driver did not see start:
// a run whose start failed with the journal (an fsync failure) may still
// be on the disk after the restart, and it must then finish like any.
func (d *driver) adopt() {
	live, err := d.w.j.LiveRuns(d.ctx)
	if err != nil {
		d.fail("list the live runs: %v", err)
		return
	}
	for _, r := range live {
		if !slices.Contains(d.runs, r.Run) {
			d.runs = append(d.runs, r.Run)
		}
	}
}

func (d *driver) pendingInterrupts() []messages.Interrupt {
	list, _, err := d.w.e.PendingInterrupts(d.ctx, "", session, "", 200)
	if err != nil {
		return nil
	}
	out := list[:0]
	for _, in := range list {
		if in.Status == messages.InterruptPending {
			out = append(out, in)
		}
	}
	return out
}

// answer resolves an interrupt as a human would; now and then two answers
// race, and exactly one must win.
func (d *driver) answer(in messages.Interrupt) {
	res := messages.Resume{InterruptID: in.InterruptID, Decision: messages.DecisionApprove}
	switch {
	case in.Kind == messages.InterruptInfoRequest:
		res = messages.Resume{InterruptID: in.InterruptID, Response: "forty-two"}
	case d.rng.IntN(6) == 0:
		res.Decision, res.Feedback = messages.DecisionReject, "sim: not this one"
	}
	if d.rng.IntN(8) != 0 {
		if _, err := d.w.e.Resume(res); err != nil {
			d.fail("resume %s interrupt %s (pending): %v", in.Kind, in.InterruptID, err)
			return
		}
		d.res.Resumes++
		return
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { _, errs[i] = d.w.e.Resume(res) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, actors.ErrInterruptConflict):
			d.fail("racing resume of %s: %v (want a conflict)", in.InterruptID, err)
		}
	}
	if won != 1 {
		d.fail("racing resumes of interrupt %s: %d won, want exactly 1", in.InterruptID, won)
	}
	d.res.Resumes++
}

// clientMove connects, disconnects or slows a client.
func (d *driver) clientMove(c *client) {
	if c.connected() {
		if d.rng.IntN(3) == 0 {
			c.slow = !c.slow
		}
		// Half the time a WebSocket client keeps its connection, and its
		// next connect restarts the stream on it with a subscribe frame
		// (client.park); drawn from its own generator, so the driver's
		// draws stay the same. Not under retention: a restart whose cursor
		// retention passed meanwhile would leave the client a window that
		// no marker describes exactly.
		if c.kind == ws && d.w.sc.Retention == 0 && c.rng.IntN(2) == 0 {
			c.park()
			return
		}
		c.disconnect()
		return
	}
	var after uint64
	if head, err := d.w.e.Head(d.ctx, "", session); err == nil && head > 0 && d.rng.IntN(2) == 0 {
		after = uint64(d.rng.Int64N(int64(head) + 1))
	}
	if err := c.connect(d.ctx, d.w, after); err != nil && !errors.Is(err, actors.ErrSessionNotFound) {
		d.fail("client %d subscribes: %v", c.id, err)
	}
}

// abortWhenDue makes the oldest planned abort once a synthesiser's stream
// waits at its end (the moment an abort races the run's end), or once it
// waited 200 steps for that.
func (d *driver) abortWhenDue() {
	if len(d.aborts) == 0 {
		return
	}
	for _, g := range d.w.sched.Pending() {
		if strings.Contains(g, " synthesizer ") && strings.HasSuffix(g, " end") {
			d.aborts = d.aborts[1:]
			d.abortRacing(messages.RunID(strings.Fields(g)[1]), g)
			return
		}
	}
	if d.step-d.aborts[0] >= 200 {
		d.aborts = d.aborts[1:]
		if live := d.live(); len(live) > 0 {
			id := live[d.rng.IntN(len(live))]
			d.abortRacing(id, d.pickGate(id))
		}
	}
}

// abortRacing aborts run while gate goes on: the actors are held until
// both the abort and what the gate set off are queued.
func (d *driver) abortRacing(id messages.RunID, gate string) {
	d.w.disp.Hold()
	if gate != "" {
		d.w.sched.Release(gate)
	}
	synctest.Wait()
	errc := make(chan error, 1)
	go func() { errc <- d.w.e.Abort(d.ctx, messages.AbortRun{RunID: id, Reason: "sim: abort"}) }()
	synctest.Wait()
	d.w.disp.Release()
	err := <-errc
	synctest.Wait() // the answer may come before what the abort sets off has settled
	switch {
	case err == nil:
		d.aborted[id] = true
		d.res.Aborts++
	case errors.Is(err, actors.ErrRunTerminal):
	case d.w.faults != nil && d.w.faults.err() != nil:
		// The disk failed: the abort's record was not journaled, so it
		// was not accepted (the run may go on after the restart).
	default:
		d.fail("abort %s: %v", id, err)
	}
}

// pickGate picks a gate of run, or any gate if run has none; "" if none
// waits.
func (d *driver) pickGate(run messages.RunID) string {
	gates := d.w.sched.Pending()
	if len(gates) == 0 {
		return ""
	}
	var mine []string
	for _, g := range gates {
		if strings.Contains(g, string(run)) {
			mine = append(mine, g)
		}
	}
	for _, set := range [][]string{mine, gates} {
		if len(set) > 0 {
			return set[d.rng.IntN(len(set))]
		}
	}
	return ""
}

// stall holds the actors while one model stream runs on: the journal
// cannot keep up, and backpressure must stop the stream.
func (d *driver) stall() {
	gates := d.w.sched.Pending()
	if len(gates) == 0 {
		return
	}
	d.w.disp.Hold()
	d.w.sched.Release(gates[d.rng.IntN(len(gates))])
	synctest.Wait()
	d.w.disp.Release()
}

func (d *driver) rewind() {
	for _, id := range d.runs {
		if !d.ended[id] {
			continue
		}
		ref, err := d.w.e.Rewind(d.ctx, messages.Rewind{RunID: id, Wave: 0, Note: "sim: again"})
		if err == nil {
			d.runs = append(d.runs, ref.RunID)
			d.res.Runs++
		}
		return
	}
}

func (d *driver) retain(events int) {
	if d.w.faults.err() != nil {
		return // the disk failed: the restart comes first
	}
	keys, err := d.w.j.Sessions(d.ctx)
	if err != nil {
		return
	}
	for _, k := range keys {
		if _, err := journal.ApplyRetention(d.ctx, d.w.j, k, journal.Retention{MaxEvents: uint64(events)}, time.Now()); err != nil && d.w.faults.err() == nil {
			d.fail("retention: %v", err)
		}
	}
}

// crash kills and restarts the server; clients lose their streams and
// resume from their cursors.
func (d *driver) crash(damage bool) {
	// The crash draws from a generator of its own: how much it draws
	// depends on the disk (a torn tail only where one is unsynced), and the
	// driver's later choices must not.
	rng := rand.New(rand.NewPCG(d.w.sc.Seed, uint64(d.crashes)+1))
	d.restart(func() error { return d.w.crash(d.ctx, rng, damage) })
}

// pause makes the session's owner a stale owner (world.pauseNode); the
// streams that were on it resume on another node.
func (d *driver) pause() {
	rng := rand.New(rand.NewPCG(d.w.sc.Seed, 0x57a1e+uint64(d.w.cl.stale)))
	d.replace(func() error { return d.w.pauseNode(d.ctx, rng) }, "the stale owner's replacement", func() {})
}

// restart crashes the server as crash says and restarts it; the clients
// that were connected reconnect from their cursors.
func (d *driver) restart(crash func() error) {
	d.replace(crash, fmt.Sprintf("restart after crash %d", d.crashes+1), func() {
		d.crashes++
		d.res.Crashes++
	})
}

// replace replaces the server (the session's owner, in cluster mode) as
// replace says, then calls replaced; the clients that were connected
// reconnect from their cursors.
func (d *driver) replace(replace func() error, what string, replaced func()) {
	// In cluster mode only the streams on the node replaced (the owner)
	// drop: the other nodes follow the session from the shared journal,
	// and their streams go on across the takeover.
	var gone string
	if d.w.cl != nil {
		gone = d.w.cl.nodes[d.w.cl.owner].name
	}
	if d.w.front != nil {
		// The server dies: its connections drop, and each HTTP client
		// reads the end of its stream (no final frame). Before the disk is
		// cloned, as a real crash would: a stream still open while the
		// crashed engine stops would hand out what it acknowledges after
		// the clone (a held fsync let go), which the disk does not keep.
		d.w.front.ln.cut()
	}
	var reconnect []*client
	for _, c := range d.clients {
		if gone != "" && c.at != gone {
			continue
		}
		if c.connected() {
			reconnect = append(reconnect, c)
		}
		c.disconnect() // an HTTP client's reader has returned: its connection dropped (a parked one's too)
	}
	if err := replace(); err != nil {
		d.fail("%s at step %d: %v", what, d.step, err)
		return
	}
	replaced()
	clear(d.ended) // a repair may have lost a run's end: it then goes on
	d.adopt()
	d.checkParked()
	for _, c := range reconnect {
		if err := c.connect(d.ctx, d.w, 0); err != nil {
			d.fail("client %d resumes after the restart: %v", c.id, err)
		}
	}
}

// drain lets every connected client read to the session's head.
func (d *driver) drain() {
	if d.w.e == nil {
		return
	}
	head, err := d.w.e.Head(d.ctx, "", session)
	if err != nil {
		return
	}
	for range 1000 {
		synctest.Wait()
		behind := false
		for _, c := range d.clients {
			if _, cur := c.received(); c.connected() && cur < head {
				behind = true
			}
		}
		if !behind {
			return
		}
		time.Sleep(time.Second)
	}
	d.fail("clients did not catch up with seq %d", head)
}

// digest hashes the journal's events.
func digest(events []*messages.Encoded) string {
	h := sha256.New()
	for _, e := range events {
		fmt.Fprintf(h, "%d %s\n", e.Seq, e.JSON)
	}
	return hex.EncodeToString(h.Sum(nil))
}
