package scripted

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schema-driven arguments, for Scenario.Calls: the scripted model calls
// tools it knows nothing about but their JSON Schema (an MCP server's, in
// practice), so it makes up arguments the schema accepts.

// maxArgsDepth bounds how deep ArgsFor follows nested objects and arrays.
const maxArgsDepth = 8

// ArgsFor returns arguments for a tool whose input schema is schema: a
// JSON object with the schema's required properties, each a value of its
// schema, drawn from r. Optional properties are left out. A value is its
// schema's const, else one of its enum (drawn), else its default, else by
// type:
//
//   - string: vocabulary words (per format: a date-time, a date, an email,
//     a URI or a UUID of fixed shape), padded with 'x' to minLength and cut
//     to maxLength;
//   - integer and number: a whole number in [minimum, maximum] (exclusive
//     bounds respected; 1..100 when unbounded), a multiple of an integer
//     multipleOf where one fits;
//   - boolean: drawn;
//   - array: minItems items of its items schema (none by default);
//   - object: its required properties, recursively;
//   - a schema with anyOf or oneOf: its first alternative; allOf: the
//     first member; no type: a string.
//
// Patterns, dependent schemas and conditionals are not honoured: a tool
// whose schema needs them may refuse the arguments, which the model then
// sees as an error result. A schema that is not valid JSON gives {}.
func ArgsFor(schema json.RawMessage, r *rand.Rand) json.RawMessage {
	var s jsonschema.Schema
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return json.RawMessage("{}")
	}
	v := valueFor(&s, r, 0)
	if _, ok := v.(map[string]any); !ok {
		v = map[string]any{}
	}
	b, err := json.Marshal(v) // map keys are sorted: deterministic
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

// valueFor is a value of s (see ArgsFor). The values are JSON values of
// any shape the schema asks for, hence any.
func valueFor(s *jsonschema.Schema, r *rand.Rand, depth int) any {
	switch {
	case s == nil:
		return word(r)
	case s.Const != nil:
		return *s.Const
	case len(s.Enum) > 0:
		return s.Enum[r.IntN(len(s.Enum))]
	case len(s.Default) > 0:
		var v any
		if json.Unmarshal(s.Default, &v) == nil {
			return v
		}
	}
	if depth >= maxArgsDepth {
		return nil
	}
	switch {
	case len(s.AnyOf) > 0:
		return valueFor(s.AnyOf[0], r, depth+1)
	case len(s.OneOf) > 0:
		return valueFor(s.OneOf[0], r, depth+1)
	case len(s.AllOf) > 0 && s.Type == "" && len(s.Types) == 0:
		return valueFor(s.AllOf[0], r, depth+1)
	}
	switch typeOf(s) {
	case "object":
		obj := map[string]any{}
		for _, name := range s.Required {
			obj[name] = valueFor(s.Properties[name], r, depth+1)
		}
		return obj
	case "array":
		n := 0
		if s.MinItems != nil {
			n = min(*s.MinItems, 16)
		}
		items := make([]any, n)
		for i := range items {
			switch {
			case i < len(s.PrefixItems):
				items[i] = valueFor(s.PrefixItems[i], r, depth+1)
			case s.Items != nil:
				items[i] = valueFor(s.Items, r, depth+1)
			default:
				items[i] = word(r)
			}
		}
		return items
	case "integer", "number":
		return numberFor(s, r)
	case "boolean":
		return r.IntN(2) == 1
	case "null":
		return nil
	}
	return stringFor(s, r)
}

// typeOf is the type a value of s gets: its type, or the first of its
// types that is not "null" ("string" when it names none).
func typeOf(s *jsonschema.Schema) string {
	if s.Type != "" {
		return s.Type
	}
	for _, t := range s.Types {
		if t != "null" {
			return t
		}
	}
	if len(s.Types) > 0 {
		return "null"
	}
	if len(s.Properties) > 0 || len(s.Required) > 0 {
		return "object"
	}
	return "string"
}

func word(r *rand.Rand) string { return strings.TrimSpace(vocabulary[r.Uint64()>>58]) }

func stringFor(s *jsonschema.Schema, r *rand.Rand) string {
	var v string
	switch s.Format {
	case "date-time":
		v = "2026-01-02T03:04:05Z"
	case "date":
		v = "2026-01-02"
	case "time":
		v = "03:04:05Z"
	case "email":
		v = word(r) + "@example.org"
	case "uri", "url", "iri", "uri-reference":
		v = "https://example.org/" + word(r)
	case "uuid":
		v = "00000000-0000-4000-8000-" + strconv.FormatUint(100000000000+r.Uint64()%900000000000, 10)
	default:
		v = word(r) + " " + word(r)
	}
	if s.MinLength != nil && len(v) < *s.MinLength {
		v += strings.Repeat("x", min(*s.MinLength, 1<<12)-len(v))
	}
	if s.MaxLength != nil && len(v) > *s.MaxLength {
		v = v[:max(*s.MaxLength, 0)] // ASCII: any cut is a rune boundary
	}
	return v
}

// numberFor is a whole number within s's bounds (see ArgsFor).
func numberFor(s *jsonschema.Schema, r *rand.Rand) float64 {
	lo, hi := 1.0, 100.0
	switch {
	case s.Minimum != nil:
		lo = math.Ceil(*s.Minimum)
	case s.ExclusiveMinimum != nil:
		lo = math.Floor(*s.ExclusiveMinimum) + 1
	}
	switch {
	case s.Maximum != nil:
		hi = math.Floor(*s.Maximum)
	case s.ExclusiveMaximum != nil:
		hi = math.Ceil(*s.ExclusiveMaximum) - 1
	}
	if s.Minimum == nil && s.ExclusiveMinimum == nil && hi < lo {
		lo = hi - 99
	}
	if s.Maximum == nil && s.ExclusiveMaximum == nil && hi < lo {
		hi = lo + 99
	}
	if hi < lo { // no whole number fits: the lower bound, as good as any
		if s.Minimum != nil {
			return *s.Minimum
		}
		return lo
	}
	span := min(hi-lo, 1<<20)
	v := lo + float64(r.IntN(int(span)+1))
	if m := s.MultipleOf; m != nil && *m >= 1 && *m == math.Trunc(*m) {
		if c := math.Ceil(lo / *m) * *m; c <= hi {
			v = c + *m*float64(r.IntN(int(min(math.Floor((hi-c) / *m), 1<<20))+1))
		}
	}
	return v
}

// withCalls appends to tools the tools of a scenario's Calls it does not
// hold yet.
func withCalls(tools, calls []string) []string {
	for _, c := range calls {
		if !slices.Contains(tools, c) {
			tools = append(tools, c)
		}
	}
	return tools
}
