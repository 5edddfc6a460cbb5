package agui_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport/agui"
)

// TestHandler_MediaParts: the question's user message's media parts
// (AG-UI 1.0 image and document parts, bytes inline in a data source) are
// the run's files, recorded with their bytes in run_started; a provider's
// file handle (source file) and a url the server does not allow are
// refused before the run starts.
func TestHandler_MediaParts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, agui.Config{})
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	pdf := []byte("%PDF-1.7\n")
	withParts := func(run string, parts ...any) map[string]any {
		in := input("tf", run, "", nil)
		in["messages"] = []any{map[string]any{"id": "u-" + run, "role": "user", "content": append([]any{map[string]any{"type": "text", "text": "what is in these?"}}, parts...)}}
		return in
	}
	image := map[string]any{"type": "image", "source": map[string]any{"type": "data", "value": base64.StdEncoding.EncodeToString(png), "mimeType": "image/png"},
		"metadata": map[string]any{"filename": "chart.png"}}
	doc := map[string]any{"type": "document", "id": "doc-1", "source": map[string]any{"type": "data", "value": base64.StdEncoding.EncodeToString(pdf), "mimeType": "application/pdf"}}
	run := h.do(withParts("r1", image, doc), newVerifier("tf"))
	id := run.conclaveRunID()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	sum, err := h.engine.Run(messages.LocalTenant, id)
	if err != nil {
		t.Fatal(err)
	}
	events, err := testkit.Follow(ctx, h.engine, actors.RunRef{RunID: id, SessionID: sum.SessionID}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var st *messages.RunStartedPayload
	for _, env := range events {
		if p, ok := env.Payload.(*messages.RunStartedPayload); ok && env.RunID == id {
			st = p
		}
	}
	if st == nil || st.Question != "what is in these?" || len(st.Files) != 2 {
		t.Fatalf("run_started %+v", st)
	}
	if f := st.Files[0]; f.Name != "chart.png" || f.MediaType != "image/png" || !bytes.Equal(f.Data, png) {
		t.Errorf("image %+v", f)
	}
	if f := st.Files[1]; f.Name != "doc-1" || f.MediaType != "application/pdf" || !bytes.Equal(f.Data, pdf) {
		t.Errorf("document %+v", f)
	}

	// The draft's "binary" part (before 1.0's media parts) maps the same way.
	binary := map[string]any{"type": "binary", "mimeType": "text/markdown", "data": base64.StdEncoding.EncodeToString([]byte("# Notes")), "filename": "notes.md"}
	run = h.do(withParts("r4", binary), newVerifier("tf"))
	sum, err = h.engine.Run(messages.LocalTenant, run.conclaveRunID())
	if err != nil {
		t.Fatal(err)
	}
	events, err = testkit.Follow(ctx, h.engine, actors.RunRef{RunID: run.conclaveRunID(), SessionID: sum.SessionID}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range events {
		if p, ok := env.Payload.(*messages.RunStartedPayload); ok && env.RunID == run.conclaveRunID() {
			if len(p.Files) != 1 || p.Files[0].Name != "notes.md" || string(p.Files[0].Data) != "# Notes" {
				t.Errorf("binary part: files %+v", p.Files)
			}
		}
	}

	handle := map[string]any{"type": "document", "source": map[string]any{"type": "file", "value": "file-abc", "provider": "openai"}}
	b, _ := json.Marshal(withParts("r2", handle))
	h.errorBody(b, "application/json", http.StatusUnprocessableEntity, "file_invalid")
	byURL := map[string]any{"type": "image", "source": map[string]any{"type": "url", "value": "https://files.example/a.png"}}
	b, _ = json.Marshal(withParts("r3", byURL))
	h.errorBody(b, "application/json", http.StatusUnprocessableEntity, "file_url_not_allowed")
	idOnly := map[string]any{"type": "binary", "mimeType": "image/png", "id": "upload-1"}
	b, _ = json.Marshal(withParts("r5", idOnly))
	h.errorBody(b, "application/json", http.StatusUnprocessableEntity, "file_invalid")
}
