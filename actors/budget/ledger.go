package budget

import (
	"sync"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// Ledger is every tenant's spend of the current UTC day. It starts from
// zero at each UTC midnight of its clock. Safe for concurrent use: the
// model streams of every run add to it (a mutex, not an actor: an Add is
// a few additions, and the streams must not wait on a mailbox).
//
// It is not durable on its own: after a restart the engine rebuilds the
// day from the token_usage events its journal holds (Restore), so what
// survives a kill -9 is exactly what was journaled.
type Ledger struct {
	now func() time.Time

	mu    sync.Mutex // guards what follows
	day   time.Time  // UTC midnight starting the day counted
	spent map[messages.TenantID]Spend
}

// NewLedger returns an empty ledger on clock now (time.Now if nil).
func NewLedger(now func() time.Time) *Ledger {
	if now == nil {
		now = time.Now
	}
	return &Ledger{now: now, spent: map[messages.TenantID]Spend{}}
}

// DayOf is the UTC midnight that starts t's day.
func DayOf(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// rollLocked starts a new day when the clock has passed midnight, and
// returns the day now is in. Must be called with l.mu held.
func (l *Ledger) rollLocked() time.Time {
	today := DayOf(l.now())
	if !today.Equal(l.day) {
		l.day = today
		clear(l.spent)
	}
	return today
}

// Add counts s as tenant's spend today and returns the day's total.
func (l *Ledger) Add(tenant messages.TenantID, s Spend) Spend {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollLocked()
	t := l.spent[tenant].Add(s)
	l.spent[tenant] = t
	return t
}

// Restore counts s, spent at time at, if at is today (rebuilding the day
// from the journal after a restart); spend of earlier days is ignored.
func (l *Ledger) Restore(tenant messages.TenantID, at time.Time, s Spend) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if DayOf(at).Equal(l.rollLocked()) {
		l.spent[tenant] = l.spent[tenant].Add(s)
	}
}

// Spent is tenant's spend today.
func (l *Ledger) Spent(tenant messages.TenantID) Spend {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollLocked()
	return l.spent[tenant]
}

// UntilMidnight is how long until the ledger starts a new day.
func (l *Ledger) UntilMidnight() time.Duration {
	now := l.now()
	return DayOf(now).AddDate(0, 0, 1).Sub(now)
}
