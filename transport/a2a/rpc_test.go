package a2a_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/transport/a2a"
)

// TestHandler_Errors: every refusal has its JSON-RPC code, with the
// request's id, the reason for A2A's codes, and the HTTP status of the
// reference server (200 for protocol errors).
func TestHandler_Errors(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, a2a.Config{})
	done := mustResult[a2a.SendMessageResponse](t, hs.call("SendMessage", map[string]any{"message": userText("q", nil)})).Task
	waiting := mustResult[a2a.SendMessageResponse](t, hs.call("SendMessage", map[string]any{"message": userText("q", map[string]any{"hitl": "plan"})})).Task
	working := mustResult[a2a.SendMessageResponse](t, hs.call("SendMessage", map[string]any{
		"message":       userText("q", map[string]any{"scenario": map[string]any{"tokens": 1000, "token_delay_ms": 10}}),
		"configuration": map[string]any{"returnImmediately": true}})).Task
	t.Cleanup(func() { hs.call("CancelTask", map[string]any{"id": working.ID}) })
	planID := interruptsOf(t, waiting.Status)[0].InterruptID

	text := func(s string) map[string]any { return map[string]any{"text": s} }
	send := func(msg map[string]any) []byte { return hs.body("SendMessage", map[string]any{"message": msg}) }
	rows := []struct {
		name   string
		body   []byte
		hdr    map[string]string
		status int
		code   a2a.ErrorCode
		reason string // ErrorInfo reason, when A2A defines one
		msg    string // substring of the message
	}{
		{"not JSON", []byte(`{"jsonrpc":`), nil, 200, a2a.CodeParseError, "", "not valid JSON"},
		{"body too large", append([]byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"x":"`), bytes.Repeat([]byte("a"), 1<<20)...), nil, 200, a2a.CodeInvalidRequest, "", "larger than"},
		{"batch", []byte(`[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]`), nil, 200, a2a.CodeInvalidRequest, "", "batches"},
		{"no jsonrpc", []byte(`{"id":1,"method":"GetTask","params":{}}`), nil, 200, a2a.CodeInvalidRequest, "", `"jsonrpc"`},
		{"bad id", []byte(`{"jsonrpc":"2.0","id":{},"method":"GetTask","params":{}}`), nil, 200, a2a.CodeInvalidRequest, "", `"id"`},
		{"method not a string", []byte(`{"jsonrpc":"2.0","id":1,"method":7}`), nil, 200, a2a.CodeInvalidRequest, "", "method"},
		{"no method", []byte(`{"jsonrpc":"2.0","id":1}`), nil, 200, a2a.CodeInvalidRequest, "", `"method"`},
		{"content type", hs.body("ListTasks", map[string]any{}), map[string]string{"Content-Type": "text/plain"}, 200, a2a.CodeContentTypeNotSupported, "CONTENT_TYPE_NOT_SUPPORTED", "Content-Type"},
		{"no version", hs.body("ListTasks", map[string]any{}), map[string]string{"A2A-Version": ""}, 200, a2a.CodeVersionNotSupported, "VERSION_NOT_SUPPORTED", "0.3"},
		{"version 0.3", hs.body("ListTasks", map[string]any{}), map[string]string{"A2A-Version": "0.3"}, 200, a2a.CodeVersionNotSupported, "VERSION_NOT_SUPPORTED", "0.3"},
		{"version 2.0", hs.body("ListTasks", map[string]any{}), map[string]string{"A2A-Version": "2.0"}, 200, a2a.CodeVersionNotSupported, "VERSION_NOT_SUPPORTED", "2.0"},
		{"v0.3 method", hs.body("message/send", map[string]any{}), nil, 200, a2a.CodeMethodNotFound, "", "message/send"},
		{"unknown method", hs.body("Nope", map[string]any{}), nil, 200, a2a.CodeMethodNotFound, "", "Nope"},
		{"params missing", []byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask"}`), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "object"},
		{"params an array", hs.body("GetTask", []any{}), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "object"},
		{"param type", hs.body("GetTask", map[string]any{"id": 7}), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "id"},
		{"GetTask unknown", hs.body("GetTask", map[string]any{"id": "nope"}), nil, 200, a2a.CodeTaskNotFound, "TASK_NOT_FOUND", "nope"},
		{"GetTask bad id", hs.body("GetTask", map[string]any{"id": "../x"}), nil, 200, a2a.CodeTaskNotFound, "TASK_NOT_FOUND", ""},
		{"CancelTask unknown", hs.body("CancelTask", map[string]any{"id": "nope"}), nil, 200, a2a.CodeTaskNotFound, "TASK_NOT_FOUND", ""},
		{"CancelTask terminal", hs.body("CancelTask", map[string]any{"id": done.ID}), nil, 200, a2a.CodeTaskNotCancelable, "TASK_NOT_CANCELABLE", "COMPLETED"},
		{"SubscribeToTask terminal", hs.body("SubscribeToTask", map[string]any{"id": done.ID}), nil, 200, a2a.CodeUnsupportedOperation, "UNSUPPORTED_OPERATION", "terminal"},
		{"SubscribeToTask unknown", hs.body("SubscribeToTask", map[string]any{"id": "nope"}), nil, 200, a2a.CodeTaskNotFound, "TASK_NOT_FOUND", ""},
		{"push config", hs.body("CreateTaskPushNotificationConfig", map[string]any{}), nil, 200, a2a.CodePushNotificationNotSupported, "PUSH_NOTIFICATION_NOT_SUPPORTED", ""},
		{"push in configuration", hs.body("SendMessage", map[string]any{"message": userText("q", nil),
			"configuration": map[string]any{"taskPushNotificationConfig": map[string]any{"url": "http://x"}}}), nil, 200, a2a.CodePushNotificationNotSupported, "PUSH_NOTIFICATION_NOT_SUPPORTED", ""},
		{"extended card", hs.body("GetExtendedAgentCard", map[string]any{}), nil, 200, a2a.CodeExtendedCardNotConfigured, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", ""},
		{"no message", hs.body("SendMessage", map[string]any{}), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "message is required"},
		{"no messageId", send(map[string]any{"role": "ROLE_USER", "parts": []any{text("q")}}), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "messageId"},
		{"agent role", send(map[string]any{"messageId": "m", "role": "ROLE_AGENT", "parts": []any{text("q")}}), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "ROLE_USER"},
		{"no parts", send(map[string]any{"messageId": "m", "role": "ROLE_USER", "parts": []any{}}), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "parts"},
		{"two kinds in a part", send(map[string]any{"messageId": "m", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "q", "url": "u"}}}), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "exactly one"},
		{"a file without a question", send(map[string]any{"messageId": "m", "role": "ROLE_USER", "parts": []any{map[string]any{"url": "http://x"}}}), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "the text parts are empty"},
		{"file url not allowed", send(map[string]any{"messageId": "m", "role": "ROLE_USER", "parts": []any{text("q"), map[string]any{"url": "https://files.example/a.txt", "filename": "a.txt"}}}), nil, 422, a2a.CodeInvalidParams, "INVALID_PARAMS", "file_url_not_allowed"},
		{"raw not base64", send(map[string]any{"messageId": "m", "role": "ROLE_USER", "parts": []any{text("q"), map[string]any{"raw": "%%%", "filename": "a.txt"}}}), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "parts[1].raw"},
		{"raw of a type not taken", send(map[string]any{"messageId": "m", "role": "ROLE_USER", "parts": []any{text("q"), map[string]any{"raw": "UEsDBA==", "filename": "a.zip", "mediaType": "application/zip"}}}), nil, 422, a2a.CodeInvalidParams, "INVALID_PARAMS", "file_unsupported_type"},
		{"empty question", send(map[string]any{"messageId": "m", "role": "ROLE_USER", "parts": []any{text("  ")}}), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "empty"},
		{"bad contextId", send(map[string]any{"messageId": "m", "role": "ROLE_USER", "contextId": "a b", "parts": []any{text("q")}}), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "contextId"},
		{"bad hitl", send(userText("q", map[string]any{"hitl": "always"})), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "hitl"},
		{"unknown scenario field", send(userText("q", map[string]any{"scenario": map[string]any{"colour": 1}})), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "colour"},
		{"invalid scenario", send(userText("q", map[string]any{"scenario": map[string]any{"nodes": -1}})), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "nodes"},
		{"answer unknown task", send(answer("nope", "", text("approve"))), nil, 200, a2a.CodeTaskNotFound, "TASK_NOT_FOUND", ""},
		{"answer context mismatch", send(answer(waiting.ID, done.ContextID, text("approve"))), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "contextId"},
		{"answer terminal task", send(answer(done.ID, done.ContextID, text("approve"))), nil, 200, a2a.CodeUnsupportedOperation, "UNSUPPORTED_OPERATION", "terminal"},
		{"answer working task", send(answer(working.ID, working.ContextID, text("approve"))), nil, 200, a2a.CodeUnsupportedOperation, "UNSUPPORTED_OPERATION", "not waiting for input"},
		{"answer not a decision", send(answer(waiting.ID, "", text("sure"))), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", `"approve" or "reject"`},
		{"answer unknown interrupt", send(answer(waiting.ID, "", map[string]any{"data": map[string]any{"interruptId": "x", "decision": "approve"}})), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "not open"},
		{"answer unknown field", send(answer(waiting.ID, "", map[string]any{"data": map[string]any{"interruptId": planID, "decision": "approve", "why": 1}})), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "why"},
		{"answer bad decision", send(answer(waiting.ID, "", map[string]any{"data": map[string]any{"decision": "maybe"}})), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "maybe"},
		{"answer revise without plan", send(answer(waiting.ID, "", map[string]any{"data": map[string]any{"decision": "revise"}})), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "plan"},
		{"answer twice", send(answer(waiting.ID, "", map[string]any{"data": map[string]any{"interruptId": planID, "decision": "approve"}},
			map[string]any{"data": map[string]any{"interruptId": planID, "decision": "reject"}})), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "twice"},
		{"answer a file", send(answer(waiting.ID, "", map[string]any{"url": "http://x"})), nil, 200, a2a.CodeContentTypeNotSupported, "CONTENT_TYPE_NOT_SUPPORTED", ""},
		{"ListTasks pageSize", hs.body("ListTasks", map[string]any{"pageSize": 0}), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "pageSize"},
		{"ListTasks status", hs.body("ListTasks", map[string]any{"status": "UNRECOGNIZED"}), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "status"},
		{"ListTasks pageToken", hs.body("ListTasks", map[string]any{"pageToken": "nope"}), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "pageToken"},
		{"ListTasks timestamp", hs.body("ListTasks", map[string]any{"statusTimestampAfter": "yesterday"}), nil, 200, a2a.CodeInvalidParams, "INVALID_PARAMS", "statusTimestampAfter"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := hs.raw(row.body, row.hdr)
			if r.Error == nil {
				t.Fatalf("no error: %s", r.Result)
			}
			if r.Status != row.status || r.Error.Code != row.code || r.JSONRPC != "2.0" {
				t.Fatalf("HTTP %d, code %d (%s), want HTTP %d, code %d", r.Status, r.Error.Code, r.Error.Message, row.status, row.code)
			}
			if !strings.Contains(r.Error.Message, row.msg) {
				t.Fatalf("message %q does not mention %q", r.Error.Message, row.msg)
			}
			reason := ""
			if len(r.Error.Data) == 1 {
				reason = r.Error.Data[0].Reason
				if r.Error.Data[0].Domain != "a2a-protocol.org" || r.Error.Data[0].Type != "type.googleapis.com/google.rpc.ErrorInfo" {
					t.Fatalf("error info %+v", r.Error.Data[0])
				}
			}
			if reason != row.reason {
				t.Fatalf("reason %q, want %q", reason, row.reason)
			}
			var req struct {
				ID json.RawMessage `json:"id"`
			}
			// Like the reference server, a refused Content-Type is answered before the body is read: id null.
			if row.code != a2a.CodeContentTypeNotSupported || row.hdr == nil {
				if json.Unmarshal(row.body, &req) == nil && string(req.ID) != "{}" && string(req.ID) != "" && string(r.ID) != string(req.ID) {
					t.Fatalf("id %s, want %s", r.ID, req.ID)
				}
			}
		})
	}
	// The plan interrupt is still open after every refused answer.
	if task := mustResult[a2a.Task](t, hs.call("GetTask", map[string]any{"id": waiting.ID})); task.Status.State != a2a.StateInputRequired {
		t.Fatalf("the waiting task is %s", task.Status.State)
	}

	resp, err := hs.client.Get(hs.srv.URL + a2a.RPCPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("GET %s: %d", a2a.RPCPath, resp.StatusCode)
	}
}
