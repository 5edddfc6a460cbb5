package transport

import (
	"crypto/sha256"
	"net/http"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// MaxIdempotencyKey bounds the Idempotency-Key header.
const MaxIdempotencyKey = 255

// MaxIdempotencyEntries bounds the keys remembered at once (about 200
// bytes each): past it the oldest are forgotten before their TTL, so a
// client sending a new key with every request cannot grow the server.
const MaxIdempotencyEntries = 100_000

// idempotency remembers, per tenant and Idempotency-Key, the run a
// request created, so a retry gets the same run instead of a second one.
// Unlike a key-only cache, it also remembers the body: reusing a key with a
// different body is an error (422), not a silent replay of another request.
// Concurrent requests with one key run the creation once; the others wait
// for it. A failed creation is forgotten, so it can be retried.
type idempotency struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex // guards entries and order
	entries map[idemKey]*idemEntry
	order   []idemSlot // insertion order = expiry order (fixed TTL)
}

// idemSlot remembers which entry a key had when it was inserted: a failed
// creation is forgotten and its key may be reused, so an old slot must not
// stand for the newer entry.
type idemSlot struct {
	key   idemKey
	entry *idemEntry
}

type idemKey struct {
	tenant messages.TenantID
	key    string
}

type idemEntry struct {
	digest  [sha256.Size]byte
	expires time.Time
	done    chan struct{} // closed when created or err is set
	created messages.RunCreated
	err     *apiError
}

func newIdempotency(ttl time.Duration, now func() time.Time) *idempotency {
	return &idempotency{ttl: ttl, now: now, entries: map[idemKey]*idemEntry{}}
}

// do runs create once per (tenant, key, body). replayed reports that the
// result comes from an earlier request.
func (s *idempotency) do(tenant messages.TenantID, key string, body []byte, create func() (messages.RunCreated, *apiError)) (res messages.RunCreated, replayed bool, err *apiError) {
	k := idemKey{tenant, key}
	digest := sha256.Sum256(body)
	s.mu.Lock()
	s.expireLocked()
	if e, ok := s.entries[k]; ok {
		s.mu.Unlock()
		if e.digest != digest {
			return messages.RunCreated{}, false, errorf(http.StatusUnprocessableEntity, codeIdempotencyReuse,
				"this Idempotency-Key was used with a different request body")
		}
		<-e.done
		if e.err != nil {
			return messages.RunCreated{}, false, e.err
		}
		return e.created, true, nil
	}
	e := &idemEntry{digest: digest, expires: s.now().Add(s.ttl), done: make(chan struct{})}
	s.entries[k] = e
	s.order = append(s.order, idemSlot{k, e})
	s.mu.Unlock()

	e.created, e.err = create()
	if e.err != nil {
		s.mu.Lock()
		if s.entries[k] == e {
			delete(s.entries, k)
		}
		s.mu.Unlock()
	}
	close(e.done)
	return e.created, false, e.err
}

// expireLocked drops entries past their TTL. Must be called with s.mu held.
func (s *idempotency) expireLocked() {
	now := s.now()
	n := 0
	for _, slot := range s.order {
		if s.entries[slot.key] != slot.entry { // forgotten (failed) or replaced
			n++
			continue
		}
		if now.Before(slot.entry.expires) && len(s.entries) <= MaxIdempotencyEntries {
			break
		}
		select {
		case <-slot.entry.done:
			delete(s.entries, slot.key)
			n++
			continue
		default: // still being created; it expires once done
		}
		break
	}
	s.order = s.order[n:]
}
