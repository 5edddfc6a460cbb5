package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Errors of DecodeStrict besides encoding/json's own (*json.SyntaxError,
// *json.UnmarshalTypeError, io.ErrUnexpectedEOF for a truncated value, and
// the errors of the types' UnmarshalJSON methods).
var (
	// ErrEmptyJSON: the input is empty or only whitespace.
	ErrEmptyJSON = errors.New("messages: empty input; expected a JSON value")
	// ErrTrailingData: something follows the JSON value (a second value, a
	// stray '}', anything but whitespace).
	ErrTrailingData = errors.New("messages: unexpected data after the JSON value")
)

// UnknownFieldError: the input names a field the destination type does not
// have, at any depth.
type UnknownFieldError struct {
	Field string // the field's name as the input spells it
}

func (e *UnknownFieldError) Error() string { return fmt.Sprintf("unknown field %q", e.Field) }

// InvalidUTF8Error: the input is not valid UTF-8. encoding/json would
// silently replace the bad bytes with U+FFFD; a wire format must refuse them.
type InvalidUTF8Error struct {
	Offset int // of the first byte that is not valid UTF-8
}

func (e *InvalidUTF8Error) Error() string {
	return fmt.Sprintf("invalid UTF-8 at byte %d", e.Offset)
}

// DecodeStrict decodes exactly one JSON value from data into dst. It is the
// one strict decoder of every wire format (HTTP bodies, WebSocket frames,
// scenario, plan and tokens files): it refuses invalid UTF-8 anywhere in
// data (*InvalidUTF8Error), an empty input (ErrEmptyJSON), fields dst does
// not have (*UnknownFieldError) and anything after the value
// (ErrTrailingData, so `{"nodes":3}}` is an error). Other failures are
// encoding/json's errors, unchanged, for errors.As.
func DecodeStrict(data []byte, dst any) error { return decode(data, dst, true) }

// DecodeOpen is DecodeStrict for formats that are open to fields this
// server does not know (AG-UI's RunAgentInput, whose clients send the
// fields of newer protocol versions): unknown fields are ignored; invalid
// UTF-8, empty input and trailing data are errors all the same.
func DecodeOpen(data []byte, dst any) error { return decode(data, dst, false) }

func decode(data []byte, dst any, strict bool) error {
	if !utf8.Valid(data) {
		return &InvalidUTF8Error{Offset: firstInvalidUTF8(data)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return ErrEmptyJSON
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(dst); err != nil {
		// encoding/json has no typed error for an unknown field: this is
		// the one place that reads its message.
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return &UnknownFieldError{Field: strings.Trim(f, `"`)}
		}
		return err
	}
	// dec.More would accept a stray '}' or ']' after the value; only the
	// end of the input will do.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ErrTrailingData
	}
	return nil
}

// DecodeStrictReader reads r to its end and decodes it with DecodeStrict.
// Bounding r's size is the caller's job.
func DecodeStrictReader(r io.Reader, dst any) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return DecodeStrict(data, dst)
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}
