package messages_test

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
)

func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	type inner struct {
		B string `json:"b"`
	}
	type target struct {
		A  int   `json:"a"`
		In inner `json:"in"`
	}
	tests := []struct {
		name string
		in   string
		ok   func(error) bool
	}{
		{"valid", `{"a":1,"in":{"b":"x"}}`, func(err error) bool { return err == nil }},
		{"trailing whitespace", "{\"a\":1}\n\t ", func(err error) bool { return err == nil }},
		{"empty", "", func(err error) bool { return errors.Is(err, messages.ErrEmptyJSON) }},
		{"blank", " \n", func(err error) bool { return errors.Is(err, messages.ErrEmptyJSON) }},
		{"stray brace", `{"a":3}}`, func(err error) bool { return errors.Is(err, messages.ErrTrailingData) }},
		{"second value", `{"a":3} {}`, func(err error) bool { return errors.Is(err, messages.ErrTrailingData) }},
		{"junk", `{"a":3}x`, func(err error) bool { return errors.Is(err, messages.ErrTrailingData) }},
		{"unknown", `{"a":1,"colour":"red"}`, func(err error) bool {
			var unknown *messages.UnknownFieldError
			return errors.As(err, &unknown) && unknown.Field == "colour"
		}},
		{"unknown deep", `{"in":{"b":"x","c":1}}`, func(err error) bool {
			var unknown *messages.UnknownFieldError
			return errors.As(err, &unknown) && unknown.Field == "c"
		}},
		{"syntax", `{"a":}`, func(err error) bool { var syntax *json.SyntaxError; return errors.As(err, &syntax) }},
		{"type", `{"a":"one"}`, func(err error) bool {
			var typ *json.UnmarshalTypeError
			return errors.As(err, &typ) && typ.Field == "a"
		}},
		{"truncated", `{"a":1`, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"invalid utf-8 in a string", "{\"in\":{\"b\":\"x\xff\"}}", func(err error) bool {
			var badUTF8 *messages.InvalidUTF8Error
			return errors.As(err, &badUTF8) && badUTF8.Offset == 13
		}},
		{"invalid utf-8 in a field name", "{\"\xc3\":1}", func(err error) bool {
			var badUTF8 *messages.InvalidUTF8Error
			return errors.As(err, &badUTF8) && badUTF8.Offset == 2
		}},
		{"invalid utf-8 after the value", "{}\xff", func(err error) bool {
			var badUTF8 *messages.InvalidUTF8Error
			return errors.As(err, &badUTF8) && badUTF8.Offset == 2
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var v target
			err := messages.DecodeStrict([]byte(tt.in), &v)
			if !tt.ok(err) {
				t.Fatalf("DecodeStrict(%q) = %T %v", tt.in, err, err)
			}
			if err2 := messages.DecodeStrictReader(strings.NewReader(tt.in), &target{}); (err == nil) != (err2 == nil) {
				t.Fatalf("DecodeStrictReader(%q) = %v, DecodeStrict = %v", tt.in, err2, err)
			}
		})
	}
}

// TestDecodeStrict_UnknownFieldPath: an unknown field's error says where
// it is, as the input spells the path.
func TestDecodeStrict_UnknownFieldPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, field, path, msg string }{
		{`{"question":"q","colour":"red"}`, "colour", "", `unknown field "colour"`},
		{`{"question":"q","scenario":{"nodes":2,"colour":"red"}}`, "colour", "scenario", `unknown field "colour" in scenario`},
		// Keys match case-insensitively, as encoding/json matches them.
		{`{"Scenario":{"NODES":2,"debate":{"agents":2,"colour":1}}}`, "colour", "Scenario.debate", ""},
		{`{"scenario":{"steering":[{"note":"a"},{"note":"b","diff":{"ops":[{"op":"add_node","colour":1}]}}]}}`,
			"colour", "scenario.steering[1].diff.ops[0]", ""},
		// An unknown key spelled like a known one elsewhere: the first unknown one counts.
		{`{"scenario":{"tokens":3},"tokens":1}`, "tokens", "", ""},
		// A value that decodes itself: where is not known.
		{`{"scenario":{"fail_nodes":{"colour":1}}}`, "", "", ""},
	} {
		var v messages.StartRun
		err := messages.DecodeStrict([]byte(tc.in), &v)
		var unknown *messages.UnknownFieldError
		if tc.field == "" {
			if errors.As(err, &unknown) && unknown.Path != "" {
				t.Errorf("DecodeStrict(%s) = %v, want no path", tc.in, err)
			}
			continue
		}
		if !errors.As(err, &unknown) || unknown.Field != tc.field || unknown.Path != tc.path {
			t.Errorf("DecodeStrict(%s) = %#v, want field %q in %q", tc.in, err, tc.field, tc.path)
			continue
		}
		if tc.msg != "" && err.Error() != tc.msg {
			t.Errorf("DecodeStrict(%s) says %q, want %q", tc.in, err, tc.msg)
		}
	}
}

func TestDecodeScenario_RefusesTrailingBrace(t *testing.T) {
	t.Parallel()
	if _, err := messages.DecodeScenario(strings.NewReader(`{"nodes":3}}`)); !errors.Is(err, messages.ErrTrailingData) {
		t.Fatalf(`DecodeScenario({"nodes":3}}) = %v, want ErrTrailingData`, err)
	}
	if _, err := messages.DecodeScenario(strings.NewReader(`{"nodes":3}`)); err != nil {
		t.Fatalf(`DecodeScenario({"nodes":3}) = %v`, err)
	}
}
