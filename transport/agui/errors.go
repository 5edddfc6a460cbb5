package agui

import (
	"net/http"

	"github.com/conclave-ai/conclave/transport/internal/httpjson"
)

// Error codes of JSON error answers, as in docs/api.md; their one home is
// transport/internal/httpjson, shared with the rest of the API.
const (
	codeBadRequest       = httpjson.CodeBadRequest
	codeInvalidJSON      = httpjson.CodeInvalidJSON
	codeUnknownField     = httpjson.CodeUnknownField
	codeUnauthorized     = httpjson.CodeUnauthorized
	codeNotFound         = httpjson.CodeNotFound
	codeMethodNotAllowed = httpjson.CodeMethodNotAllowed
	codeConflict         = httpjson.CodeConflict
	codeUnavailable      = httpjson.CodeUnavailable
	codeInternal         = httpjson.CodeInternal
)

// apiError is an error answered as JSON before any byte of a stream.
type apiError = httpjson.Error

func errorf(status int, code, message string) *apiError {
	return httpjson.NewError(status, code, message)
}

func writeError(w http.ResponseWriter, e *apiError) { httpjson.WriteError(w, e) }

// engineError maps engine errors as the rest of the API does.
func engineError(err error) *apiError { return httpjson.EngineError(err) }
