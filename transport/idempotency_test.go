package transport

import (
	"fmt"
	"github.com/conclave-ai/conclave/transport/internal/httpjson"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// fakeClock is an injected clock for TTL tests. Safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// creator is a create func that counts calls and answers run ids r1, r2, ...
type creator struct {
	calls atomic.Int32
	fail  atomic.Bool   // answer an error instead
	hold  chan struct{} // when set, every call waits for it to close
}

func (c *creator) create() (messages.RunCreated, *apiError) {
	n := c.calls.Add(1)
	if c.hold != nil {
		<-c.hold
	}
	if c.fail.Load() {
		return messages.RunCreated{}, errorf(http.StatusServiceUnavailable, codeUnavailable, "engine busy")
	}
	return messages.RunCreated{RunID: messages.RunID(fmt.Sprintf("r%d", n)), SessionID: "s"}, nil
}

const testTTL = 24 * time.Hour

func TestIdempotency_SameKeyAndBodyReplays(t *testing.T) {
	t.Parallel()
	idem := newIdempotency(testTTL, newFakeClock().now)
	var c creator
	body := []byte(`{"question":"q"}`)
	first, replayed, err := idem.do("acme", "k", body, c.create)
	if err != nil || replayed || first.RunID != "r1" {
		t.Fatalf("first = %+v replayed=%v err=%v", first, replayed, err)
	}
	for range 3 {
		got, replayed, err := idem.do("acme", "k", body, c.create)
		if err != nil || !replayed || got != first {
			t.Fatalf("retry = %+v replayed=%v err=%v, want %+v replayed", got, replayed, err, first)
		}
	}
	// Keys are per tenant, and another key is another request.
	if got, replayed, _ := idem.do("globex", "k", body, c.create); replayed || got.RunID != "r2" {
		t.Fatalf("other tenant, same key = %+v replayed=%v, want a new run", got, replayed)
	}
	if got, replayed, _ := idem.do("acme", "k2", body, c.create); replayed || got.RunID != "r3" {
		t.Fatalf("same tenant, other key = %+v replayed=%v, want a new run", got, replayed)
	}
	if n := c.calls.Load(); n != 3 {
		t.Fatalf("create ran %d times, want 3", n)
	}
}

func TestIdempotency_DifferentBodyIsRefused(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		idem := newIdempotency(testTTL, newFakeClock().now)
		c := creator{hold: make(chan struct{})}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, _, err := idem.do("acme", "k", []byte(`{"question":"a"}`), c.create); err != nil {
				t.Errorf("first: %v", err)
			}
		}()
		synctest.Wait() // the first request is being created
		check := func(when string) {
			_, replayed, err := idem.do("acme", "k", []byte(`{"question":"b"}`), c.create)
			if err == nil || err.Status != http.StatusUnprocessableEntity || err.Code != codeIdempotencyReuse || err.Message == "" || replayed {
				t.Fatalf("%s: other body = %v replayed=%v, want 422 %s", when, err, replayed, codeIdempotencyReuse)
			}
		}
		check("while the first is being created") // refused at once, without waiting for it
		close(c.hold)
		<-done
		check("after the first was created")
		if n := c.calls.Load(); n != 1 {
			t.Fatalf("create ran %d times, want 1", n)
		}
	})
}

// TestIdempotency_ConcurrentCallsCreateOnce: while the first creation is
// held, 50 more calls with the key wait for it; create runs once and all
// get its answer.
func TestIdempotency_ConcurrentCallsCreateOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		idem := newIdempotency(testTTL, newFakeClock().now)
		c := creator{hold: make(chan struct{})}
		body := []byte(`{"question":"q"}`)
		const n = 51
		type result struct {
			res      messages.RunCreated
			replayed bool
			err      *apiError
		}
		results := make([]result, n)
		var wg sync.WaitGroup
		wg.Go(func() {
			r := &results[0]
			r.res, r.replayed, r.err = idem.do("acme", "k", body, c.create)
		})
		synctest.Wait() // the first call is inside create, holding
		for i := 1; i < n; i++ {
			wg.Go(func() {
				r := &results[i]
				r.res, r.replayed, r.err = idem.do("acme", "k", body, c.create)
			})
		}
		synctest.Wait() // every call is blocked: 1 in create, 50 waiting for it
		if got := c.calls.Load(); got != 1 {
			t.Fatalf("create ran %d times while held, want 1", got)
		}
		close(c.hold)
		wg.Wait()
		if got := c.calls.Load(); got != 1 {
			t.Fatalf("create ran %d times, want 1", got)
		}
		for i, r := range results {
			if r.err != nil || r.res.RunID != "r1" || r.replayed != (i != 0) {
				t.Fatalf("call %d = %+v replayed=%v err=%v", i, r.res, r.replayed, r.err)
			}
		}
	})
}

