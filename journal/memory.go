package journal

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/conclave-ai/conclave/messages"
)

// Memory is an in-memory Journal and Catalog for tests and `conclave run`.
// It keeps every event of every session until Trim or Close, and every
// run's catalogue entry until Close.
//
// Lock order: Memory.mu, then memSession.mu (only Sessions holds both);
// memSession.mu, then memCatalog.mu (Append, Trim).
type Memory struct {
	mu       sync.RWMutex // guards sessions and closed
	sessions map[messages.SessionID]*memSession
	closed   bool

	cat memCatalog
}

type memSession struct {
	mu sync.RWMutex // guards the fields below; held for writing only while appending or trimming
	// events holds the retained events: events[i] has seq first+i.
	events []*messages.Encoded
	first  uint64 // seq of events[0]; head+1 when every event was trimmed
	head   uint64
	// live maps the session's runs that have not ended to the seq of
	// their run_started (Trim never drops it).
	live map[messages.RunID]uint64
}

// memCatalog is Memory's run catalogue.
type memCatalog struct {
	mu     sync.RWMutex // guards the fields below
	runs   map[messages.RunID]*memRun
	all    []*memRun            // every run, in append order
	scopes map[string][]*memRun // the runs of each scope, in append order
	order  uint64               // of the last run appended
}

type memRun struct {
	info  RunInfo
	order uint64
}

var (
	_ Journal = (*Memory)(nil)
	_ Catalog = (*Memory)(nil)
)

// NewMemory returns an empty in-memory journal.
func NewMemory() *Memory {
	return &Memory{
		sessions: make(map[messages.SessionID]*memSession),
		cat:      memCatalog{runs: make(map[messages.RunID]*memRun), scopes: make(map[string][]*memRun)},
	}
}

func (m *Memory) session(id messages.SessionID, create bool) (*memSession, error) {
	m.mu.RLock()
	s, ok := m.sessions[id]
	closed := m.closed
	m.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if ok || !create {
		return s, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if s, ok = m.sessions[id]; !ok {
		s = &memSession{first: 1}
		m.sessions[id] = s
	}
	return s, nil
}

// Append implements Journal.
func (m *Memory) Append(ctx context.Context, session messages.SessionID, events []*messages.Encoded) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s, err := m.session(session, true)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range events {
		if e.Seq != s.head+uint64(i)+1 {
			return &SeqError{Session: session, Head: s.head, Got: e.Seq, Position: i}
		}
	}
	s.events = append(s.events, events...)
	s.head += uint64(len(events))
	if changes := runChanges(events); len(changes) > 0 {
		m.cat.apply(session, s, changes)
	}
	return nil
}

// apply records what an appended batch of session did to its runs. The
// caller holds s.mu.
func (c *memCatalog) apply(session messages.SessionID, s *memSession, changes []runChange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range changes {
		r := c.runs[ch.run]
		if ch.start != 0 && r == nil {
			c.order++
			r = &memRun{info: RunInfo{Run: ch.run, Session: session, FirstSeq: ch.start}, order: c.order}
			c.runs[ch.run] = r
			c.all = append(c.all, r)
			if scope := scopeOf(session); scope != "" {
				c.scopes[scope] = append(c.scopes[scope], r)
			}
			if s.live == nil {
				s.live = make(map[messages.RunID]uint64)
			}
			s.live[ch.run] = ch.start
		}
		if ch.end != 0 && r != nil && r.info.Session == session && r.info.LastSeq == 0 && ch.end > r.info.FirstSeq {
			r.info.LastSeq = ch.end
			delete(s.live, ch.run)
		}
	}
}

// ReadAfter implements Journal.
func (m *Memory) ReadAfter(ctx context.Context, session messages.SessionID, after uint64, limit int) ([]*messages.Encoded, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := m.session(session, false)
	if err != nil || s == nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	from := max(after+1, s.first)
	if from > s.head || limit <= 0 {
		return nil, nil
	}
	start := from - s.first
	end := min(uint64(len(s.events)), start+uint64(limit))
	return slices.Clone(s.events[start:end]), nil
}

