// Package messages is the one source of truth for everything that crosses an
// actor or wire boundary in Conclave: identifiers, commands, the event
// envelope, every event payload and their JSON encoding.
//
// Event kinds are typed constants ([EventType]); the only place that maps them to
// payload types is the catalogue in types.go. Other packages type-switch on the
// concrete payload structs.
package messages

import (
	"errors"
	"fmt"
	"regexp"
)

// ErrInvalidID is returned (wrapped) when an identifier fails validation.
var ErrInvalidID = errors.New("messages: invalid identifier")

// idPattern is the shape of every externally supplied identifier: ASCII
// letters, digits, '_' and '-', 1..128 characters. It keeps ids safe to put
// in URLs, log lines and SSE fields without escaping.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// SessionID names a session: the scope of one hub, one gapless seq and one journal stream.
type SessionID string

// RunID names one council run inside a session.
type RunID string

// NewSessionID validates s as a session id.
func NewSessionID(s string) (SessionID, error) {
	if !idPattern.MatchString(s) {
		return "", fmt.Errorf("%w: session_id %q must match %s", ErrInvalidID, truncate(s, 64), idPattern)
	}
	return SessionID(s), nil
}

// NewRunID validates s as a run id.
func NewRunID(s string) (RunID, error) {
	if !idPattern.MatchString(s) {
		return "", fmt.Errorf("%w: run_id %q must match %s", ErrInvalidID, truncate(s, 64), idPattern)
	}
	return RunID(s), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
