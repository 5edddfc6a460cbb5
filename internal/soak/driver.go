package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conclave-ai/conclave/internal/benchkit"
	"github.com/conclave-ai/conclave/internal/routine"
	"github.com/conclave-ai/conclave/messages"
)

// RunTally is what the driver saw.
type RunTally struct {
	// Requested is how many runs the driver set out to run.
	Requested int `json:"requested"`
	// Created counts 201 answers to POST /api/v1/runs.
	Created int `json:"created"`
	// Errors counts runs that could not be created, by error code ("http_<status>"
	// without a JSON error body, "transport" for a failed request). 429s are
	// retried and only count here when retrying gave up.
	Errors map[string]int `json:"errors,omitempty"`
	// Retried counts 429 answers that were retried, by code.
	Retried map[string]int `json:"retried,omitempty"`
	// Outcomes counts created runs by their final status.
	Outcomes map[messages.RunStatus]int `json:"outcomes"`
	// NotFinished counts created runs that did not end finished, or were
	// not seen to end within the run timeout (TimedOut).
	NotFinished int `json:"not_finished"`
	TimedOut    int `json:"timed_out"`
	// PollErrors counts failed GET /api/v1/runs/{id}, by code.
	PollErrors map[string]int `json:"poll_errors,omitempty"`
	Polls      int            `json:"polls"`
	// Duration is from the POST to the poll that saw the run ended (so up
	// to one poll interval, at most maxPoll, late).
	Duration LatencySummary `json:"duration"`
}

// LatencySummary summarizes a histogram of durations.
type LatencySummary struct {
	Count uint64        `json:"count"`
	P50   time.Duration `json:"p50_ns"`
	P99   time.Duration `json:"p99_ns"`
	Max   time.Duration `json:"max_ns"`
	Mean  time.Duration `json:"mean_ns"`
}

func summarize(h *benchkit.Histogram) LatencySummary {
	return LatencySummary{Count: h.Count(), P50: h.Quantile(0.5), P99: h.Quantile(0.99), Max: h.Max(), Mean: h.Mean()}
}

// Polling a run: the first poll after firstPoll, then twice as long each
// time up to maxPoll, so a short run is seen ending soon after it did and
// a slow one costs at most one request per maxPoll.
const (
	firstPoll = 2 * time.Millisecond
	maxPoll   = 50 * time.Millisecond
	// A 429 (the concurrent-runs quota: a run's slot is freed when its
	// supervisor stopped, just after its summary says it ended) is retried
	// after retryPause, for at most retryFor.
	retryPause = 10 * time.Millisecond
	retryFor   = 30 * time.Second
	// maxErrorBody bounds how much of an error answer is read.
	maxErrorBody = 4 << 10
)

// driver keeps o.InFlight runs in flight until o.Runs have ended.
type driver struct {
	o      Options
	base   string
	hc     *http.Client
	recent *recentRuns
	// warm receives one value when the warm-up ended.
	warm chan struct{}

	next  atomic.Int64 // index of the next run to start
	ended atomic.Int64 // runs ended (created or not)

	mu    sync.Mutex // guards tally and hist
	tally RunTally
	hist  benchkit.Histogram
}

func newDriver(o Options, base string, hc *http.Client, recent *recentRuns) *driver {
	return &driver{o: o, base: base, hc: hc, recent: recent, warm: make(chan struct{}, 1),
		tally: RunTally{Requested: o.Runs, Errors: map[string]int{}, Retried: map[string]int{},
			Outcomes: map[messages.RunStatus]int{}, PollErrors: map[string]int{}}}
}

// runsEnded is how many runs have ended so far.
func (d *driver) runsEnded() int { return int(d.ended.Load()) }

// run drives the runs up to index upto (excluded) and returns once they
// all ended or ctx ended. Calls must not overlap; each goes on from where
// the last one stopped.
func (d *driver) run(ctx context.Context, upto int) {
	if d.next.Load() == 0 && d.o.warmupRuns() == 0 {
		d.warm <- struct{}{}
	}
	var workers routine.Group
	for w := range d.o.InFlight {
		rng := rand.New(rand.NewPCG(d.o.Seed, uint64(d.next.Load())<<16|uint64(w)))
		workers.Go(func() {
			for ctx.Err() == nil {
				i, ok := d.take(upto)
				if !ok {
					return
				}
				d.one(ctx, int(i), rng)
				if n := d.ended.Add(1); int(n) == d.o.warmupRuns() {
					d.warm <- struct{}{} // buffered; sent once
				}
			}
		})
	}
	_ = workers.Wait(context.Background()) // each request is bounded by the client's timeout
}

// take claims the index of the next run, if it is below upto.
func (d *driver) take(upto int) (int64, bool) {
	for {
		i := d.next.Load()
		if i >= int64(upto) {
			return 0, false
		}
		if d.next.CompareAndSwap(i, i+1) {
			return i, true
		}
	}
}

