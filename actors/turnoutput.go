package actors

import (
	"unicode/utf8"
)

// Output bounds of a model turn (Config.MaxDeltaBytes,
// Config.MaxTurnOutputBytes).
const (
	// DefaultMaxDeltaBytes bounds one text or reasoning delta event: a
	// model that sends megabytes in one chunk is published in pieces,
	// each journaled, encoded and fanned out on its own, so no single
	// event (and no subscriber's copy of it) is large.
	DefaultMaxDeltaBytes = 64 << 10
	// DefaultMaxTurnOutputBytes bounds the text and reasoning of one turn:
	// a long answer fits many times over, and eight workers of a wave at
	// the bound hold a few tens of MiB of events, not gigabytes.
	DefaultMaxTurnOutputBytes = 4 << 20
)

// turnOutput bounds the text and reasoning one model turn publishes: each
// delta is split into events of at most maxDelta bytes, and the turn may
// produce at most max bytes in all. Used by the turn's goroutine only.
type turnOutput struct {
	maxDelta int
	max      int // < 0: no bound
	used     int
	cut      bool // the bound was reached: the turn ends
}

func newTurnOutput(maxDelta, max int) *turnOutput {
	return &turnOutput{maxDelta: maxDelta, max: max}
}

// take returns what of s the turn keeps: all of it, or, at the bound, the
// prefix that fits (cut at a rune boundary), after which cut is set and
// take keeps nothing more.
func (o *turnOutput) take(s string) string {
	if o.cut {
		return ""
	}
	if o.max >= 0 && o.used+len(s) > o.max {
		s = runePrefix(s, o.max-o.used)
		o.cut = true
	}
	o.used += len(s)
	return s
}

// pieces calls f with s in pieces of at most maxDelta bytes, cut at rune
// boundaries (a rune longer than maxDelta is a piece of its own), until f
// returns an error.
func (o *turnOutput) pieces(s string, f func(string) error) error {
	for len(s) > 0 {
		n := len(runePrefix(s, o.maxDelta))
		if n == 0 { // maxDelta shorter than the first rune
			_, n = utf8.DecodeRuneInString(s)
		}
		if err := f(s[:n]); err != nil {
			return err
		}
		s = s[n:]
	}
	return nil
}

// runePrefix is the longest prefix of s of at most n bytes that does not
// end inside a UTF-8 sequence.
func runePrefix(s string, n int) string {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return ""
	}
	for i := n; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i]
		}
	}
	return s[:n] // not UTF-8 around n: cut at n
}
