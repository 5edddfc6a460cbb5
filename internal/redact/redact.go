// Package redact removes known secret values (the model's API key, the
// server's bearer tokens, the variables passed to tool servers) from what
// Conclave records and shows: events before they are journaled, tool
// results before a model reads them, and log records. A tool server, a
// model or a log line that repeats a secret then shows Mask instead.
//
// It matches whole values, raw and JSON-escaped. It cannot see a secret
// cut into pieces across separate events (a model that streams it in two
// deltas): its job is the honest mistake (a tool echoing its environment,
// an error quoting a header), not an adversary who already holds the
// secret.
package redact

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
)

// Mask replaces a secret.
const Mask = "[REDACTED]"

// MinLen is the shortest value taken as a secret: shorter ones would
// match ordinary text (every token and API key is longer).
const MinLen = 8

// Redactor knows the secret values. A nil *Redactor redacts nothing. It
// is immutable, safe for concurrent use.
type Redactor struct {
	secrets []string // raw values and their JSON-escaped forms, longest first
}

// New returns a Redactor of values (empty and short ones, under MinLen,
// are left out); nil when none is left.
func New(values ...string) *Redactor {
	var s []string
	for _, v := range values {
		if len(v) < MinLen {
			continue
		}
		s = append(s, v)
		if b, err := json.Marshal(v); err == nil {
			if esc := string(b[1 : len(b)-1]); esc != v {
				s = append(s, esc)
			}
		}
	}
	if len(s) == 0 {
		return nil
	}
	// Longest first: a secret containing another is masked whole.
	slices.SortFunc(s, func(a, b string) int { return len(b) - len(a) })
	return &Redactor{secrets: slices.Compact(s)}
}

// String is s with every secret masked.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	for _, v := range r.secrets {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Mask)
		}
	}
	return s
}

// Bytes is b with every secret masked, and whether anything was; b is
// returned as it is when nothing was (the common case costs one search
// per secret and no allocation).
func (r *Redactor) Bytes(b []byte) ([]byte, bool) {
	if r == nil {
		return b, false
	}
	changed := false
	for _, v := range r.secrets {
		if bytes.Contains(b, []byte(v)) {
			b = bytes.ReplaceAll(b, []byte(v), []byte(Mask))
			changed = true
		}
	}
	return b, changed
}

// Handler wraps h so that secrets are masked in log messages and in
// every string attribute (groups included); nil r returns h.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	if r == nil {
		return h
	}
	return &handler{r: r, h: h}
}

type handler struct {
	r *Redactor
	h slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.attr(a)
	}
	return &handler{r: h.r, h: h.h.WithAttrs(red)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{r: h.r, h: h.h.WithGroup(name)}
}

// attr masks the secrets of a: strings, errors and Stringers (as their
// text), and groups member by member.
func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, m := range g {
			red[i] = h.attr(m)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			if s := x.Error(); h.r.String(s) != s {
				return slog.String(a.Key, h.r.String(s))
			}
		case interface{ String() string }:
			if s := x.String(); h.r.String(s) != s {
				return slog.String(a.Key, h.r.String(s))
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
