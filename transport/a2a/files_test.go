package a2a_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport/a2a"
)

// TestHandler_FileParts: a new task's file parts (A2A FileParts: raw
// bytes with filename and mediaType) are the run's files, recorded with
// their bytes in run_started; the text parts are still the question.
func TestHandler_FileParts(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, a2a.Config{})
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	msg := map[string]any{"messageId": "m-files", "role": "ROLE_USER", "parts": []any{
		map[string]any{"text": "what is in these?"},
		map[string]any{"raw": base64.StdEncoding.EncodeToString([]byte("# Notes")), "filename": "notes.md"},
		map[string]any{"raw": base64.StdEncoding.EncodeToString(png), "filename": "chart", "mediaType": "image/png"},
	}}
	task := mustResult[a2a.SendMessageResponse](t, hs.call("SendMessage", map[string]any{"message": msg})).Task
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	events, err := testkit.Follow(ctx, hs.engine, actors.RunRef{RunID: messages.RunID(task.ID), SessionID: messages.SessionID(task.ContextID)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	st := events[0].Payload.(*messages.RunStartedPayload)
	if st.Question != "what is in these?" || len(st.Files) != 2 {
		t.Fatalf("run_started %+v", st)
	}
	if f := st.Files[0]; f.Name != "notes.md" || f.MediaType != "text/markdown" || !bytes.Equal(f.Data, []byte("# Notes")) {
		t.Errorf("file 0 %+v", f)
	}
	if f := st.Files[1]; f.Name != "chart" || f.MediaType != "image/png" || !bytes.Equal(f.Data, png) {
		t.Errorf("file 1 %+v", f)
	}
}
