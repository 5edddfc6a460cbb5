package journal

import (
	"context"
	"slices"
	"sync"

	"github.com/conclave-ai/conclave/messages"
)

// Memory is an in-memory Journal for tests and `conclave run`. It keeps
// every event of every session until Trim or Close.
//
// Lock order: Memory.mu, then memSession.mu (only Sessions holds both).
type Memory struct {
	mu       sync.RWMutex // guards sessions and closed
	sessions map[messages.SessionID]*memSession
	closed   bool
}

type memSession struct {
	mu sync.RWMutex // guards the fields below; held for writing only while appending or trimming
	// events holds the retained events: events[i] has seq first+i.
	events []*messages.Encoded
	first  uint64 // seq of events[0]; head+1 when every event was trimmed
	head   uint64
}

var _ Journal = (*Memory)(nil)

// NewMemory returns an empty in-memory journal.
func NewMemory() *Memory {
	return &Memory{sessions: make(map[messages.SessionID]*memSession)}
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
	return nil
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
