package conclave_test

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave"
	"github.com/conclave-ai/conclave/messages"
)

var update = flag.Bool("update", false, "rewrite wire.go (the re-exports of package messages)")

// wireFile is the generated file of re-exports.
const wireFile = "wire.go"

// wireRoots are the wire types, besides every event's payload, whose
// types the root package re-exports with everything they reach.
var wireRoots = []any{
	messages.Envelope{}, messages.StartRun{}, messages.RunCreated{}, messages.RunList{}, messages.ErrorBody{},
	messages.RunSummary{}, messages.Interrupt{}, messages.Resume{}, messages.SteerNote{},
}

// TestWire_ReExported keeps wire.go in step with package messages: every
// event type constant, every payload type and every type a payload or
// another wire type (wireRoots) reaches, and the constants of those types,
// re-exported under their names in messages. A new event, payload field
// type or constant in messages fails it until wire.go is regenerated:
// go test . -run TestWire_ReExported -update.
func TestWire_ReExported(t *testing.T) {
	gen, err := renderWire()
	if err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(wireFile)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if bytes.Equal(cur, gen) {
		return
	}
	if *update {
		if err := os.WriteFile(wireFile, gen, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s is out of date with package messages; run go test . -run TestWire_ReExported -update", wireFile)
}

// TestWire_EveryEventType checks, apart from the generator, that each
// event type of messages' catalogue has a constant of the same name in the
// root package, and that the compiled re-exports are messages' own (the
// constants and types added for issue 34 among them).
func TestWire_EveryEventType(t *testing.T) {
	t.Parallel()
	names, err := eventTypeNames()
	if err != nil {
		t.Fatal(err)
	}
	declared, err := rootDecls(true)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range messages.EventTypes() {
		name, ok := names[typ]
		if !ok {
			t.Errorf("event type %q has no constant in messages/types.go", typ)
			continue
		}
		if !declared[name] {
			t.Errorf("event type %q: the root package declares no %s", typ, name)
		}
	}
	// The compiled values: a sample of each kind of re-export, including the
	// ones added for issue 34 (not among the first eight).
	if conclave.DebateRoundRestarted != messages.DebateRoundRestarted || conclave.ApprovalSignatureAdded != messages.ApprovalSignatureAdded {
		t.Error("re-exported constants differ from messages'")
	}
	var _ *conclave.DebateRoundRestartedPayload = new(messages.DebateRoundRestartedPayload)
	var _ *conclave.DebateScenario = new(messages.DebateScenario)
	var _ *conclave.RunCreated = new(messages.RunCreated)
}

// eventTypeNames maps each event type to the name of its constant in
// messages/types.go.
func eventTypeNames() (map[messages.EventType]string, error) {
	consts, err := messagesConsts()
	if err != nil {
		return nil, err
	}
	out := map[messages.EventType]string{}
	for _, c := range consts {
		if c.typ == "EventType" {
			out[messages.EventType(c.value)] = c.name
		}
	}
	return out, nil
}

type messagesConst struct {
	name, typ, value string // value: the literal, unquoted when a string
	file             string
	pos              token.Pos
}

// messagesConsts lists the exported constants of package messages with
// their types (declared or carried down a const group), in source order.
func messagesConsts() ([]messagesConst, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("messages/*.go")
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []messagesConst
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			typ := ""
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				switch {
				case vs.Type != nil:
					typ = ""
					if id, ok := vs.Type.(*ast.Ident); ok {
						typ = id.Name
					}
				case len(vs.Values) > 0:
					typ = "" // an untyped constant, or an expression of its own
				}
				for i, n := range vs.Names {
					if !n.IsExported() || typ == "" {
						continue
					}
					v := ""
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
							v = strings.Trim(lit.Value, "\"`")
						}
					}
					out = append(out, messagesConst{name: n.Name, typ: typ, value: v, file: f, pos: n.Pos()})
				}
			}
		}
	}
	return out, nil
}

// rootDecls lists the top-level names the root package declares, in its
// hand-written files, or with generated, in wire.go too.
func rootDecls(generated bool) (map[string]bool, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || (f == wireFile && !generated) {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					out[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						out[s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							out[n.Name] = true
						}
					}
				}
			}
		}
	}
	return out, nil
}

// rootMessagesAliases lists the type aliases X = messages.X of the root
// package's hand-written files.
func rootMessagesAliases() (map[string]bool, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == wireFile {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || !ts.Assign.IsValid() {
				return true
			}
			if sel, ok := ts.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == ts.Name.Name {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "messages" {
					out[ts.Name.Name] = true
				}
			}
			return true
		})
	}
	return out, nil
}

