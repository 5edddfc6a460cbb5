// Package httpjson is the one home of the JSON conventions every HTTP
// endpoint of Conclave shares (the runs API, AG-UI, A2A's non-RPC answers):
// the error body {"error":{"code","message"}} with its codes, strict body
// decoding with errors a client can act on, and how engine errors map to
// statuses. docs/api.md documents the codes.
package httpjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
)

// Error codes (the "code" of an error body).
const (
	CodeBadRequest       = "bad_request"
	CodeInvalidJSON      = "invalid_json"
	CodeUnknownField     = "unknown_field"
	CodeBodyTooLarge     = "body_too_large"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeInvalidCursor    = "invalid_cursor"
	CodeCursorAhead      = "cursor_ahead"
	CodeUnauthorized     = "unauthorized"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeIdempotencyReuse = "idempotency_key_reused"
	CodeUnavailable      = "unavailable"
	// CodeTooManyStreams: the server's or the tenant's cap on open streams
	// is reached (429 with Retry-After).
	CodeTooManyStreams = "too_many_streams"
	// Quota codes: the values of actors.QuotaCode.
	CodeTooManyRuns        = string(actors.QuotaTooManyRuns)
	CodeRateLimited        = string(actors.QuotaRateLimited)
	CodeScenarioTooLarge   = string(actors.QuotaScenarioTooLarge)
	CodeInsufficientBudget = string(actors.QuotaInsufficientBudget)
	CodeBudgetTooLarge     = string(actors.QuotaBudgetTooLarge)
	CodeTenantSuspended    = string(actors.QuotaTenantSuspended)
	CodeInternal           = "internal"
	// CodeNotOwner: another node of the cluster owns the session (421,
	// with its id in the Conclave-Owner header). A node's own API
	// forwards such a request to the owner (package cluster); a client
	// sees it only when that failed.
	CodeNotOwner = "not_owner"
	// CodeHTTPVersionNotSupported: the endpoint needs another HTTP version
	// (505; the WebSocket endpoint needs HTTP/1.1).
	CodeHTTPVersionNotSupported = "http_version_not_supported"
)

