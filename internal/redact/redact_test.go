package redact_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/internal/redact"
)

func TestRedactor(t *testing.T) {
	t.Parallel()
	r := redact.New("sk-proj-0123456789", "short", "", `tok"en\with-escapes`, "sk-proj-0123456789-longer")
	for in, want := range map[string]string{
		"key sk-proj-0123456789 here":                 "key [REDACTED] here",
		"sk-proj-0123456789-longer":                   "[REDACTED]",
		"short stays":                                 "short stays",
		`{"t":"tok\"en\\with-escapes"}`:               `{"t":"[REDACTED]"}`,
		`raw tok"en\with-escapes`:                     "raw [REDACTED]",
		"nothing to see":                              "nothing to see",
		"twice sk-proj-0123456789 sk-proj-0123456789": "twice [REDACTED] [REDACTED]",
	} {
		if got := r.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
		got, changed := r.Bytes([]byte(in))
		if string(got) != want || changed != (want != in) {
			t.Errorf("Bytes(%q) = %q %v", in, got, changed)
		}
	}
	var none *redact.Redactor
	if none.String("sk-proj-0123456789") != "sk-proj-0123456789" || redact.New("short", "") != nil {
		t.Error("a nil Redactor changed something, or New kept only short values")
	}
}

func TestRedactor_Handler(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	r := redact.New("sk-proj-0123456789")
	log := slog.New(r.Handler(slog.NewJSONHandler(&buf, nil))).With("key", "sk-proj-0123456789")
	log.Info("calling with sk-proj-0123456789", "err", errors.New("401: bad key sk-proj-0123456789"),
		slog.Group("req", "auth", "Bearer sk-proj-0123456789"), "n", 3)
	if out := buf.String(); strings.Contains(out, "0123456789") || strings.Count(out, redact.Mask) != 4 || !strings.Contains(out, `"n":3`) {
		t.Fatalf("log line %s", out)
	}
}

// BenchmarkRedactor_Bytes is the hub's cost per event with secrets set
// and none present (the common case): one search per secret form.
func BenchmarkRedactor_Bytes(b *testing.B) {
	r := redact.New("sk-proj-0123456789abcdef", "local:tok-0123456789abcdef", "tool-secret-0123456789")
	ev := []byte(`{"id":"0190a4a2-3c5e-7d6f-8a9b-0c1d2e3f4a5b","seq":42,"type":"text_delta","timestamp":"2025-01-15T09:30:00.123456789Z","session_id":"s-7f3a","run_id":"r-01","agent_id":"n002","lane":{"stream_id":"node:n002","depth":1,"parent_stream_id":"run"},"payload":{"delta":" scattering of shorter wavelengths by the molecules of the air, which is why the sky looks blue"}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(ev)))
	for b.Loop() {
		if _, masked := r.Bytes(ev); masked {
			b.Fatal("masked")
		}
	}
}
