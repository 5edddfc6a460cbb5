package openai

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/model"
)

// breaker is a Model's circuit breaker: one per endpoint, shared by every
// agent of every run the Model serves. After threshold consecutive
// failures of the endpoint itself (unreachable, 5xx, a dropped
// connection) it opens: new turns fail at once with model_unavailable
// instead of each retrying on its own (N agents × attempts × backoff of an
// outage), and a probe asks the endpoint (GET /models) with backoff until
// it answers (any status below 500), which closes it.
type breaker struct {
	threshold int // <= 0: never opens
	probe     func(ctx context.Context) error
	sleep     func(ctx context.Context, d time.Duration) error
	now       func() time.Time
	log       *slog.Logger
	url       string

	mu      sync.Mutex
	fails   int
	open    bool
	since   time.Time
	reason  string
	stopped bool
	// closed is closed when the breaker closes again (or stops): what
	// turns waiting for the endpoint (wait) watch. Made when it opens.
	closed chan struct{}

	ctx    context.Context // ends at stop: the probe with it
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Probe backoff: the first probe a second after the breaker opens, then
// doubling, at most 30 s apart.
const (
	probeFirst = time.Second
	probeMax   = 30 * time.Second
	probeWait  = 5 * time.Second // one probe's bound
)

func newBreaker(threshold int, url string, probe func(context.Context) error, sleep func(context.Context, time.Duration) error, now func() time.Time, log *slog.Logger) *breaker {
	ctx, cancel := context.WithCancel(context.Background())
	return &breaker{threshold: threshold, url: url, probe: probe, sleep: sleep, now: now, log: log, ctx: ctx, cancel: cancel}
}

// allow is nil while the breaker is closed, else the turn's error.
func (b *breaker) allow() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return nil
	}
	return &model.Error{Code: model.CodeUnavailable,
		Message: fmt.Sprintf("%s has failed %d times in a row since %s (last: %s); waiting for it to answer again", b.url, b.fails, b.since.UTC().Format(time.RFC3339), b.reason)}
}

// unreachableThreshold: connection refused, DNS and dial failures in a
// row that open the breaker (sooner than 5xx: nothing listens there, and
// retrying each turn on its own only delays every run's clear error).
const unreachableThreshold = 2

// failed counts a failure of the endpoint; the threshold-th in a row
// opens the breaker and starts the probe (unreachable: see
// unreachableThreshold).
func (b *breaker) failed(reason string, unreachable bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fails++
	b.reason = reason
	threshold := b.threshold
	if unreachable {
		threshold = min(threshold, unreachableThreshold)
	}
	if b.open || b.stopped || b.threshold <= 0 || b.fails < threshold {
		return
	}
	b.open, b.since = true, b.now()
	b.closed = make(chan struct{})
	b.log.Warn("model endpoint unavailable: new turns fail at once until it answers again", "url", b.url, "failures", b.fails, "last", reason)
	b.wg.Add(1)
	go b.probeLoop() // owned by the breaker: stop ends and waits for it
}

// succeeded resets the count of failures in a row.
func (b *breaker) succeeded() {
	b.mu.Lock()
	b.fails = 0
	b.mu.Unlock()
}

// state reports whether the breaker is open, and why.
func (b *breaker) state() (open bool, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return false, ""
	}
	return true, fmt.Sprintf("unavailable since %s: %s", b.since.UTC().Format(time.RFC3339), b.reason)
}

// probeLoop asks the endpoint with backoff until it answers, then closes
// the breaker.
func (b *breaker) probeLoop() {
	defer b.wg.Done()
	wait := probeFirst
	for {
		if b.sleep(b.ctx, wait) != nil {
			return // stopped
		}
		ctx, cancel := context.WithTimeout(b.ctx, probeWait)
		err := b.probe(ctx)
		cancel()
		if err == nil {
			b.mu.Lock()
			b.open, b.fails, b.reason = false, 0, ""
			close(b.closed)
			b.mu.Unlock()
			b.log.Info("model endpoint answers again", "url", b.url)
			return
		}
		b.mu.Lock()
		b.reason = "probe: " + err.Error()
		b.mu.Unlock()
		wait = min(wait*2, probeMax)
	}
}

// wait returns nil once the breaker is closed (at once if it is), or
// the turn's error (model_unavailable) when ctx ends first or the breaker
// stops: the "wait" mode of Config.WaitWhenUnavailable, where a turn
// during an outage waits for the probe instead of failing, bounded by
// its context (the engine's turn timeout).
func (b *breaker) wait(ctx context.Context) error {
	for {
		b.mu.Lock()
		if !b.open {
			b.mu.Unlock()
			return nil
		}
		closed, stopped := b.closed, b.stopped
		b.mu.Unlock()
		if stopped {
			return b.allow()
		}
		select {
		case <-closed:
			// Closed by the probe, or by stop: look again.
		case <-ctx.Done():
			if err := b.allow(); err != nil {
				var me *model.Error
				if errors.As(err, &me) {
					me.Message += fmt.Sprintf(" (the turn waited for it until its context ended: %v)", context.Cause(ctx))
				}
				return err
			}
			return ctx.Err()
		}
	}
}

// stop ends the probe, if any, and waits for it; turns waiting for the
// endpoint fail.
func (b *breaker) stop() {
	b.mu.Lock()
	b.stopped = true
	if b.open {
		close(b.closed) // the probe, which alone closes it otherwise, is ending
	}
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
}

// probeModels is the breaker's probe: GET {base}/models, answered when
// the status is below 500 (a 401 or 404 still says the endpoint is up).
func probeModels(client *http.Client, base, key string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/models", nil)
		if err != nil {
			return err
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode >= 500 {
			return fmt.Errorf("GET /models: %s", res.Status)
		}
		return nil
	}
}
