package messages_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/conclave-ai/conclave/messages"
)

func TestNewRequestReceived(t *testing.T) {
	t.Parallel()
	short := messages.NewRequestReceived("acme", "Why is the sky blue?")
	if short.Message != "Why is the sky blue?" || short.Truncated || short.Tenant != "acme" {
		t.Fatalf("short question: %+v", short)
	}
	exact := strings.Repeat("é", messages.MaxRequestMessageRunes)
	if p := messages.NewRequestReceived("", exact); p.Message != exact || p.Truncated {
		t.Fatalf("a question of exactly the bound was cut: %+v", p)
	}
	long := strings.Repeat("日", messages.MaxRequestMessageRunes) + "tail"
	p := messages.NewRequestReceived("", long)
	if want := strings.Repeat("日", messages.MaxRequestMessageRunes) + "…"; p.Message != want || !p.Truncated {
		t.Fatalf("long question: %q (truncated %v), want %q", p.Message, p.Truncated, want)
	}
}

func TestNewToolCallProgress(t *testing.T) {
	t.Parallel()
	p := messages.NewToolCallProgress("c1", "crawl", 40, 100, "page 40")
	if *p != (messages.ToolCallProgressPayload{CallID: "c1", Tool: "crawl", Progress: 40, Total: 100, Message: "page 40"}) {
		t.Fatalf("%+v", p)
	}
	if p := messages.NewToolCallProgress("c1", "crawl", 1, -5, ""); p.Total != 0 {
		t.Fatalf("negative total kept: %+v", p)
	}
	// A long message is cut to the bound on a character boundary.
	msg := "x" + strings.Repeat("€", messages.MaxProgressMessageBytes) // 3 bytes each
	p = messages.NewToolCallProgress("c1", "crawl", 1, 0, msg)
	if len(p.Message) > messages.MaxProgressMessageBytes || !utf8.ValidString(p.Message) || !strings.HasPrefix(msg, p.Message) || len(p.Message) < messages.MaxProgressMessageBytes-3 {
		t.Fatalf("message of %d bytes (valid %v)", len(p.Message), utf8.ValidString(p.Message))
	}
	if p := messages.NewToolCallProgress("c1", "crawl", 1, 0, "bad \xff byte"); !utf8.ValidString(p.Message) {
		t.Fatalf("invalid UTF-8 kept: %q", p.Message)
	}
}
