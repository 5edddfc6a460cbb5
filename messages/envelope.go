package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Envelope is the one shape of every event on every wire. See docs/events.md.
type Envelope struct {
	ID        uuid.UUID `json:"id"`
	Seq       uint64    `json:"seq"`
	Type      EventType `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	SessionID SessionID `json:"session_id"`
	RunID     RunID     `json:"run_id"`
	AgentID   string    `json:"agent_id"`
	// CorrelationID is the id of the request whose work the event is:
	// the X-Request-Id (or the generated id) of the request that started
	// the run, on every event of the run, steering, answers and resumes
	// after a restart included. Omitted when empty (events of no run).
	CorrelationID string  `json:"correlation_id,omitempty"`
	Lane          Lane    `json:"lane"`
	Payload       Payload `json:"payload"`
}

// Emit is an event as an agent produces it, before the session hub stamps
// it with id, seq, timestamp and session. It is the message every actor
// sends to the hub.
type Emit struct {
	RunID   RunID
	AgentID string
	// CorrelationID is the run's request id (Envelope.CorrelationID).
	CorrelationID string
	Lane          Lane
	Payload       Payload
}

// Stamp turns e into an envelope.
func (e *Emit) Stamp(id uuid.UUID, seq uint64, ts time.Time, session SessionID) *Envelope {
	return &Envelope{
		ID: id, Seq: seq, Type: e.Payload.EventType(), Timestamp: ts.UTC(),
		SessionID: session, RunID: e.RunID, AgentID: e.AgentID, CorrelationID: e.CorrelationID, Lane: e.Lane, Payload: e.Payload,
	}
}

// Encoded is an event encoded once and shared read-only by the journal and
// every subscriber. JSON is the envelope exactly as it goes on the wire.
type Encoded struct {
	Seq   uint64
	Type  EventType
	RunID RunID
	JSON  []byte
	// env is the decoded form when the event was encoded in this process.
	env *Envelope
	// sse caches the SSE frame, built by the first stream that needs it.
	sse atomic.Pointer[[]byte]
}

// SSEFrame returns the event as one Server-Sent Events frame, LF line
// endings: "id: <seq>\nevent: <type>\ndata: <envelope JSON>\n\n". It is built
// once and shared by every stream (the JSON has no raw newlines, so one
// data line carries it).
func (e *Encoded) SSEFrame() []byte {
	if f := e.sse.Load(); f != nil {
		return *f
	}
	b := make([]byte, 0, len(e.JSON)+len(e.Type)+40)
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, "\nevent: "...)
	b = append(b, e.Type...)
	b = append(b, "\ndata: "...)
	b = append(b, e.JSON...)
	b = append(b, "\n\n"...)
	e.sse.Store(&b) // racing builders store equal frames; either wins
	return b
}

// Encode encodes env once.
func Encode(env *Envelope) (*Encoded, error) {
	b, err := env.AppendJSON(make([]byte, 0, 256))
	if err != nil {
		return nil, err
	}
	return &Encoded{Seq: env.Seq, Type: env.Type, RunID: env.RunID, JSON: b, env: env}, nil
}

// NewEncoded wraps JSON read back from storage. The envelope is decoded on
// demand by Envelope.
func NewEncoded(seq uint64, typ EventType, run RunID, data []byte) *Encoded {
	return &Encoded{Seq: seq, Type: typ, RunID: run, JSON: data}
}

// Envelope returns the decoded envelope. The result must not be modified.
func (e *Encoded) Envelope() (*Envelope, error) {
	if e.env != nil {
		return e.env, nil
	}
	var env Envelope
	if err := json.Unmarshal(e.JSON, &env); err != nil {
		return nil, err
	}
	return &env, nil
}

// MarshalJSON implements json.Marshaler with the documented field order.
// It has a value receiver so that encoding an Envelope value (not only a
// pointer) goes through it too.
func (env Envelope) MarshalJSON() ([]byte, error) { return env.AppendJSON(nil) }

// AppendJSON appends the JSON encoding of env to b. Field order is fixed:
// id, seq, type, timestamp, session_id, run_id, agent_id, correlation_id
// (when set), lane, payload.
func (env *Envelope) AppendJSON(b []byte) ([]byte, error) {
	if env.Payload == nil {
		return nil, errors.New("messages: envelope without payload")
	}
	if env.Payload.EventType() != env.Type {
		return nil, fmt.Errorf("messages: envelope type %s carries a %s payload", env.Type, env.Payload.EventType())
	}
	ts := env.Timestamp.UTC()
	if y := ts.Year(); y < 0 || y > 9999 {
		return nil, fmt.Errorf("messages: timestamp year %d outside the RFC 3339 range 0..9999", y)
	}
	payload, err := json.Marshal(env.Payload)
	if err != nil {
		return nil, fmt.Errorf("messages: encode %s payload: %w", env.Type, err)
	}
	b = append(b, `{"id":"`...)
	b = append(b, env.ID.String()...)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, env.Seq, 10)
	b = append(b, `,"type":`...)
	b = appendString(b, string(env.Type))
	b = append(b, `,"timestamp":"`...)
	b = ts.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","session_id":`...)
	b = appendString(b, string(env.SessionID))
	b = append(b, `,"run_id":`...)
	b = appendString(b, string(env.RunID))
	b = append(b, `,"agent_id":`...)
	b = appendString(b, env.AgentID)
	if env.CorrelationID != "" {
		b = append(b, `,"correlation_id":`...)
		b = appendString(b, env.CorrelationID)
	}
	b = append(b, `,"lane":{"stream_id":`...)
	b = appendString(b, string(env.Lane.StreamID))
	b = append(b, `,"depth":`...)
	b = strconv.AppendInt(b, int64(env.Lane.Depth), 10)
	if env.Lane.ParentStreamID != "" {
		b = append(b, `,"parent_stream_id":`...)
		b = appendString(b, string(env.Lane.ParentStreamID))
	}
	b = append(b, `},"payload":`...)
	b = append(b, payload...)
	return append(b, '}'), nil
}

