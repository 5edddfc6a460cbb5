package a2aclient

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/remote"
)

// DefaultRedialAfter is Lazy's default wait between two fetches of an
// unreachable agent's card.
const DefaultRedialAfter = 10 * time.Second

// Lazy is a remote agent whose card could not be fetched when the server
// started (an outage, a remote started after the caller): each call
// fetches the card again first, at most once per RedialAfter, so an agent
// that comes back serves the next node that names it without a restart,
// and a run recovered while it was down re-subscribes once it is up. It
// implements remote.Agent; once a card is fetched it is the Agent of
// that client for good.
type Lazy struct {
	name, cardURL string
	cfg           Config
	// redialAfter and now bound the fetches (now: the injected clock).
	redialAfter time.Duration
	now         func() time.Time

	mu      sync.Mutex // held across a fetch: concurrent calls wait for its outcome
	agent   *Agent
	lastErr error
	lastTry time.Time
}

var _ remote.Agent = (*Lazy)(nil)

// NewLazy returns agent name, reached through the card at cardURL with
// cfg, whose first fetch failed with firstErr at now(). redialAfter <= 0
// is DefaultRedialAfter; now nil is time.Now.
func NewLazy(name, cardURL string, cfg Config, firstErr error, redialAfter time.Duration, now func() time.Time) *Lazy {
	if redialAfter <= 0 {
		redialAfter = DefaultRedialAfter
	}
	if now == nil {
		now = time.Now
	}
	return &Lazy{name: name, cardURL: cardURL, cfg: cfg, redialAfter: redialAfter, now: now, lastErr: firstErr, lastTry: now()}
}

// get returns the agent, fetching its card when the last failed fetch is
// RedialAfter old; the error wraps remote.ErrUnavailable.
func (l *Lazy) get(ctx context.Context) (*Agent, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.agent != nil {
		return l.agent, nil
	}
	if t := l.now(); t.Sub(l.lastTry) >= l.redialAfter {
		l.lastTry = t
		c, err := Dial(ctx, l.cardURL, l.cfg)
		if err == nil {
			l.agent, l.lastErr = NewAgent(l.name, c), nil
			return l.agent, nil
		}
		l.lastErr = err
	}
	return nil, fmt.Errorf("%w: %q: %w (its card is fetched again at most every %s)", remote.ErrUnavailable, l.name, l.lastErr, l.redialAfter)
}

// Run implements remote.Agent.
func (l *Lazy) Run(ctx context.Context, req remote.Request, emit func(messages.Payload) error) (remote.Result, error) {
	a, err := l.get(ctx)
	if err != nil {
		return remote.Result{}, err
	}
	return a.Run(ctx, req, emit)
}

// Cancel implements remote.Agent.
func (l *Lazy) Cancel(ctx context.Context, taskID string) error {
	a, err := l.get(ctx)
	if err != nil {
		return err
	}
	return a.Cancel(ctx, taskID)
}
