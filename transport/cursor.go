package transport

import (
	"net/http"
	"strconv"

	"github.com/conclave-ai/conclave/internal/regress"
)

// maxCursorLen bounds a cursor's text: 20 digits hold any uint64.
const maxCursorLen = 20

// ParseCursor parses a stream cursor: the Last-Event-ID header or the
// after query parameter, a decimal seq. Empty means 0 (from the start).
// Anything but 1..20 ASCII digits that fit a uint64 is an error.
func ParseCursor(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	if len(s) > maxCursorLen {
		return 0, errCursorSyntax
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errCursorSyntax
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errCursorSyntax
	}
	return n, nil
}

var errCursorSyntax = errorf(http.StatusBadRequest, codeInvalidCursor, "cursor (Last-Event-ID or after) must be a decimal seq")

// cursorFrom reads the cursor of a stream request: the Last-Event-ID header
// (what EventSource sends on reconnect) wins over ?after=.
func cursorFrom(r *http.Request) (uint64, *apiError) {
	raw := r.Header.Get("Last-Event-ID")
	header := raw != ""
	if !header {
		raw = r.URL.Query().Get("after")
	}
	n, err := ParseCursor(raw)
	if err != nil {
		return 0, errCursorSyntax
	}
	if header && n > 0 && regress.LastEventIDInclusive.Load() {
		n-- // the fixed bug: the client's last event is sent again
	}
	return n, nil
}