// Error is an answer decided before any byte of the response was written.
type Error struct {
	Status  int
	Code    string
	Message string
	// RetryAfter, when positive, is sent as a Retry-After header (whole
	// seconds, rounded up).
	RetryAfter time.Duration
	// Owner, when set, is sent as a Conclave-Owner header: the cluster
	// node that owns the request's session (421, CodeNotOwner).
	Owner string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// NewError returns an Error.
func NewError(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// ErrorRecorder is a ResponseWriter (or one it unwraps to) that wants to
// know the errors answered through it: WriteError, WriteErrorAndClose and
// WriteAndClose tell it before writing (the server's log of refused
// requests).
type ErrorRecorder interface {
	RecordError(*Error)
}

// record tells the first ErrorRecorder along w's Unwrap chain about e.
func record(w http.ResponseWriter, e *Error) {
	for w != nil && e != nil {
		if r, ok := w.(ErrorRecorder); ok {
			r.RecordError(e)
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}

// WriteError answers e as JSON.
func WriteError(w http.ResponseWriter, e *Error) {
	record(w, e)
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="conclave"`)
	}
	if e.Owner != "" {
		w.Header().Set(messages.OwnerHeader, e.Owner)
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((e.RetryAfter+time.Second-1)/time.Second), 10))
	}
	WriteJSON(w, e.Status, messages.ErrorBody{Error: messages.APIError{Code: e.Code, Message: e.Message}})
}

// WriteJSON answers v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"encoding the response failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// EngineError maps an engine error to an answer.
func EngineError(err error) *Error {
	var quota *actors.QuotaError
	var file *messages.FileError
	switch {
	case errors.As(err, &file): // an attached file: its own code, 413 for a size
		status := http.StatusUnprocessableEntity
		if file.TooLarge() {
			status = http.StatusRequestEntityTooLarge
		}
		return NewError(status, string(file.Code), file.Error())
	case errors.As(err, &quota):
		status := http.StatusTooManyRequests
		switch {
		case quota.Permanent():
			status = http.StatusUnprocessableEntity // it can never fit: retrying does not help
		case quota.Code == actors.QuotaTenantSuspended:
			status = http.StatusPaymentRequired // the billing service suspended the tenant
		}
		return &Error{Status: status, Code: string(quota.Code), Message: quota.Message, RetryAfter: quota.RetryAfter}
	case errors.Is(err, actors.ErrInvalidRequest):
		return NewError(http.StatusUnprocessableEntity, CodeBadRequest, err.Error())
	case errors.Is(err, actors.ErrSessionNotFound), errors.Is(err, actors.ErrRunNotFound):
		return NewError(http.StatusNotFound, CodeNotFound, err.Error())
	case errors.Is(err, actors.ErrRunTerminal), errors.Is(err, actors.ErrRunNotEnded):
		return NewError(http.StatusConflict, CodeConflict, err.Error())
	case errors.Is(err, actors.ErrCursorAhead):
		return NewError(http.StatusBadRequest, CodeCursorAhead, err.Error())
	case errors.Is(err, actors.ErrNotOwner):
		e := NewError(http.StatusMisdirectedRequest, CodeNotOwner, err.Error())
		var o interface{ OwnerNode() string }
		if errors.As(err, &o) {
			e.Owner = o.OwnerNode()
		}
		return e
	case errors.Is(err, actors.ErrUnavailable):
		e := NewError(http.StatusServiceUnavailable, CodeUnavailable, err.Error())
		e.RetryAfter = time.Second
		return e
	case errors.Is(err, actors.ErrShuttingDown):
		return NewError(http.StatusServiceUnavailable, CodeUnavailable, err.Error())
	default:
		return NewError(http.StatusInternalServerError, CodeInternal, err.Error())
	}
}

// ReadBody reads a JSON request body of at most limit bytes.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *Error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, NewError(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "Content-Type must be application/json")
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, NewError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, fmt.Sprintf("request body is larger than %d bytes", limit))
		}
		return nil, NewError(http.StatusBadRequest, CodeBadRequest, "reading the request body failed: "+err.Error())
	}
	return body, nil
}

// DecodeStrict decodes exactly one JSON value into dst with
// messages.DecodeStrict (unknown fields, trailing data and invalid UTF-8
// are errors) and turns failures into clear 400 answers (JSONError).
func DecodeStrict(body []byte, dst any) *Error {
	if err := messages.DecodeStrict(body, dst); err != nil {
		return JSONError(err)
	}
	return nil
}

// JSONError turns a messages.DecodeStrict error into a 400 answer a client
// can act on: the code says which kind of mistake (invalid_json or
// unknown_field), the message where.
func JSONError(err error) *Error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var unknown *messages.UnknownFieldError
	var utf *messages.InvalidUTF8Error
	switch {
	case errors.Is(err, messages.ErrEmptyJSON):
		return NewError(http.StatusBadRequest, CodeInvalidJSON, "request body is empty; expected a JSON object")
	case errors.Is(err, messages.ErrTrailingData):
		return NewError(http.StatusBadRequest, CodeInvalidJSON, "unexpected data after the JSON object")
	case errors.As(err, &utf):
		return NewError(http.StatusBadRequest, CodeInvalidJSON, fmt.Sprintf("the body is not valid UTF-8 (byte %d)", utf.Offset))
	case errors.As(err, &unknown):
		return NewError(http.StatusBadRequest, CodeUnknownField, unknown.Error())
	case errors.As(err, &syntax):
		return NewError(http.StatusBadRequest, CodeInvalidJSON, fmt.Sprintf("malformed JSON at byte %d: %v", syntax.Offset, syntax))
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the value"
		}
		return NewError(http.StatusBadRequest, CodeInvalidJSON, fmt.Sprintf("%s must be %s, not %s", field, JSONKind(typ.Type), typ.Value))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return NewError(http.StatusBadRequest, CodeInvalidJSON, "truncated JSON")
	default:
		return NewError(http.StatusBadRequest, CodeInvalidJSON, err.Error())
	}
}

// JSONKind names what JSON a Go type decodes from, for error messages
// (clients speak JSON, not Go type names).
func JSONKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 { // json.RawMessage: any value
			return "a JSON value"
		}
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	default:
		return "a JSON value"
	}
}

// closeLinger is how long a connection closed by WriteAndClose stays open
// after its answer and FIN, so that the client reads the answer before
// the close resets the connection (a close with unread request bytes
// sends an RST, which can discard the answer at the client). net/http
// waits the same 500 ms.
const closeLinger = 500 * time.Millisecond

// WriteErrorAndClose answers e and closes the connection without reading
// the request body: what a request that must not cost the server anything
// more gets (a missing or wrong token). The connection is hijacked, the
// answer written with Connection: close, the write side shut, and the
// connection closed closeLinger later; the body is never read, so a
// client trickling it cannot hold the connection. Where hijacking is not
// possible (HTTP/2, a test recorder) the answer is written normally with
// Connection: close and a read deadline in the past, which makes
// net/http's drain of the body fail at once.
func WriteErrorAndClose(w http.ResponseWriter, e *Error) {
	b, _ := json.Marshal(messages.ErrorBody{Error: messages.APIError{Code: e.Code, Message: e.Message}})
	WriteAndClose(w, e.Status, "application/json", append(b, '\n'), e)
}

// WriteAndClose is WriteErrorAndClose with any body; e (may be nil) adds
// its WWW-Authenticate and Retry-After headers.
func WriteAndClose(w http.ResponseWriter, status int, contentType string, body []byte, e *Error) {
	record(w, e)
	h := w.Header()
	if e != nil && e.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="conclave"`)
	}
	if e != nil && e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((e.RetryAfter+time.Second-1)/time.Second), 10))
	}
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("Connection", "close")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	rc := http.NewResponseController(w)
	conn, _, err := rc.Hijack()
	if err != nil {
		_ = rc.SetReadDeadline(time.Now())
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	var buf bytes.Buffer
	buf.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	_ = h.Write(&buf)
	buf.WriteString("\r\n")
	buf.Write(body)
	// A fresh answer on a connection whose previous answers were flushed:
	// it fits the send buffer, the deadline is only a guard.
	_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write(buf.Bytes()); err != nil {
		_ = conn.Close()
		return
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	time.AfterFunc(closeLinger, func() { _ = conn.Close() })
}
