package messages_test

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/conclave-ai/conclave/messages"
)

var update = flag.Bool("update", false, "rewrite docs/events.md")

const (
	eventsDoc   = "../docs/events.md"
	beginMarker = "<!-- BEGIN GENERATED: event catalogue (go test ./messages -run TestEventsDoc -update) -->"
	endMarker   = "<!-- END GENERATED -->"
)

// TestEventsDoc keeps the generated event catalogue of docs/events.md in
// step with the catalogue in types.go and the payload structs. With -update
// it rewrites the part between the markers and nothing else.
func TestEventsDoc(t *testing.T) {
	if !*update {
		t.Parallel()
	}
	gen, err := renderCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(eventsDoc)
	if err != nil {
		t.Fatal(err)
	}
	head, current, tail, err := splitGenerated(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	if current == gen {
		return
	}
	if *update {
		if err := os.WriteFile(eventsDoc, []byte(head+gen+tail), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the generated section of %s", eventsDoc)
		return
	}
	t.Fatalf("docs/events.md is out of date; run go test ./messages -run TestEventsDoc -update\n%s", firstDiff(current, gen))
}

// splitGenerated cuts doc into the text up to and including the begin
// marker line, the generated text, and the text from the end marker on.
func splitGenerated(doc string) (head, gen, tail string, err error) {
	b := strings.Index(doc, beginMarker+"\n")
	if b < 0 || strings.Count(doc, beginMarker) != 1 {
		return "", "", "", fmt.Errorf("%s must contain the line %q exactly once", eventsDoc, beginMarker)
	}
	b += len(beginMarker) + 1
	e := strings.Index(doc[b:], endMarker)
	if e < 0 || strings.Count(doc, endMarker) != 1 {
		return "", "", "", fmt.Errorf("%s must contain the line %q exactly once, after the begin marker", eventsDoc, endMarker)
	}
	e += b
	return doc[:b], doc[b:e], doc[e:], nil
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("first difference at generated line %d:\n  doc:  %q\n  want: %q", i+1, gl, wl)
		}
	}
	return ""
}

// TestEventsDoc_Example checks that the first JSON example of
// docs/events.md is exactly what Envelope.MarshalJSON writes for it.
func TestEventsDoc_Example(t *testing.T) {
	if !*update {
		t.Parallel()
	}
	doc, err := os.ReadFile(eventsDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "```json\n")
	if !ok {
		t.Fatalf("%s has no ```json example", eventsDoc)
	}
	example, _, ok := strings.Cut(after, "\n```")
	if !ok {
		t.Fatalf("%s: unterminated ```json example", eventsDoc)
	}
	var env messages.Envelope
	if err := json.Unmarshal([]byte(example), &env); err != nil {
		t.Fatalf("example does not decode: %v", err)
	}
	got, err := env.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != example {
		t.Errorf("example is not what MarshalJSON writes:\n  doc:  %s\n  want: %s", example, got)
	}
}

// renderCatalogue renders the generated part of docs/events.md: an index,
// one section per event type in messages.EventTypes order, and the field
// tables of the named struct types the payloads refer to.
func renderCatalogue() (string, error) {
	enums, err := stringEnums(".")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	r := &renderer{seen: map[reflect.Type]bool{}, enums: enums}
	b.WriteString("\n| Type | Stream role | Description |\n| --- | --- | --- |\n")
	for _, typ := range messages.EventTypes() {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s |\n", typ, typ, typ.Role(), cell(typ.Doc()))
	}
	for _, typ := range messages.EventTypes() {
		p, err := typ.NewPayload()
		if err != nil {
			return "", err
		}
		pt := reflect.TypeOf(p).Elem()
		fmt.Fprintf(&b, "\n### %s\n\n%s\n\nStream role: **%s**. Payload: `%s`.\n\n", typ, typ.Doc(), typ.Role(), goType(pt))
		if err := r.table(&b, pt); err != nil {
			return "", fmt.Errorf("%s payload: %w", typ, err)
		}
	}
	b.WriteString("\n## Payload field types\n\nObjects that appear inside payloads.\n")
	for i := 0; i < len(r.queue); i++ { // table may append to r.queue
		st := r.queue[i]
		fmt.Fprintf(&b, "\n### %s\n\n", st.Name())
		if err := r.table(&b, st); err != nil {
			return "", fmt.Errorf("%s: %w", st.Name(), err)
		}
	}
	b.WriteString("\n")
	return b.String(), nil
}

