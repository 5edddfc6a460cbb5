package journal

import (
	"context"
	"sync"

	"github.com/conclave-ai/conclave/messages"
)

// Memory is an in-memory Journal for tests and `conclave run`. It keeps
// every event of every session until Close.
type Memory struct {
	mu       sync.RWMutex // guards sessions and closed
	sessions map[messages.SessionID]*memSession
	closed   bool
}

type memSession struct {
	mu     sync.RWMutex // guards events; held for writing only while appending
	events []*messages.Encoded
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
		s = &memSession{}
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
	head := uint64(len(s.events))
	for i, e := range events {
		if e.Seq != head+uint64(i)+1 {
			return &SeqError{Session: session, Head: head, Got: e.Seq, Position: i}
		}
	}
	s.events = append(s.events, events...)
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
	n := uint64(len(s.events))
	if after >= n || limit <= 0 {
		return nil, nil
	}
	end := min(n, after+uint64(limit))
	// Seqs start at 1, so seq s lives at index s-1.
	return append([]*messages.Encoded(nil), s.events[after:end]...), nil
}

// Head implements Journal.
func (m *Memory) Head(ctx context.Context, session messages.SessionID) (uint64, error) {
	s, err := m.session(session, false)
	if err != nil || s == nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return uint64(len(s.events)), nil
}

// Close implements Journal. It is idempotent.
func (m *Memory) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}
