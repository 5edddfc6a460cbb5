package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
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
	// Path is where the field is: the JSON path of the object that holds
	// it, as the input spells it ("scenario", "plan.nodes[2]"); empty at
	// the top level, or when it cannot be told (inside a value decoded by
	// its own UnmarshalJSON).
	Path string
}

func (e *UnknownFieldError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("unknown field %q", e.Field)
	}
	return fmt.Sprintf("unknown field %q in %s", e.Field, e.Path)
}

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
			field := strings.Trim(f, `"`)
			return &UnknownFieldError{Field: field, Path: unknownFieldPath(data, reflect.TypeOf(dst), field)}
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

// unknownFieldPath finds where field is unknown in data decoded into a
// value of type t: encoding/json names the field but not where it is. It
// walks data and t together, in document order (the order the decoder
// read it, so the first unknown key it meets is the one the decoder
// refused), and returns the path of the object holding the first key
// named field that t has no field for there. It returns "" at the top
// level and when it cannot tell (the key sits inside a type that decodes
// itself, through UnmarshalJSON).
func unknownFieldPath(data []byte, t reflect.Type, field string) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	path, _ := walkUnknown(dec, t, "", field)
	return path
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// walkUnknown reads one value from dec. found reports that the unknown
// key was met in it, and path where; a false found with a nil error means
// the value held no such key.
func walkUnknown(dec *json.Decoder, t reflect.Type, path, field string) (string, bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (reflect.PointerTo(t).Implements(unmarshalerType) || t.Kind() == reflect.Interface) {
		t = nil // decodes itself (or anything): its keys cannot be told apart
	}
	tok, err := dec.Token()
	if err != nil {
		return "", false
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return "", false // a scalar
	}
	switch delim {
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if p, found := walkUnknown(dec, elem, path+"["+strconv.Itoa(i)+"]", field); found {
				return p, true
			}
		}
	case '{':
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return "", false
			}
			key, _ := kt.(string)
			var vt reflect.Type
			switch {
			case t == nil:
			case t.Kind() == reflect.Map:
				vt = t.Elem()
			case t.Kind() == reflect.Struct:
				var known bool
				if vt, known = structField(t, key); !known && key == field {
					return path, true
				}
			}
			if p, found := walkUnknown(dec, vt, joinPath(path, key), field); found {
				return p, true
			}
		}
	}
	_, _ = dec.Token() // the closing delimiter
	return "", false
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// structField returns the type of t's field that the JSON key names, the
// way encoding/json matches keys: the exact name first, then any name
// equal under case folding, through embedded structs.
func structField(t reflect.Type, key string) (reflect.Type, bool) {
	var folded reflect.Type
	foundFold := false
	var visit func(t reflect.Type) (reflect.Type, bool)
	visit = func(t reflect.Type) (reflect.Type, bool) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					if typ, ok := visit(ft); ok {
						return typ, true
					}
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if name == key {
				return f.Type, true
			}
			if !foundFold && strings.EqualFold(name, key) {
				folded, foundFold = f.Type, true
			}
		}
		return nil, false
	}
	if typ, ok := visit(t); ok {
		return typ, true
	}
	return folded, foundFold
}