// jsonTypeOverrides names the JSON shape of types whose encoding is custom.
// A type with its own MarshalJSON that is missing here fails the test.
var jsonTypeOverrides = map[reflect.Type]string{
	reflect.TypeFor[json.RawMessage]():       "any JSON",
	reflect.TypeFor[time.Time]():             "string (RFC 3339)",
	reflect.TypeFor[messages.NodeSelector](): "array of string \\| number",
	reflect.TypeFor[messages.HITLMode]():     "string: `none` \\| `plan` \\| `node` \\| `tools`",
}

type renderer struct {
	seen  map[reflect.Type]bool
	queue []reflect.Type // named struct types to document, in order of first use
	// enums maps a named string type of package messages to its constants.
	enums map[string][]string
}

// stringEnums collects, from the Go files of package messages in dir, the
// values of the string constants declared with an explicit named type
// (HITLNone HITLMode = "none"), by type name in declaration order.
func stringEnums(dir string) (map[string][]string, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	enums := map[string][]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				typ, ok := vs.Type.(*ast.Ident)
				if !ok {
					continue
				}
				for _, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, err := strconv.Unquote(lit.Value)
						if err != nil {
							return nil, err
						}
						enums[typ.Name] = append(enums[typ.Name], s)
					}
				}
			}
		}
	}
	return enums, nil
}

type fieldRow struct {
	name, jsonType, goType string
	omitted                bool
}

func (r *renderer) table(b *strings.Builder, t reflect.Type) error {
	rows, err := r.fields(t, "")
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		b.WriteString("No fields: the payload is `{}`.\n")
		return nil
	}
	b.WriteString("| Field | JSON type | Go type | Omitted when empty |\n| --- | --- | --- | --- |\n")
	for _, row := range rows {
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", row.name, row.jsonType, row.goType, yesNo(row.omitted))
	}
	return nil
}

// fields lists the JSON fields of struct t as encoding/json writes them,
// flattening embedded structs without a JSON name.
func (r *renderer) fields(t reflect.Type, via string) ([]fieldRow, error) {
	var rows []fieldRow
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				inner, err := r.fields(et, goType(et))
				if err != nil {
					return nil, err
				}
				rows = append(rows, inner...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omitted := omittedWhenEmpty(ft, opts)
		jt, err := r.jsonType(ft)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Name, err)
		}
		switch {
		case ft.Kind() == reflect.Pointer:
			jt = strings.TrimSuffix(jt, " or null")
			if omitted {
				jt += ", optional"
			} else {
				jt += " or null"
			}
		case !omitted && (ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map) && ft != rawMessageType:
			jt += " or null" // a nil slice or map encodes as null
		}
		if hasOpt(opts, "string") {
			jt = "string (quoted " + jt + ")"
		}
		gt := "`" + goType(ft) + "`"
		if via != "" {
			gt += " (embedded `" + via + "`)"
		}
		rows = append(rows, fieldRow{name: name, jsonType: jt, goType: gt, omitted: omitted})
	}
	return rows, nil
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// jsonType describes the JSON encoding of t.
func (r *renderer) jsonType(t reflect.Type) (string, error) {
	if s, ok := jsonTypeOverrides[t]; ok {
		return s, nil
	}
	if t.Kind() != reflect.Pointer && (t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType)) {
		return "", fmt.Errorf("%s has its own MarshalJSON; add its JSON shape to jsonTypeOverrides", t)
	}
	if t.Kind() != reflect.Pointer && (t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType)) {
		return "string", nil
	}
	switch t.Kind() {
	case reflect.String:
		// EventType and StreamID are documented in prose; listing every
		// event type in each field would only repeat the catalogue.
		if vals := r.enums[t.Name()]; t.PkgPath() == messagesPkg && len(vals) > 0 && t.Name() != "EventType" && t.Name() != "StreamID" {
			return "string: " + codeList(vals), nil
		}
		return "string", nil
	case reflect.Bool:
		return "boolean", nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer", nil
	case reflect.Float32, reflect.Float64:
		return "number", nil
	case reflect.Interface:
		return "any JSON", nil
	case reflect.Pointer:
		inner, err := r.jsonType(t.Elem())
		return inner + " or null", err
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return "string (base64)", nil
		}
		inner, err := r.jsonType(t.Elem())
		return "array of " + inner, err
	case reflect.Map:
		inner, err := r.jsonType(t.Elem())
		return "object of " + inner, err
	case reflect.Struct:
		if t.Name() == "" {
			return "", fmt.Errorf("anonymous struct types are not documented; name it")
		}
		if !r.seen[t] {
			r.seen[t] = true
			r.queue = append(r.queue, t)
		}
		return fmt.Sprintf("object ([%s](#%s))", t.Name(), strings.ToLower(t.Name())), nil
	default:
		return "", fmt.Errorf("no JSON type for %s", t)
	}
}

