package agui

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
)

// Error codes of JSON error answers, as in docs/api.md.
const (
	codeBadRequest       = "bad_request"
	codeInvalidJSON      = "invalid_json"
	codeUnknownField     = "unknown_field"
	codeBodyTooLarge     = "body_too_large"
	codeUnsupportedMedia = "unsupported_media_type"
	codeUnauthorized     = "unauthorized"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeConflict         = "conflict"
	codeUnavailable      = "unavailable"
	codeInternal         = "internal"
)

// apiError is an error answered as JSON before any byte of a stream:
// {"error":{"code":"…","message":"…"}}, the convention of every endpoint.
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
	b, err := json.Marshal(messages.ErrorBody{Error: messages.APIError{Code: e.code, Message: e.message}})
	if err != nil {
		e.status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"encoding the response failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(e.status)
	_, _ = w.Write(append(b, '\n'))
}

// engineError maps engine errors as the rest of the API does.
func engineError(err error) *apiError {
	switch {
	case errors.Is(err, actors.ErrInvalidRequest):
		return errorf(http.StatusUnprocessableEntity, codeBadRequest, err.Error())
	case errors.Is(err, actors.ErrSessionNotFound), errors.Is(err, actors.ErrRunNotFound):
		return errorf(http.StatusNotFound, codeNotFound, err.Error())
	case errors.Is(err, actors.ErrShuttingDown):
		return errorf(http.StatusServiceUnavailable, codeUnavailable, err.Error())
	default:
		return errorf(http.StatusInternalServerError, codeInternal, err.Error())
	}
}