// TestIdempotency_FailedCreationIsForgotten: the calls waiting on a failed
// creation get its error; the next call creates again.
func TestIdempotency_FailedCreationIsForgotten(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		idem := newIdempotency(testTTL, newFakeClock().now)
		c := creator{hold: make(chan struct{})}
		c.fail.Store(true)
		body := []byte(`{"question":"q"}`)
		errs := make([]*apiError, 5)
		replays := make([]bool, 5)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { _, replays[i], errs[i] = idem.do("acme", "k", body, c.create) })
			synctest.Wait()
		}
		close(c.hold)
		wg.Wait()
		if n := c.calls.Load(); n != 1 {
			t.Fatalf("create ran %d times, want 1", n)
		}
		for i, err := range errs {
			if err == nil || err.Status != http.StatusServiceUnavailable || replays[i] {
				t.Fatalf("call %d: err %v replayed=%v, want the creation's 503", i, err, replays[i])
			}
		}
		c.fail.Store(false)
		got, replayed, err := idem.do("acme", "k", body, c.create)
		if err != nil || replayed || got.RunID != "r2" || c.calls.Load() != 2 {
			t.Fatalf("after a failure: %+v replayed=%v err=%v calls=%d, want a fresh creation", got, replayed, err, c.calls.Load())
		}
		if again, replayed, _ := idem.do("acme", "k", body, c.create); !replayed || again != got {
			t.Fatalf("the successful retry is remembered: %+v replayed=%v", again, replayed)
		}
		// A failed key can also be reused with another body.
		if _, _, err := idem.do("acme", "k-other", []byte(`{"x":1}`), func() (messages.RunCreated, *apiError) {
			return messages.RunCreated{}, errorf(http.StatusBadRequest, httpjson.CodeUnknownField, "unknown field")
		}); err == nil {
			t.Fatal("want the creation's error")
		}
		if _, _, err := idem.do("acme", "k-other", []byte(`{"question":"fixed"}`), c.create); err != nil {
			t.Fatalf("reusing a failed key with a corrected body: %v", err)
		}
	})
}

func TestIdempotency_TTL(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	idem := newIdempotency(testTTL, clk.now)
	var c creator
	body := []byte(`{"question":"q"}`)
	first, _, _ := idem.do("acme", "k", body, c.create)
	clk.advance(testTTL - time.Nanosecond)
	if got, replayed, _ := idem.do("acme", "k", body, c.create); !replayed || got != first {
		t.Fatalf("just before the TTL: %+v replayed=%v, want a replay", got, replayed)
	}
	clk.advance(time.Nanosecond)
	got, replayed, err := idem.do("acme", "k", body, c.create)
	if err != nil || replayed || got.RunID != "r2" {
		t.Fatalf("at the TTL: %+v replayed=%v err=%v, want a new run", got, replayed, err)
	}
	// Once expired, the key may carry another body.
	clk.advance(testTTL)
	if _, _, err := idem.do("acme", "k", []byte(`{"question":"other"}`), c.create); err != nil {
		t.Fatalf("expired key with another body: %v", err)
	}
	// Expired entries are dropped, not only ignored.
	clk.advance(testTTL)
	for i := range 100 {
		idem.do("acme", fmt.Sprintf("bulk-%d", i), body, c.create)
	}
	clk.advance(testTTL)
	idem.do("acme", "last", body, c.create)
	idem.mu.Lock()
	entries, order := len(idem.entries), len(idem.order)
	idem.mu.Unlock()
	if entries != 1 || order != 1 {
		t.Fatalf("after expiry: %d entries, %d in order, want 1 and 1", entries, order)
	}
}