// Head implements Journal.
func (m *Memory) Head(_ context.Context, session messages.SessionID) (uint64, error) {
	s, err := m.session(session, false)
	if err != nil || s == nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.head, nil
}

// First implements Journal.
func (m *Memory) First(_ context.Context, session messages.SessionID) (uint64, error) {
	s, err := m.session(session, false)
	if err != nil || s == nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.head == 0 {
		return 0, nil
	}
	return s.first, nil
}

// Trim implements Journal.
func (m *Memory) Trim(ctx context.Context, session messages.SessionID, before uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s, err := m.session(session, false)
	if err != nil || s == nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	before = min(before, s.head+1)
	for _, start := range s.live {
		before = min(before, start)
	}
	if before <= s.first {
		return nil
	}
	n := before - s.first
	// Copy the survivors so the trimmed prefix of the backing array (and
	// the events it points to) can be collected.
	s.events = slices.Clone(s.events[n:])
	s.first = before
	return nil
}

// Sessions implements Journal.
func (m *Memory) Sessions(ctx context.Context) ([]messages.SessionID, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	var out []messages.SessionID
	for id, s := range m.sessions {
		s.mu.RLock()
		if s.head > 0 {
			out = append(out, id)
		}
		s.mu.RUnlock()
	}
	slices.Sort(out)
	return out, nil
}

// Close implements Journal. It is idempotent.
func (m *Memory) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

// catalog returns the catalogue, or ErrClosed.
func (m *Memory) catalog(ctx context.Context) (*memCatalog, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	return &m.cat, nil
}

// LiveRuns implements Catalog.
func (m *Memory) LiveRuns(ctx context.Context) ([]RunInfo, error) {
	c, err := m.catalog(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []RunInfo
	for _, r := range c.all {
		if r.info.LastSeq == 0 {
			out = append(out, r.info.clone())
		}
	}
	return out, nil
}

// Run implements Catalog.
func (m *Memory) Run(ctx context.Context, run messages.RunID) (RunInfo, bool, error) {
	c, err := m.catalog(ctx)
	if err != nil {
		return RunInfo{}, false, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	r := c.runs[run]
	if r == nil {
		return RunInfo{}, false, nil
	}
	return r.info.clone(), true, nil
}

// ListRuns implements Catalog.
func (m *Memory) ListRuns(ctx context.Context, scope string, after messages.RunID, limit int) ([]RunInfo, messages.RunID, error) {
	c, err := m.catalog(ctx)
	if err != nil {
		return nil, "", err
	}
	if limit, err = checkListArgs(scope, limit); err != nil || limit <= 0 {
		return nil, "", err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	list := c.all
	if scope != "" {
		list = c.scopes[scope]
	}
	i := 0
	if after != "" {
		r := c.runs[after]
		if r == nil {
			return nil, "", fmt.Errorf("%w: list runs after %q", ErrUnknownRun, after)
		}
		i, _ = slices.BinarySearchFunc(list, r.order+1, func(x *memRun, o uint64) int { return cmp.Compare(x.order, o) })
	}
	var out []RunInfo
	for ; i < len(list) && len(out) < limit; i++ {
		out = append(out, list[i].info.clone())
	}
	var next messages.RunID
	if i < len(list) {
		next = out[len(out)-1].Run
	}
	return out, next, nil
}

// PutRunSummary implements Catalog.
func (m *Memory) PutRunSummary(ctx context.Context, run messages.RunID, summary []byte) error {
	c, err := m.catalog(ctx)
	if err != nil {
		return err
	}
	if len(summary) > MaxRunSummary {
		return fmt.Errorf("journal: run %s: summary of %d bytes is larger than %d", run, len(summary), MaxRunSummary)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.runs[run]
	if r == nil {
		return fmt.Errorf("%w: %s", ErrUnknownRun, run)
	}
	r.info.Summary = slices.Clone(summary)
	if r.info.Summary == nil {
		r.info.Summary = []byte{}
	}
	return nil
}

// clone returns i with its own copy of the summary.
func (i RunInfo) clone() RunInfo {
	i.Summary = slices.Clone(i.Summary)
	return i
}
