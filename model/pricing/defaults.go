package pricing

// p is a price with its cache prices set (USD per million tokens).
func p(input, cachedInput, output float64) Price {
	return Price{Input: input, CachedInput: &cachedInput, Output: output}
}

// pw is p with a cache write price (Anthropic's 5-minute cache writes).
func pw(input, cachedInput, cacheWrite, output float64) Price {
	pr := p(input, cachedInput, output)
	pr.CacheWrite = &cacheWrite
	return pr
}

// defaults are the built-in prices: the providers' standard (not batch,
// not priority) list prices in USD per million tokens, as published on
// their pricing pages (first written 2025-08, models of late 2025 and 2026
// added 2026-11; prices change: an operator who bills on them checks them,
// and overrides any with --prices). The GPT-5.4 and GPT-5.5 rows were
// read from third-party copies of OpenAI's page (several agreeing, none
// official): check them first. Sources:
//   - OpenAI: https://platform.openai.com/docs/pricing
//   - Anthropic: https://docs.anthropic.com/en/docs/about-claude/pricing
//     (cache_write: 5-minute cache writes, 1.25 × input)
//   - Google: https://ai.google.dev/gemini-api/docs/pricing (prompts up to
//     200k tokens; Gemini 2.5 Pro costs more above that, which this table
//     does not model)
//
// Names are matched after normalize: "gpt-4o-2024-08-06" and
// "openai/gpt-4o" are priced as "gpt-4o".
var defaults = map[string]Price{
	// OpenAI
	"gpt-5.5":      p(5.00, 0.50, 30.00),
	"gpt-5.4":      p(2.50, 0.25, 15.00),
	"gpt-5.4-mini": p(0.75, 0.075, 4.50),
	"gpt-5.4-nano": p(0.20, 0.02, 1.25),
	"gpt-5":        p(1.25, 0.125, 10.00),
	"gpt-5-mini":   p(0.25, 0.025, 2.00),
	"gpt-5-nano":   p(0.05, 0.005, 0.40),
	"gpt-4o":       p(2.50, 1.25, 10.00),
	"gpt-4o-mini":  p(0.15, 0.075, 0.60),
	"gpt-4.1":      p(2.00, 0.50, 8.00),
	"gpt-4.1-mini": p(0.40, 0.10, 1.60),
	"gpt-4.1-nano": p(0.10, 0.025, 0.40),
	"o3":           p(2.00, 0.50, 8.00),
	"o3-mini":      p(1.10, 0.55, 4.40),
	"o4-mini":      p(1.10, 0.275, 4.40),
	"o1":           p(15.00, 7.50, 60.00),
	// Anthropic
	"claude-opus-4-5":   pw(5.00, 0.50, 6.25, 25.00),
	"claude-sonnet-4-5": pw(3.00, 0.30, 3.75, 15.00),
	"claude-haiku-4-5":  pw(1.00, 0.10, 1.25, 5.00),
	"claude-opus-4-1":   pw(15.00, 1.50, 18.75, 75.00),
	"claude-opus-4-0":   pw(15.00, 1.50, 18.75, 75.00),
	"claude-opus-4":     pw(15.00, 1.50, 18.75, 75.00),
	"claude-sonnet-4-0": pw(3.00, 0.30, 3.75, 15.00),
	"claude-sonnet-4":   pw(3.00, 0.30, 3.75, 15.00),
	"claude-3-7-sonnet": pw(3.00, 0.30, 3.75, 15.00),
	"claude-3-5-sonnet": pw(3.00, 0.30, 3.75, 15.00),
	"claude-3-5-haiku":  pw(0.80, 0.08, 1.00, 4.00),
	"claude-3-haiku":    pw(0.25, 0.03, 0.30, 1.25),
	// Google
	"gemini-3-pro-preview":  p(2.00, 0.20, 12.00),
	"gemini-2.5-pro":        p(1.25, 0.31, 10.00),
	"gemini-2.5-flash":      p(0.30, 0.075, 2.50),
	"gemini-2.5-flash-lite": p(0.10, 0.025, 0.40),
	"gemini-2.0-flash":      p(0.10, 0.025, 0.40),
	"gemini-2.0-flash-lite": p(0.075, 0.075, 0.30),
}
