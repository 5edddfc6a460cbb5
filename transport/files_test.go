package transport_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/transport"
)

// TestAPI_RunFiles: POST /runs takes files inline (base64), recorded in
// run_started; files it refuses are answered 413 (a size) or 422, each
// with its own code.
func TestAPI_RunFiles(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	rc := h.startRun(`{"question":"q","files":[{"name":"notes.md","data":"` + base64.StdEncoding.EncodeToString([]byte("# Notes")) + `"}]}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, r := h.sse(ctx, "session_id="+string(rc.SessionID))
	defer resp.Body.Close()
	events := readUntil(t, r, terminalOf(rc.RunID))
	st, ok := events[0].Payload.(*messages.RunStartedPayload)
	if !ok || len(st.Files) != 1 || st.Files[0].Name != "notes.md" || st.Files[0].MediaType != "text/markdown" || !bytes.Equal(st.Files[0].Data, []byte("# Notes")) {
		t.Fatalf("run_started %+v", events[0].Payload)
	}

	file := func(name string, data []byte) string {
		return `{"name":"` + name + `","data":"` + base64.StdEncoding.EncodeToString(data) + `"}`
	}
	half := bytes.Repeat([]byte("a"), 360<<10) // three of them, in base64, are over the 1 MiB body
	for _, c := range []struct {
		name   string
		files  string
		status int
		code   string
	}{
		{"file too large", file("a.txt", bytes.Repeat([]byte("a"), messages.MaxFileBytes+1)), 413, "file_too_large"},
		{"unsupported type", file("a.zip", []byte("PK\x03\x04")), 422, "file_unsupported_type"},
		{"not utf-8", file("a.txt", []byte{0xff}), 422, "file_invalid"},
		{"url not allowed", `{"name":"a.txt","url":"https://files.example/a.txt"}`, 422, "file_url_not_allowed"},
		{"both", `{"name":"a.txt","url":"https://files.example/a.txt","data":"eA=="}`, 422, "file_invalid"},
		{"not base64", `{"name":"a.txt","data":"%%%"}`, 400, "invalid_json"},
		{"over the body", file("a.txt", half) + "," + file("b.txt", half) + "," + file("c.txt", half), 413, "body_too_large"},
	} {
		resp, body := h.do("POST", "/api/v1/runs", `{"question":"q","files":[`+c.files+`]}`)
		var eb messages.ErrorBody
		if resp.StatusCode != c.status || json.Unmarshal(body, &eb) != nil || eb.Error.Code != c.code {
			t.Errorf("%s: %d %s, want %d with code %s", c.name, resp.StatusCode, truncate(body), c.status, c.code)
		}
		if c.status != http.StatusBadRequest && !strings.Contains(eb.Error.Message, "files") && c.code != "body_too_large" {
			t.Errorf("%s: message %q does not name the file", c.name, eb.Error.Message)
		}
	}
}
