// Package pricing is the model price table: what a model's tokens cost, in
// US dollars, so that a run's spend can be estimated from its token_usage
// events and held to a cost budget.
//
// A model the table does not know has no price: its cost is unknown, never
// guessed as zero (Table.Lookup reports ok false, Table.Cost an error
// matching ErrUnknownModel). The engine's defaults (Default) cover common
// hosted models; an operator overrides or extends them with a JSON file
// (Load, conclave serve --prices FILE):
//
//	{"gpt-4o": {"input": 2.5, "cached_input": 1.25, "output": 10},
//	 "my-local-llama": {"input": 0, "output": 0}}
//
// Prices are USD per million tokens. Costs are counted in nano-dollars
// (NanoUSD, an int64: exact to add up from any goroutine with atomics, and
// up to 9.2 billion dollars).
package pricing

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"github.com/conclave-ai/conclave/messages"
)

// Price is what one model's tokens cost, in USD per million tokens.
type Price struct {
	// Input is the price of a prompt token the server did not read from
	// its cache.
	Input float64 `json:"input"`
	// CachedInput is the price of a prompt token read from the server's
	// prompt cache (messages.Usage.CacheReadTokens). Absent: Input.
	CachedInput *float64 `json:"cached_input,omitempty"`
	// CacheWrite is the price of a prompt token written to the cache
	// (CacheCreateTokens; Anthropic charges more for these). Absent: Input.
	CacheWrite *float64 `json:"cache_write,omitempty"`
	// Output is the price of a completion token (reasoning tokens are
	// billed as output by every provider listed here).
	Output float64 `json:"output"`
}

// MaxPrice bounds every price of a table (USD per million tokens): a
// larger one is a typo (a price per token entered per million, or cents).
const MaxPrice = 10_000

func (p Price) check() error {
	for _, v := range []*float64{&p.Input, p.CachedInput, p.CacheWrite, &p.Output} {
		if v != nil && (math.IsNaN(*v) || *v < 0 || *v > MaxPrice) {
			return fmt.Errorf("a price must be between 0 and %d USD per million tokens, got %v", MaxPrice, *v)
		}
	}
	return nil
}

// NanoUSD is an amount of US dollars in billionths (1e-9 USD).
type NanoUSD int64

// USD converts a dollar amount to NanoUSD, rounded to the nearest.
func USD(dollars float64) NanoUSD { return NanoUSD(math.Round(dollars * 1e9)) }

// Dollars is n in dollars.
func (n NanoUSD) Dollars() float64 { return float64(n) / 1e9 }

// String writes n for people: "$0.0123", "$12.50".
func (n NanoUSD) String() string {
	d := n.Dollars()
	if d != 0 && math.Abs(d) < 0.01 {
		return fmt.Sprintf("$%.4f", d)
	}
	return fmt.Sprintf("$%.2f", d)
}

// Of is the cost of usage u at price p. Cache reads and writes are parts
// of u.InputTokens (messages.Usage); the rest of the input is billed at
// Input.
func (p Price) Of(u messages.Usage) NanoUSD {
	cached, write := p.Input, p.Input
	if p.CachedInput != nil {
		cached = *p.CachedInput
	}
	if p.CacheWrite != nil {
		write = *p.CacheWrite
	}
	read, created := max(u.CacheReadTokens, 0), max(u.CacheCreateTokens, 0)
	plain := max(u.InputTokens-read-created, 0)
	// USD per million tokens is 1,000 nano-dollars per token.
	nanos := float64(plain)*p.Input + float64(read)*cached + float64(created)*write + float64(max(u.OutputTokens, 0))*p.Output
	return NanoUSD(math.Round(nanos * 1000))
}

// ErrUnknownModel: the table has no price for a model; its cost is
// unknown.
var ErrUnknownModel = errors.New("pricing: no price for the model")

// Table maps model names to prices. It is immutable once made, so safe
// for concurrent use.
type Table struct {
	prices map[string]Price // by normalized name
}

// New returns a table of the given prices (names as Lookup takes them).
func New(prices map[string]Price) (*Table, error) {
	t := &Table{prices: make(map[string]Price, len(prices))}
	for name, p := range prices {
		if err := p.check(); err != nil {
			return nil, fmt.Errorf("pricing: %s: %w", name, err)
		}
		n := normalize(name)
		if n == "" {
			return nil, fmt.Errorf("pricing: empty model name %q", name)
		}
		t.prices[n] = p
	}
	return t, nil
}

// Default returns the built-in prices (defaults.go).
func Default() *Table {
	t, err := New(defaults)
	if err != nil {
		panic(err) // the built-in table is checked by a test
	}
	return t
}

// MaxFileBytes bounds a prices file (a few hundred models fit in far less).
const MaxFileBytes = 1 << 20

// Load returns the built-in prices overridden and extended by a JSON file
// of {"model": {"input": …, "cached_input": …, "output": …}}. Unknown fields
// are an error.
func Load(data []byte) (*Table, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("pricing: the prices file is larger than %d bytes", MaxFileBytes)
	}
	var file map[string]Price
	if err := messages.DecodeStrict(data, &file); err != nil {
		return nil, fmt.Errorf("pricing: %w", err)
	}
	merged := make(map[string]Price, len(defaults)+len(file))
	for n, p := range defaults {
		merged[n] = p
	}
	for n, p := range file {
		merged[n] = p
	}
	return New(merged)
}

// datedSuffix matches the snapshot suffix providers append to a model's
// name ("-2024-08-06", "-20250514", "-latest", "-preview-05-06" is not).
var datedSuffix = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$`)

// normalize is the name a model is priced under: lower case, without a
// router's provider prefix ("openai/gpt-4o") or a snapshot date suffix
// ("gpt-4o-2024-08-06"). Nothing else is stripped: "gpt-4o-mini" is not
// "gpt-4o", so a model is never priced as a different one.
func normalize(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	if i := strings.LastIndexByte(n, '/'); i >= 0 {
		n = n[i+1:]
	}
	return datedSuffix.ReplaceAllString(n, "")
}

// Lookup returns model's price; ok is false when the table has none.
func (t *Table) Lookup(model string) (p Price, ok bool) {
	if t == nil {
		return Price{}, false
	}
	p, ok = t.prices[normalize(model)]
	return p, ok
}

// Cost is the cost of u on model, or an error matching ErrUnknownModel.
func (t *Table) Cost(model string, u messages.Usage) (NanoUSD, error) {
	p, ok := t.Lookup(model)
	if !ok {
		return 0, fmt.Errorf("%w %q (add it to the prices file, --prices)", ErrUnknownModel, model)
	}
	return p.Of(u), nil
}

// Unknown returns the names among models the table has no price for,
// sorted, without duplicates.
func (t *Table) Unknown(models ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range models {
		if _, ok := t.Lookup(m); !ok && !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}
