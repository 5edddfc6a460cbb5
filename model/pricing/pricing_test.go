package pricing_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/pricing"
)

func TestDefault_EveryPriceIsValid(t *testing.T) {
	t.Parallel()
	tab := pricing.Default() // panics on an invalid built-in price
	for _, m := range []string{"gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "o3", "o4-mini",
		"claude-sonnet-4-0", "claude-3-5-haiku", "gemini-2.5-pro", "gemini-2.5-flash"} {
		if _, ok := tab.Lookup(m); !ok {
			t.Errorf("no built-in price for %s", m)
		}
	}
}

func TestTable_LookupNormalizesSnapshotsAndPrefixes(t *testing.T) {
	t.Parallel()
	tab := pricing.Default()
	want, _ := tab.Lookup("gpt-4o")
	for _, name := range []string{"gpt-4o-2024-08-06", "openai/gpt-4o", "GPT-4o", "gpt-4o-latest"} {
		got, ok := tab.Lookup(name)
		if !ok || got.Input != want.Input || got.Output != want.Output {
			t.Errorf("Lookup(%q) = %+v, %v; want gpt-4o's price", name, got, ok)
		}
	}
	if got, _ := tab.Lookup("claude-sonnet-4-20250514"); got.Input != 3 {
		t.Errorf("claude-sonnet-4-20250514 input = %v, want 3", got.Input)
	}
	// Models of late 2025 and 2026, with their snapshot suffixes.
	for name, input := range map[string]float64{"gpt-5-2025-08-07": 1.25, "gpt-5.4-mini": 0.75, "claude-sonnet-4-5-20250929": 3, "claude-haiku-4-5": 1, "anthropic/claude-opus-4-5": 5} {
		if got, ok := tab.Lookup(name); !ok || got.Input != input {
			t.Errorf("Lookup(%q) = %+v, %v; want input %v", name, got, ok, input)
		}
	}
	// A longer name is another model: never priced as its prefix.
	mini, _ := tab.Lookup("gpt-4o-mini")
	if mini.Input == want.Input {
		t.Fatalf("gpt-4o-mini priced as gpt-4o")
	}
	for _, name := range []string{"gpt-4o-mini-tts", "llama3.1:8b", "scripted", "gpt-4", ""} {
		if p, ok := tab.Lookup(name); ok {
			t.Errorf("Lookup(%q) = %+v, want no price (unknown, not guessed)", name, p)
		}
	}
}

func TestPrice_Of(t *testing.T) {
	t.Parallel()
	tab := pricing.Default()
	// gpt-4o: 2.50 input, 1.25 cached, 10 output per million.
	got, err := tab.Cost("gpt-4o", messages.Usage{InputTokens: 1_000_000, CacheReadTokens: 400_000, OutputTokens: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	// 600k × 2.50 + 400k × 1.25 + 100k × 10 = 1.5 + 0.5 + 1.0 = $3.00
	if got != pricing.USD(3) {
		t.Fatalf("cost = %v (%d nano), want $3.00", got, got)
	}
	// Anthropic cache writes cost 1.25 × input: sonnet 3.75.
	got, _ = tab.Cost("claude-sonnet-4", messages.Usage{InputTokens: 2_000_000, CacheCreateTokens: 1_000_000})
	if got != pricing.USD(3+3.75) {
		t.Fatalf("sonnet with cache writes = %v, want $6.75", got)
	}
	// One token of gpt-4o-mini input: 0.15 micro-dollars, not rounded to 0.
	if got, _ := tab.Cost("gpt-4o-mini", messages.Usage{InputTokens: 1}); got != 150 {
		t.Fatalf("one gpt-4o-mini token = %d nano-dollars, want 150", got)
	}
}

func TestTable_CostOfAnUnknownModel(t *testing.T) {
	t.Parallel()
	_, err := pricing.Default().Cost("my-llama", messages.Usage{InputTokens: 10})
	if !errors.Is(err, pricing.ErrUnknownModel) || !strings.Contains(err.Error(), "my-llama") {
		t.Fatalf("err = %v, want ErrUnknownModel naming the model", err)
	}
	if got := pricing.Default().Unknown("gpt-4o", "my-llama", "x", "my-llama"); strings.Join(got, ",") != "my-llama,x" {
		t.Fatalf("Unknown = %v", got)
	}
}

func TestLoad_OverridesAndExtends(t *testing.T) {
	t.Parallel()
	tab, err := pricing.Load([]byte(`{"gpt-4o": {"input": 5, "output": 20}, "my-llama": {"input": 0, "output": 0}}`))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := tab.Lookup("gpt-4o-2024-08-06"); p.Input != 5 || p.CachedInput != nil {
		t.Fatalf("gpt-4o = %+v, want the file's price", p)
	}
	if c, err := tab.Cost("my-llama", messages.Usage{InputTokens: 1000, OutputTokens: 1000}); err != nil || c != 0 {
		t.Fatalf("my-llama = %v, %v: a free model is priced 0, on purpose", c, err)
	}
	if _, ok := tab.Lookup("o3"); !ok {
		t.Fatal("the built-in prices the file does not name are gone")
	}
	for _, bad := range []string{`{"x": {"input": -1, "output": 0}}`, `{"x": {"input": 1, "ouput": 2}}`, `{"x": {"input": 1e9, "output": 0}}`, `[]`} {
		if _, err := pricing.Load([]byte(bad)); err == nil {
			t.Errorf("Load(%s) = nil error", bad)
		}
	}
}

func TestNanoUSD_String(t *testing.T) {
	t.Parallel()
	for n, want := range map[pricing.NanoUSD]string{0: "$0.00", pricing.USD(12.5): "$12.50", pricing.USD(0.00123): "$0.0012"} {
		if got := n.String(); got != want {
			t.Errorf("%d: %q, want %q", int64(n), got, want)
		}
	}
}
