package messages_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
)

const (
	openAPIFile  = "../docs/openapi.yaml"
	openAPIBegin = "    # BEGIN GENERATED: messages.APISchemas (go test ./messages -run TestOpenAPISchemas -update)"
	openAPIEnd   = "    # END GENERATED: messages.APISchemas"
)

// TestOpenAPISchemas keeps the generated part of docs/openapi.yaml's
// components.schemas (the request and answer bodies) in step with the Go
// types; -update rewrites it.
func TestOpenAPISchemas(t *testing.T) {
	if !*update {
		t.Parallel()
	}
	schemas, err := messages.APISchemas()
	if err != nil {
		t.Fatal(err)
	}
	var gen strings.Builder
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range schemas {
			if !yield(k) {
				return
			}
		}
	}) {
		js, err := json.Marshal(schemas[name])
		if err != nil {
			t.Fatal(err)
		}
		y, err := jsonToYAML(js, 6)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fmt.Fprintf(&gen, "    %s:\n%s", name, y)
	}
	raw, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	b := strings.Index(doc, openAPIBegin+"\n")
	e := strings.Index(doc, openAPIEnd+"\n")
	if b < 0 || e < b || strings.Count(doc, openAPIBegin) != 1 || strings.Count(doc, openAPIEnd) != 1 {
		t.Fatalf("%s must hold the lines %q and %q once each, in that order", openAPIFile, openAPIBegin, openAPIEnd)
	}
	b += len(openAPIBegin) + 1
	if doc[b:e] == gen.String() {
		return
	}
	if *update {
		if err := os.WriteFile(openAPIFile, []byte(doc[:b]+gen.String()+doc[e:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the generated schemas of %s", openAPIFile)
		return
	}
	t.Fatalf("%s is out of date; run go test ./messages -run TestOpenAPISchemas -update\n%s", openAPIFile, firstDiff(doc[b:e], gen.String()))
}

// TestJSONToYAML pins the YAML the generator writes: block style, keys in
// the JSON's order, every string double-quoted (a JSON string literal is
// a YAML double-quoted scalar), empty objects and arrays in flow style.
func TestJSONToYAML(t *testing.T) {
	t.Parallel()
	got, err := jsonToYAML([]byte(`{"type":"object","properties":{"a b":{"type":["null","string"]},"n":{"minimum":0}},"required":[],"x":{},"additionalProperties":false,"enum":["yes","é\n"]}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := `type: "object"
properties:
  "a b":
    type:
      - "null"
      - "string"
  n:
    minimum: 0
required: []
x: {}
additionalProperties: false
enum:
  - "yes"
  - "é\n"
`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

var plainKey = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$-]*$`)

// jsonToYAML writes a JSON document as block YAML indented by indent
// spaces, keeping the order of object keys.
func jsonToYAML(js []byte, indent int) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var out strings.Builder
	if err := yamlValue(dec, &out, indent, false); err != nil {
		return "", err
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", fmt.Errorf("trailing data after the JSON value")
	}
	return strings.TrimPrefix(out.String(), "\n"), nil
}

// yamlValue writes the next JSON value of dec. A scalar (and an empty
// container) is written on the current line after a space; a container
// starts on the next line, each entry at indent. inline: the caller has
// written "- " and the first entry goes on that line.
func yamlValue(dec *json.Decoder, out *strings.Builder, indent int, inline bool) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	pad := strings.Repeat(" ", indent)
	switch v := tok.(type) {
	case json.Delim:
		closeBy := json.Delim('}')
		if v == '[' {
			closeBy = ']'
		}
		first := true
		for dec.More() {
			if first && !inline {
				out.WriteString("\n")
			}
			lead := pad
			if first && inline {
				lead = ""
			}
			first = false
			if v == '{' {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k := kt.(string)
				if !plainKey.MatchString(k) {
					q, _ := json.Marshal(k)
					k = string(q)
				}
				out.WriteString(lead + k + ":")
				if err := yamlValue(dec, out, indent+2, false); err != nil {
					return err
				}
				continue
			}
			out.WriteString(lead + "-")
			if err := yamlItem(dec, out, indent+2); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		if first {
			if closeBy == '}' {
				out.WriteString(" {}\n")
			} else {
				out.WriteString(" []\n")
			}
		}
		return nil
	case string:
		q, _ := json.Marshal(v)
		out.WriteString(" " + string(q) + "\n")
	case json.Number:
		out.WriteString(" " + v.String() + "\n")
	case bool:
		fmt.Fprintf(out, " %t\n", v)
	case nil:
		out.WriteString(" null\n")
	}
	return nil
}

// yamlItem writes an array element after "-": a non-empty object starts on
// the dash's line, everything else as yamlValue does.
func yamlItem(dec *json.Decoder, out *strings.Builder, indent int) error {
	// Peek: objects go inline after "- ", the rest after "-".
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	sub := json.NewDecoder(bytes.NewReader(raw))
	sub.UseNumber()
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 2 && trimmed[0] == '{' {
		out.WriteString(" ")
		return yamlValue(sub, out, indent, true)
	}
	return yamlValue(sub, out, indent, false)
}