// omittedWhenEmpty reports whether encoding/json leaves the field out when
// it holds its zero or empty value.
func omittedWhenEmpty(t reflect.Type, opts string) bool {
	if hasOpt(opts, "omitzero") {
		return true
	}
	if !hasOpt(opts, "omitempty") {
		return false
	}
	switch t.Kind() {
	case reflect.Struct:
		return false // omitempty never omits a struct
	case reflect.Array:
		return t.Len() == 0
	default:
		return true
	}
}

func hasOpt(opts, want string) bool {
	return slices.Contains(strings.Split(opts, ","), want)
}

var messagesPkg = reflect.TypeFor[messages.Envelope]().PkgPath()

func codeList(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = "`" + v + "`"
	}
	return strings.Join(q, ", ")
}

// goType is t as written in package messages.
func goType(t reflect.Type) string { return strings.ReplaceAll(t.String(), "messages.", "") }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// cell escapes s for a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// sampleEnvelope returns an envelope of type typ carrying a zero payload.
func sampleEnvelope(t *testing.T, typ messages.EventType) *messages.Envelope {
	t.Helper()
	p, err := typ.NewPayload()
	if err != nil {
		t.Fatal(err)
	}
	node := messages.RunLane().Child(messages.NodeStream("n001"))
	return (&messages.Emit{RunID: "r1", AgentID: "n001", Lane: node, Payload: p}).
		Stamp(uuid.MustParse("0190a4a2-3c5e-7d6f-8a9b-0c1d2e3f4a5b"), 42,
			time.Date(2025, 1, 15, 10, 30, 0, 123456789, time.FixedZone("CET", 3600)), "s1")
}

var envelopeKeys = []string{"id", "seq", "type", "timestamp", "session_id", "run_id", "agent_id", "lane", "payload"}

func TestEnvelope_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, typ := range messages.EventTypes() {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			env := sampleEnvelope(t, typ)
			b, err := env.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(b) {
				t.Fatalf("MarshalJSON wrote invalid JSON: %s", b)
			}
			if got := topLevelKeys(t, b); !slices.Equal(got, envelopeKeys) {
				t.Errorf("keys %v, want %v", got, envelopeKeys)
			}
			var got messages.Envelope
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			if want := normalise(env); !reflect.DeepEqual(normalise(&got), want) {
				g := normalise(&got)
				t.Errorf("round trip:\n got  %#v %#v\n want %#v %#v", g, g.Payload, want, want.Payload)
			}
		})
	}
}

func topLevelKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", b)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// normalise returns a copy of env in the form decoding yields, so that
// equal events compare equal with reflect.DeepEqual: the timestamp in UTC,
// raw JSON compacted (JSON null meaning absent), empty lists nil, and the
// hitl default made explicit.
func normalise(env *messages.Envelope) *messages.Envelope {
	out := *env
	out.Timestamp = env.Timestamp.UTC()
	if env.Payload != nil {
		pv := reflect.New(reflect.TypeOf(env.Payload).Elem())
		pv.Elem().Set(reflect.ValueOf(env.Payload).Elem())
		normaliseValue(pv.Elem())
		out.Payload = pv.Interface().(messages.Payload)
	}
	return &out
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	hitlType       = reflect.TypeFor[messages.HITLMode]()
)

func normaliseValue(v reflect.Value) {
	switch {
	case v.Type() == rawMessageType:
		v.Set(reflect.ValueOf(canonicalJSON(v.Bytes())))
	case v.Type() == hitlType:
		if v.String() == "" {
			v.SetString(string(messages.HITLNone))
		}
	case v.Kind() == reflect.Pointer:
		if !v.IsNil() {
			c := reflect.New(v.Type().Elem())
			c.Elem().Set(v.Elem())
			normaliseValue(c.Elem())
			v.Set(c)
		}
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				normaliseValue(v.Field(i))
			}
		}
	case v.Kind() == reflect.Slice && v.Len() == 0:
		v.SetZero() // an omitted empty list decodes as nil
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() != reflect.Uint8:
		{
			c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
			reflect.Copy(c, v)
			for i := range c.Len() {
				normaliseValue(c.Index(i))
			}
			v.Set(c)
		}
	}
}

