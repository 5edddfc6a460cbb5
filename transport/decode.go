package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
)

// DefaultMaxBody bounds request bodies.
const DefaultMaxBody = 1 << 20

// readBody reads a JSON request body of at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, errorf(http.StatusUnsupportedMediaType, codeUnsupportedMedia, "Content-Type must be application/json")
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, errorf(http.StatusRequestEntityTooLarge, codeBodyTooLarge, fmt.Sprintf("request body is larger than %d bytes", limit))
		}
		return nil, errorf(http.StatusBadRequest, codeBadRequest, "reading the request body failed: "+err.Error())
	}
	return body, nil
}

// decodeStrict decodes exactly one JSON object into dst, refusing unknown
// fields and trailing data, and turns failures into clear 4xx errors.
func decodeStrict(body []byte, dst any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return errorf(http.StatusBadRequest, codeInvalidJSON, "request body is empty; expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(http.StatusBadRequest, codeInvalidJSON, "unexpected data after the JSON object")
	}
	return nil
}

func jsonError(err error) *apiError {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return errorf(http.StatusBadRequest, codeInvalidJSON, fmt.Sprintf("malformed JSON at byte %d: %v", syntax.Offset, syntax))
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the value"
		}
		return errorf(http.StatusBadRequest, codeInvalidJSON, fmt.Sprintf("%s must be %s, not %s", field, jsonKind(typ.Type), typ.Value))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, codeInvalidJSON, "truncated JSON")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errorf(http.StatusBadRequest, codeUnknownField, strings.TrimPrefix(err.Error(), "json: ")) // encoding/json has no typed error for this
	default:
		return errorf(http.StatusBadRequest, codeInvalidJSON, err.Error())
	}
}

// jsonKind names what JSON a Go type decodes from, for error messages
// (clients speak JSON, not Go type names).
func jsonKind(t reflect.Type) string {
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
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	default:
		return "a JSON value"
	}
}
