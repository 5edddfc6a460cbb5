package transport

import (
	"net/http"

	"github.com/conclave-ai/conclave/transport/internal/httpjson"
)

// Error codes of the API (the "code" of an error body); their one home is
// internal/httpjson, shared with the AG-UI and A2A endpoints.
const (
	codeBadRequest       = httpjson.CodeBadRequest
	codeInvalidJSON      = httpjson.CodeInvalidJSON
	codeInvalidCursor    = httpjson.CodeInvalidCursor
	codeCursorAhead      = httpjson.CodeCursorAhead
	codeUnauthorized     = httpjson.CodeUnauthorized
	codeNotFound         = httpjson.CodeNotFound
	codeMethodNotAllowed = httpjson.CodeMethodNotAllowed
	codeConflict         = httpjson.CodeConflict
	codeIdempotencyReuse = httpjson.CodeIdempotencyReuse
	codeUnavailable      = httpjson.CodeUnavailable
	codeInternal         = httpjson.CodeInternal
	codeHTTPVersion      = httpjson.CodeHTTPVersionNotSupported
)

// apiError is an error answer decided before any response byte was written.
type apiError = httpjson.Error

func errorf(status int, code, message string) *apiError {
	return httpjson.NewError(status, code, message)
}

func writeError(w http.ResponseWriter, e *apiError) { httpjson.WriteError(w, e) }

func writeJSON(w http.ResponseWriter, status int, v any) { httpjson.WriteJSON(w, status, v) }

// engineError maps engine errors to API errors.
func engineError(err error) *apiError { return httpjson.EngineError(err) }