// canonicalJSON re-encodes raw so that equal JSON values have equal bytes;
// null and absent are both nil.
func canonicalJSON(raw []byte) json.RawMessage {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return slices.Clone(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return slices.Clone(raw)
	}
	return b
}

func TestEnvelope_UnknownType(t *testing.T) {
	t.Parallel()
	b, err := sampleEnvelope(t, messages.TextDelta).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"type":"text_delta"`), []byte(`"type":"text_delta_v2"`), 1)
	var env messages.Envelope
	err = json.Unmarshal(b, &env)
	var unknown *messages.UnknownEventTypeError
	if !errors.As(err, &unknown) {
		t.Fatalf("decode: got %v, want *messages.UnknownEventTypeError", err)
	}
	if unknown.Type != "text_delta_v2" {
		t.Errorf("Type = %q, want %q", unknown.Type, "text_delta_v2")
	}
}

func FuzzEnvelopeDecode(f *testing.F) {
	ts := time.Date(2025, 1, 15, 10, 30, 0, 5, time.UTC)
	lane := messages.RunLane().Child(messages.NodeStream("n001"))
	for _, p := range []messages.Payload{
		&messages.TextDeltaPayload{Delta: "héllo <b>\u2028"},
		&messages.RunStartedPayload{Question: "Why?", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 3, FailNodes: messages.NodeSelector{IDs: []string{"n001"}}, PanicNodes: messages.NodeSelector{Fraction: 0.5}}},
		&messages.PlanProposedPayload{Plan: messages.Plan{Nodes: []messages.PlanNode{{ID: "a", Deps: []string{"b"}}}}, Waves: [][]string{{"b"}, {"a"}}},
		&messages.ToolCallStartedPayload{CallID: "c1", Tool: "search", Args: json.RawMessage(`{"query": "x", "n": [1, 2.50]}`)},
		&messages.TokenUsagePayload{Model: "m", Turn: 1, Usage: messages.Usage{InputTokens: 3, OutputTokens: 4}},
		&messages.InterruptRaisedPayload{InterruptID: "i", Kind: messages.InterruptPlanApproval, Plan: &messages.Plan{}},
	} {
		env := (&messages.Emit{RunID: "r1", AgentID: "n001", Lane: lane, Payload: p}).Stamp(uuid.New(), 7, ts, "s1")
		b, err := env.MarshalJSON()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, junk := range []string{
		``, `null`, `{}`, `[]`, `{"type":"text_delta"}`, `{"type":"text_delta","payload":null}`,
		`{"type":"run_started","payload":{"hitl":"sometimes"}}`, `{"type":"nope","payload":{}}`,
		`{"seq":-1,"type":"warning","payload":{}}`, `{"timestamp":"yesterday","type":"warning","payload":{}}`,
		`{"id":"0190a4a2-3c5e-7d6f-8a9b-0c1d2e3f4a5b","seq":1,"type":"warning","timestamp":"2025-01-15T10:30:00+01:00","session_id":"s","run_id":"r","agent_id":"","lane":{"stream_id":"run","depth":0},"payload":{"code":"x","message":"y","extra":true},"extra":1}`,
	} {
		f.Add([]byte(junk))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var first messages.Envelope
		if err := json.Unmarshal(data, &first); err != nil {
			return
		}
		b, err := first.MarshalJSON()
		if err != nil {
			t.Fatalf("decoded envelope does not re-encode: %v\ninput: %q", err, data)
		}
		var second messages.Envelope
		if err := json.Unmarshal(b, &second); err != nil {
			t.Fatalf("re-encoded envelope does not decode: %v\ninput:     %q\nre-encoded: %s", err, data, b)
		}
		if a, z := normalise(&first), normalise(&second); !reflect.DeepEqual(a, z) {
			t.Fatalf("decode(encode(decode(x))) != decode(x)\ninput: %q\nfirst:  %#v %#v\nsecond: %#v %#v", data, a, a.Payload, z, z.Payload)
		}
		// After one round the bytes are a fixed point. (Not before it: a
		// missing "hitl" decodes as "" and re-encodes as "", which decodes
		// as "none"; normalise treats them as equal.)
		b2, err := second.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var third messages.Envelope
		if err := json.Unmarshal(b2, &third); err != nil {
			t.Fatal(err)
		}
		if b3, err := third.MarshalJSON(); err != nil || !bytes.Equal(b2, b3) {
			t.Fatalf("encoding is not stable: %v\n%s\n%s", err, b2, b3)
		}
	})
}
