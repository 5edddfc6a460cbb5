package messages_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/conclave-ai/conclave/messages"
)

const (
	schemaFile = "../docs/schema/events.schema.json"
	tsFile     = "../docs/schema/events.d.ts"
)

// TestSchemaFiles keeps docs/schema/ (the JSON Schema and the TypeScript
// types of every event) in step with the Go types; -update rewrites them.
func TestSchemaFiles(t *testing.T) {
	if !*update {
		t.Parallel()
	}
	s, err := messages.EventSchema()
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	ts, err := renderTypeScript()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		want []byte
	}{{schemaFile, append(js, '\n')}, {tsFile, []byte(ts)}} {
		got, err := os.ReadFile(f.path)
		if err == nil && bytes.Equal(got, f.want) {
			continue
		}
		if *update {
			if err := os.WriteFile(f.path, f.want, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote %s", f.path)
			continue
		}
		t.Errorf("%s is out of date (%v); run go test ./messages -run 'TestSchemaFiles|TestEventsDoc' -update", f.path, err)
	}
}

// TestEventSchema_Validates: a well-formed event of every type validates;
// a wrong field type, an unknown field, a missing envelope field or a
// payload of another type does not.
func TestEventSchema_Validates(t *testing.T) {
	t.Parallel()
	for _, typ := range messages.EventTypes() {
		p, _ := typ.NewPayload()
		b := envelopeJSON(t, p)
		if err := messages.ValidateEventJSON(b); err != nil {
			t.Errorf("%s (zero payload): %v\n%s", typ, err, b)
		}
	}
	good := envelopeJSON(t, &messages.TextDeltaPayload{Delta: "hi"})
	for name, bad := range map[string]string{
		"wrong field type": strings.Replace(string(good), `"delta":"hi"`, `"delta":42`, 1),
		"unknown field":    strings.Replace(string(good), `"delta":"hi"`, `"delta":"hi","extra":1`, 1),
		"no seq":           strings.Replace(string(good), `"seq":7,`, ``, 1),
		"seq 0":            strings.Replace(string(good), `"seq":7,`, `"seq":0,`, 1),
		"unknown type":     strings.Replace(string(good), `"type":"text_delta"`, `"type":"text_deltas"`, 1),
		"another payload":  strings.Replace(string(good), `"type":"text_delta"`, `"type":"node_started"`, 1),
		"bad lane":         strings.Replace(string(good), `"depth":0`, `"depth":"0"`, 1),
	} {
		if bad == string(good) {
			t.Fatalf("%s: the replacement did not apply to %s", name, good)
		}
		if err := messages.ValidateEventJSON([]byte(bad)); err == nil {
			t.Errorf("%s: validates, want an error:\n%s", name, bad)
		}
	}
}

func envelopeJSON(t *testing.T, p messages.Payload) []byte {
	t.Helper()
	env := &messages.Envelope{ID: uuid.New(), Seq: 7, Type: p.EventType(), Timestamp: time.Now(), SessionID: "s", RunID: "r",
		Lane: messages.RunLane(), Payload: p}
	b, err := env.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
