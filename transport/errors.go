package transport

import (
	"encoding/json"
	"net/http"

	"github.com/conclave-ai/conclave/messages"
)

// Error codes of the API (the "code" of an error body). docs/api.md lists
// them with their statuses.
const (
	codeBadRequest       = "bad_request"
	codeInvalidJSON      = "invalid_json"
	codeUnknownField     = "unknown_field"
	codeBodyTooLarge     = "body_too_large"
	codeUnsupportedMedia = "unsupported_media_type"
	codeInvalidCursor    = "invalid_cursor"
	codeCursorAhead      = "cursor_ahead"
	codeUnauthorized     = "unauthorized"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeConflict         = "conflict"
	codeIdempotencyReuse = "idempotency_key_reused"
	codeUnavailable      = "unavailable"
	codeInternal         = "internal"
)

// apiError is an error answer decided before any response byte was written.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func errorf(status int, code, message string) *apiError {
	return &apiError{status: status, code: code, message: message}
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="conclave"`)
	}
	writeJSON(w, e.status, messages.ErrorBody{Error: messages.APIError{Code: e.code, Message: e.message}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
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