// startRun is the body of POST /api/v1/runs.
type startRun struct {
	Question  string          `json:"question"`
	SessionID string          `json:"session_id,omitempty"`
	Scenario  json.RawMessage `json:"scenario"`
}

// one creates run i and follows it to its end.
func (d *driver) one(ctx context.Context, i int, rng *rand.Rand) {
	body := startRun{Question: "soak run " + strconv.Itoa(i), Scenario: d.o.Scenario}
	if d.o.Sessions > 0 {
		body.SessionID = "soak-" + strconv.Itoa(i%d.o.Sessions)
	}
	b, err := json.Marshal(body)
	if err != nil {
		d.count(d.tally.Errors, "encode")
		return
	}
	start := d.o.Now()
	created, ok := d.create(ctx, b)
	if !ok {
		return
	}
	d.recent.add(string(created.SessionID), string(created.RunID))
	sum, ok := d.follow(ctx, string(created.RunID), rng)
	elapsed := d.o.Now().Sub(start)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !ok {
		if ctx.Err() == nil {
			d.tally.TimedOut++
			d.tally.NotFinished++
		}
		return
	}
	d.hist.Record(elapsed)
	d.tally.Outcomes[sum.Status]++
	if sum.Status != messages.StatusFinished {
		d.tally.NotFinished++
	}
	d.recent.ended(string(created.SessionID), string(created.RunID), sum.LastSeq)
}

// create posts body until it is answered 201 or an error that is not a
// 429, or retrying 429s gave up.
func (d *driver) create(ctx context.Context, body []byte) (messages.RunCreated, bool) {
	var created messages.RunCreated
	deadline := d.o.Now().Add(retryFor)
	for {
		status, code, err := d.do(ctx, http.MethodPost, "/api/v1/runs", body, &created)
		switch {
		case ctx.Err() != nil:
			return created, false
		case err != nil:
			d.count(d.tally.Errors, "transport")
			return created, false
		case status == http.StatusCreated:
			d.mu.Lock()
			d.tally.Created++
			d.mu.Unlock()
			return created, true
		case status == http.StatusTooManyRequests && d.o.Now().Before(deadline):
			d.count(d.tally.Retried, code)
			if sleep(ctx, retryPause) != nil {
				return created, false
			}
		default:
			d.count(d.tally.Errors, code)
			return created, false
		}
	}
}

// follow polls the run until its status is terminal; ok is false when it
// was not seen to end within the run timeout.
func (d *driver) follow(ctx context.Context, run string, rng *rand.Rand) (messages.RunSummary, bool) {
	var sum messages.RunSummary
	deadline := d.o.Now().Add(d.o.RunTimeout)
	// A little jitter keeps the workers' polls from falling into step.
	wait := firstPoll + time.Duration(rng.Int64N(int64(firstPoll)))
	for d.o.Now().Before(deadline) {
		if sleep(ctx, wait) != nil {
			return sum, false
		}
		wait = min(2*wait, maxPoll)
		status, code, err := d.do(ctx, http.MethodGet, "/api/v1/runs/"+run, nil, &sum)
		d.mu.Lock()
		d.tally.Polls++
		d.mu.Unlock()
		switch {
		case ctx.Err() != nil:
			return sum, false
		case err != nil:
			d.count(d.tally.PollErrors, "transport")
		case status != http.StatusOK:
			d.count(d.tally.PollErrors, code)
		case sum.Status.Terminal():
			return sum, true
		}
	}
	return sum, false
}

// do sends one request and decodes a 2xx answer into out. code is the
// error code of any other answer.
func (d *driver) do(ctx context.Context, method, path string, body []byte, out any) (status int, code string, err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.base+path, rd)
	if err != nil {
		return 0, "", err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, "", fmt.Errorf("soak: %s %s: decode the answer: %w", method, path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // let the connection be reused
		return resp.StatusCode, "", nil
	}
	return resp.StatusCode, errorCode(resp), nil
}

// errorCode reads the code of a JSON error answer, or "http_<status>".
func errorCode(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var eb messages.ErrorBody
	if err := json.Unmarshal(b, &eb); err == nil && eb.Error.Code != "" {
		return eb.Error.Code
	}
	return "http_" + strconv.Itoa(resp.StatusCode)
}

// count adds one to m[key], m being one of the tally's maps.
func (d *driver) count(m map[string]int, key string) {
	d.mu.Lock()
	m[key]++
	d.mu.Unlock()
}

// result returns the tally; call it after run returned.
func (d *driver) result() RunTally {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tally
	t.Duration = summarize(&d.hist)
	return t
}

// sleep waits d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return errors.Join(errStopped, ctx.Err())
	}
}