// wireTypes collects the named types of package messages that t reaches
// through exported fields, element types and map keys.
func wireTypes(t reflect.Type, seen map[string]reflect.Type) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() == reflect.Map {
		wireTypes(t.Key(), seen)
		wireTypes(t.Elem(), seen)
		return
	}
	if t.PkgPath() != reflect.TypeFor[messages.Envelope]().PkgPath() || t.Name() == "" {
		return
	}
	if _, ok := seen[t.Name()]; ok {
		return
	}
	seen[t.Name()] = t
	if t.Kind() != reflect.Struct {
		return
	}
	for f := range t.Fields() {
		if f.IsExported() {
			wireTypes(f.Type, seen)
		}
	}
}

// renderWire is wire.go as it should be.
func renderWire() ([]byte, error) {
	names, err := eventTypeNames()
	if err != nil {
		return nil, err
	}
	handwritten, err := rootDecls(false)
	if err != nil {
		return nil, err
	}
	types := map[string]reflect.Type{}
	var payloads []string
	for _, typ := range messages.EventTypes() {
		p, err := typ.NewPayload()
		if err != nil {
			return nil, err
		}
		pt := reflect.TypeOf(p).Elem()
		payloads = append(payloads, pt.Name())
		wireTypes(pt, types)
	}
	for _, r := range wireRoots {
		wireTypes(reflect.TypeOf(r), types)
	}
	// A hand-written declaration of the same name wins, if it is an alias
	// of the same type (types.go, with a doc comment of its own).
	aliases, err := rootMessagesAliases()
	if err != nil {
		return nil, err
	}
	var others []string
	for name := range types {
		switch {
		case handwritten[name] && !aliases[name]:
			return nil, fmt.Errorf("the root package declares %s, which is not messages.%s: rename one", name, name)
		case !handwritten[name] && !slices.Contains(payloads, name):
			others = append(others, name)
		}
	}
	sort.Strings(others)

	var b bytes.Buffer
	b.WriteString("// Code generated by go test . -run TestWire_ReExported -update; DO NOT EDIT.\n\n")
	b.WriteString("package conclave\n\n")
	b.WriteString("import \"github.com/conclave-ai/conclave/messages\"\n\n")
	b.WriteString("// Event types: every one of docs/events.md, in its order, so a program\n")
	b.WriteString("// reads the stream without importing package messages.\n")
	b.WriteString("const (\n")
	for _, typ := range messages.EventTypes() {
		name, ok := names[typ]
		if !ok {
			return nil, fmt.Errorf("event type %q has no constant in messages", typ)
		}
		if handwritten[name] {
			return nil, fmt.Errorf("event type constant %s is declared by hand in the root package: leave it to %s", name, wireFile)
		}
		fmt.Fprintf(&b, "\t// %s: %s\n\t%s = messages.%s\n", typ, firstSentence(typ.Doc()), name, name)
	}
	b.WriteString(")\n\n")
	b.WriteString("// Payloads: Envelope.Payload is a pointer to the one of its event type\n")
	b.WriteString("// (docs/events.md).\n")
	b.WriteString("type (\n")
	for i, typ := range messages.EventTypes() {
		name := payloads[i]
		if handwritten[name] {
			return nil, fmt.Errorf("payload %s is declared by hand in the root package: leave it to %s", name, wireFile)
		}
		fmt.Fprintf(&b, "\t// %s is the payload of %s.\n\t%s = messages.%s\n", name, typ, name, name)
	}
	b.WriteString(")\n\n")
	b.WriteString("// The types payloads, RunRequest, RunCreated, RunSummary, Interrupt and\n")
	b.WriteString("// the other wire types are made of.\n")
	b.WriteString("type (\n")
	for _, name := range others {
		fmt.Fprintf(&b, "\t%s = messages.%s\n", name, name)
	}
	b.WriteString(")\n\n")

	consts, err := messagesConsts()
	if err != nil {
		return nil, err
	}
	exported := func(typ string) bool {
		_, ok := types[typ]
		return ok && typ != "EventType"
	}
	b.WriteString("// The values of those types that messages names.\n")
	b.WriteString("const (\n")
	for _, c := range consts {
		if !exported(c.typ) || handwritten[c.name] {
			continue
		}
		fmt.Fprintf(&b, "\t%s = messages.%s\n", c.name, c.name)
	}
	b.WriteString(")\n")
	return format.Source(b.Bytes())
}

// firstSentence is s up to its first ". ", for a one-line comment.
func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}