// appendString appends s as a JSON string, escaping exactly as
// encoding/json does (including its HTML-safe escapes).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // slow path; a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

type rawEnvelope struct {
	ID            uuid.UUID       `json:"id"`
	Seq           uint64          `json:"seq"`
	Type          string          `json:"type"`
	Timestamp     time.Time       `json:"timestamp"`
	SessionID     SessionID       `json:"session_id"`
	RunID         RunID           `json:"run_id"`
	AgentID       string          `json:"agent_id"`
	CorrelationID string          `json:"correlation_id"`
	Lane          Lane            `json:"lane"`
	Payload       json.RawMessage `json:"payload"`
}

// UnmarshalJSON decodes an envelope and its payload into the concrete
// payload type for its event type. Unknown event types are an
// *UnknownEventTypeError.
func (env *Envelope) UnmarshalJSON(b []byte) error {
	var raw rawEnvelope
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("messages: decode envelope: %w", err)
	}
	t, err := NewEventType(raw.Type)
	if err != nil {
		return err
	}
	p, _ := t.NewPayload()
	if p := bytes.TrimSpace(raw.Payload); len(p) == 0 || bytes.Equal(p, []byte("null")) {
		return fmt.Errorf("messages: %s event without payload", t)
	}
	if err := json.Unmarshal(raw.Payload, p); err != nil {
		return fmt.Errorf("messages: decode %s payload: %w", t, err)
	}
	*env = Envelope{ID: raw.ID, Seq: raw.Seq, Type: t, Timestamp: raw.Timestamp, SessionID: raw.SessionID,
		RunID: raw.RunID, AgentID: raw.AgentID, CorrelationID: raw.CorrelationID, Lane: raw.Lane, Payload: p}
	return nil
}