// TestIdempotency_InFlightEntryOutlivesTTL: a creation still running when
// its TTL passes is not dropped under the calls waiting for it, and a new
// call with the key waits for it too instead of creating a second run.
func TestIdempotency_InFlightEntryOutlivesTTL(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clk := newFakeClock()
		idem := newIdempotency(time.Minute, clk.now)
		c := creator{hold: make(chan struct{})}
		body := []byte(`{"question":"q"}`)
		var wg sync.WaitGroup
		wg.Go(func() { idem.do("acme", "k", body, c.create) })
		synctest.Wait()
		clk.advance(2 * time.Minute)
		var got messages.RunCreated
		var replayed bool
		wg.Go(func() { got, replayed, _ = idem.do("acme", "k", body, c.create) })
		synctest.Wait()
		close(c.hold)
		wg.Wait()
		if c.calls.Load() != 1 || !replayed || got.RunID != "r1" {
			t.Fatalf("calls=%d, second call %+v replayed=%v; want one creation shared", c.calls.Load(), got, replayed)
		}
	})
}

// TestIdempotency_TTLAfterRetriedFailure: every key is forgotten after the
// TTL, whatever happened to other keys.
//
// Fails today: a failed creation deletes its entry but leaves its key in
// idempotency.order (only trimmed once it reaches the front). When the key
// is retried before that, the new entry is appended to order again, and
// expireLocked, meeting the stale slot first, looks up the *new* entry,
// finds it unexpired and stops. Every key created between the failure and
// the retry then outlives its TTL (until the retried entry expires): a
// request after 24 h is answered with the old run instead of creating one.
// Fix: in expireLocked, treat a slot whose entry was replaced as stale
// (store the entry pointer or its expiry in order, and skip a slot whose
// entry is not the one in the map), or remove the key from order on failure.
func TestIdempotency_TTLAfterRetriedFailure(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	idem := newIdempotency(testTTL, clk.now)
	var c creator
	body := []byte(`{"question":"q"}`)

	idem.do("acme", "x", body, c.create) // an older key, so the failed one's slot is not at the front
	c.fail.Store(true)
	if _, _, err := idem.do("acme", "a", body, c.create); err == nil { // fails: forgotten
		t.Fatal("want an error")
	}
	c.fail.Store(false)
	b, _, _ := idem.do("acme", "b", body, c.create) // remembered until t0+TTL
	clk.advance(time.Hour)
	if _, _, err := idem.do("acme", "a", body, c.create); err != nil { // the retry succeeds: remembered until t0+1h+TTL
		t.Fatal(err)
	}
	clk.advance(testTTL - time.Hour) // t0+TTL: "x" and "b" have expired, "a" has not
	got, replayed, err := idem.do("acme", "b", body, c.create)
	if err != nil || replayed || got == b {
		t.Fatalf("key b after its TTL = %+v replayed=%v err=%v, want a new run (not %+v)", got, replayed, err, b)
	}
}

// TestIdempotency_BoundedEntries: a client sending a new key with every
// request cannot grow the cache past MaxIdempotencyEntries; the oldest
// keys are forgotten first.
func TestIdempotency_BoundedEntries(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	idem := newIdempotency(24*time.Hour, clock.now)
	var c creator
	for i := range MaxIdempotencyEntries + 100 {
		if _, _, err := idem.do("t", fmt.Sprint("k", i), []byte("{}"), c.create); err != nil {
			t.Fatal(err)
		}
	}
	idem.mu.Lock()
	n := len(idem.entries)
	_, oldest := idem.entries[idemKey{"t", "k0"}]
	_, newest := idem.entries[idemKey{"t", fmt.Sprint("k", MaxIdempotencyEntries+99)}]
	idem.mu.Unlock()
	if n > MaxIdempotencyEntries+1 || oldest || !newest {
		t.Fatalf("%d entries (max %d), oldest kept %v, newest kept %v", n, MaxIdempotencyEntries, oldest, newest)
	}
}
