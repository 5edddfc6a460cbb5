package openaitest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/conclave-ai/conclave/model"
)

// Dialect is how one server streams an answer, in council mode: the knobs
// in which real OpenAI-compatible servers differ (where usage goes, which
// field carries reasoning, how tool calls are split and named, what comes
// before the first chunk and after the last). The zero Dialect is
// openaitest's own rendering of OpenAI's format. Each of the servers' below
// cites the documented samples it is built from; the frames of those
// samples are in ../testdata/wire (model/openai's fixture tests).
type Dialect struct {
	// Name names the dialect in test names.
	Name string
	// Reasoning is the delta field reasoning goes in: "" is
	// "reasoning_content", or "reasoning"; "-" streams none (a server
	// that does not show its model's reasoning).
	Reasoning string
	// Calls splits a turn's tool calls into the tool_calls of successive
	// chunks (nil: CallsInterleaved).
	Calls func([]model.ToolCall) [][]ToolCallDelta
	// CallID turns the scripted call's id into one in the server's format
	// (nil: as it is).
	CallID func(string) string
	// CallsInFinish sends the calls in the finish chunk itself.
	CallsInFinish bool
	// FinishCalls is the finish_reason of a turn with calls ("": "tool_calls").
	FinishCalls string
	// Usage is where the usage goes.
	Usage UsagePlace
	// ShapeUsage rewrites the usage in the server's fields (nil: OpenAI's).
	ShapeUsage func(*Usage)
	// RoleChunk sends {"role":"assistant","content":""} first.
	RoleChunk bool
	// Comment, when set, is an SSE comment sent before the first chunk
	// and again before the finish chunk (a server that keeps the
	// connection alive while the model thinks).
	Comment string
	// Prelude and Epilogue are raw frames sent before the first chunk and
	// after the last one (before [DONE]).
	Prelude, Epilogue []string
	// Decorate adds the server's own fields to every chunk it sends.
	Decorate func(*Chunk)
	// Check, when set, is a request rule of the server's own, beyond the
	// API's (rules.go): a request it refuses gets a 400.
	Check func(*Request) *InvalidRequest
}

// UsagePlace is where a dialect puts the usage.
type UsagePlace int

const (
	// UsageLastChunk: a last chunk with empty choices, when the request
	// asks for it (stream_options.include_usage), as OpenAI does.
	UsageLastChunk UsagePlace = iota
	// UsageInFinish: inside the finish chunk, whatever the request asks.
	UsageInFinish
	// UsageXGroq: in the finish chunk's x_groq.usage, and in a last chunk
	// too when the request asks for it.
	UsageXGroq
	// UsageNone: never.
	UsageNone
)

// Tool-call splits.

// CallsInterleaved is OpenAI's split: each call's index, id and name,
// then the first half of every call's arguments, then the second halves.
func CallsInterleaved(calls []model.ToolCall) [][]ToolCallDelta {
	var starts, firsts, seconds [][]ToolCallDelta
	for i, c := range calls {
		a, b := halves(string(c.Args))
		starts = append(starts, []ToolCallDelta{CallStart(i, c.ID, c.Name)})
		firsts = append(firsts, []ToolCallDelta{CallArgs(i, a)})
		seconds = append(seconds, []ToolCallDelta{CallArgs(i, b)})
	}
	return append(append(starts, firsts...), seconds...)
}

// CallsOneByOne streams one call after the other, each as its start
// (index, id, name, empty arguments) and its arguments in two pieces.
func CallsOneByOne(calls []model.ToolCall) [][]ToolCallDelta {
	var out [][]ToolCallDelta
	for i, c := range calls {
		a, b := halves(string(c.Args))
		start := CallStart(i, c.ID, c.Name)
		out = append(out, []ToolCallDelta{start}, []ToolCallDelta{CallArgs(i, a)}, []ToolCallDelta{CallArgs(i, b)})
	}
	return out
}

// CallsNamesResent streams calls one by one, the whole name in every
// delta of a call (NVIDIA NIM).
func CallsNamesResent(calls []model.ToolCall) [][]ToolCallDelta {
	out := CallsOneByOne(calls)
	for k, ds := range out {
		for i := range ds {
			ds[i].Function.Name = calls[k/3].Name // three deltas a call
		}
	}
	return out
}

// CallsWhole streams each call whole in its own chunk, at its index.
func CallsWhole(calls []model.ToolCall) [][]ToolCallDelta {
	var out [][]ToolCallDelta
	for i, c := range calls {
		out = append(out, []ToolCallDelta{whole(i, c)})
	}
	return out
}

// CallsWholeAtZero streams each call whole in its own chunk, every one at
// index 0 (Ollama 0.20).
func CallsWholeAtZero(calls []model.ToolCall) [][]ToolCallDelta {
	var out [][]ToolCallDelta
	for _, c := range calls {
		out = append(out, []ToolCallDelta{whole(0, c)})
	}
	return out
}

// CallsWholeNoIndex streams each call whole in its own chunk, without an
// index (older Ollama, Gemini).
func CallsWholeNoIndex(calls []model.ToolCall) [][]ToolCallDelta {
	out := CallsWhole(calls)
	for _, ds := range out {
		for i := range ds {
			ds[i].NoIndex = true
		}
	}
	return out
}

// CallsTogether sends every call whole in one chunk (Mistral).
func CallsTogether(calls []model.ToolCall) [][]ToolCallDelta {
	var ds []ToolCallDelta
	for i, c := range calls {
		ds = append(ds, whole(i, c))
	}
	if ds == nil {
		return nil
	}
	return [][]ToolCallDelta{ds}
}

// callsFrom shifts split's indexes by from (LiteLLM in front of
// Anthropic models numbers calls by content block: the text is block 0).
func callsFrom(from int, split func([]model.ToolCall) [][]ToolCallDelta) func([]model.ToolCall) [][]ToolCallDelta {
	return func(calls []model.ToolCall) [][]ToolCallDelta {
		out := split(calls)
		for _, ds := range out {
			for i := range ds {
				ds[i].Index += from
			}
		}
		return out
	}
}

func whole(i int, c model.ToolCall) ToolCallDelta {
	d := CallStart(i, c.ID, c.Name)
	d.Function.Arguments = string(c.Args)
	return d
}

// halves splits args in two, on a rune boundary (JSON strings must stay
// valid UTF-8).
func halves(args string) (string, string) {
	half := len(args) / 2
	for half > 0 && !utf8.RuneStart(args[half]) {
		half--
	}
	return args[:half], args[half:]
}

// Call ids in servers' formats, made from the scripted id (the same
// scripted id gives the same wire id).

func digest(id string) [32]byte { return sha256.Sum256([]byte(id)) }

// alnumID is n letters and digits made from id.
func alnumID(id string, n int) string {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	d := digest(id)
	b := make([]byte, n)
	for i := range b {
		b[i] = alnum[int(d[i%len(d)])%len(alnum)]
	}
	return string(b)
}

func hexID(id string, n int) string { return fmt.Sprintf("%x", digest(id))[:n] }

// The servers' dialects.

var (
	// OpenAI: a first chunk with the role, then content deltas, tool
	// calls interleaved by index with id and name only in their first
	// delta, the finish chunk, the usage chunk with empty choices
	// (stream_options.include_usage). From OpenAI's API reference
	// (chat/streaming, "The chat completion chunk object") and the
	// cookbook "How to stream completions".
	OpenAI = Dialect{Name: "openai", RoleChunk: true, Decorate: fingerprint("fp_openaitest")}

	// Azure OpenAI: a first chunk with empty choices, id "", model "" and
	// the prompt's prompt_filter_results; content_filter_results in every
	// choice; with asynchronous filtering, a last filter chunk with no
	// delta after the finish chunk. From the samples quoted in
	// AbanteAI/archive-old-cli-mentat#429, langchain4j#2385,
	// langchain-ai/langchain#18977 and microsoft/autogen#6465.
	Azure = Dialect{
		Name: "azure", RoleChunk: true,
		Prelude:  []string{azurePrelude},
		Epilogue: []string{azureTrailer},
		Decorate: func(c *Chunk) {
			for i := range c.Choices {
				c.Choices[i].ContentFilterResults = json.RawMessage(azureFilter)
			}
		},
	}

	// VLLM: reasoning as reasoning_content, tool calls one after the
	// other (its tool parsers' streaming: the call's index, id
	// "chatcmpl-tool-…" and name, then its arguments), the usage chunk
	// with empty choices. From vLLM's docs (Reasoning Outputs, Tool
	// Calling) and vllm-project/vllm#10821.
	VLLM = Dialect{
		Name: "vllm", RoleChunk: true, Calls: CallsOneByOne,
		CallID: func(id string) string { return "chatcmpl-tool-" + hexID(id, 32) },
	}

	// LlamaCpp: llama-server: reasoning as reasoning_content, its
	// "timings" in every chunk, calls one after the other with random
	// 32-character ids, the usage chunk after the finish chunk. From the
	// frames in openai-php/client#780, strands-agents/harness-sdk#3955 and
	// llama.cpp's server README (function calling).
	LlamaCpp = Dialect{
		Name: "llama.cpp", Calls: CallsOneByOne,
		CallID: func(id string) string { return alnumID(id, 32) },
		Decorate: func(c *Chunk) {
			c.SystemFingerprint = "b9554-d403f00ec"
			c.Timings = json.RawMessage(`{"cache_n":7,"prompt_n":10,"prompt_ms":251.51,"predicted_n":78,"predicted_ms":1119.721}`)
		},
	}

	// Ollama020: Ollama 0.20: reasoning as "reasoning", every parallel
	// call whole at index 0 with its own id, the role in every delta, the
	// usage chunk. From ollama's OpenAI compatibility docs and the frames
	// in names_test.go (TestModel_ToolCallStreamsOfRealServers).
	Ollama020 = Dialect{
		Name: "ollama-0.20", Reasoning: "reasoning", Calls: CallsWholeAtZero,
		CallID:   func(id string) string { return "call_" + alnumID(id, 8) },
		Decorate: ollamaChunk,
	}

	// OllamaOld: older Ollama: no reasoning field, calls whole
	// without an index, "finish_reason":"" until the last chunk, which
	// says "stop" even after calls, and no usage at all (stream_options
	// ignored). From ollama/ollama#4357 and the older-Ollama frames of
	// names_test.go.
	OllamaOld = Dialect{
		Name: "ollama-old", Reasoning: "-", Calls: CallsWholeNoIndex, FinishCalls: "stop", Usage: UsageNone,
		CallID: func(id string) string { return "call_" + alnumID(id, 8) },
		Decorate: func(c *Chunk) {
			ollamaChunk(c)
			for i := range c.Choices {
				if c.Choices[i].FinishReason == nil {
					c.Choices[i].FinishReason = new(string)
				}
			}
		},
	}

	// LiteLLM: the proxy in front of an Anthropic model: calls numbered
	// by content block (the first call at index 1, the text being block
	// 0), the id only in a call's first delta, the usage chunk with the
	// cache counters Anthropic reports (cache_creation_input_tokens). From
	// BerriAI/litellm#11407 and #3490.
	LiteLLM = Dialect{
		Name: "litellm", Calls: callsFrom(1, CallsOneByOne),
		CallID:     func(id string) string { return "toolu_" + alnumID(id, 24) },
		ShapeUsage: func(u *Usage) { u.CacheCreationInputTokens = u.PromptTokens / 10 },
	}

	// OpenRouter: ": OPENROUTER PROCESSING" comments while the model
	// works, reasoning as "reasoning", the usage chunk. From OpenRouter's
	// API reference (Streaming; Reasoning Tokens).
	OpenRouter = Dialect{
		Name: "openrouter", Reasoning: "reasoning", RoleChunk: true, Comment: "OPENROUTER PROCESSING",
		Decorate: func(c *Chunk) { c.ID = "gen-openaitest" },
	}

	// Groq: reasoning as "reasoning" (reasoning_format "parsed"), each
	// call whole in one delta, x_groq with the request id in the first
	// chunk and the usage in the finish chunk, and a usage chunk as well
	// when asked. From Portkey-AI/gateway#1072 and #1338 and Groq's API
	// reference.
	Groq = Dialect{
		Name: "groq", Reasoning: "reasoning", RoleChunk: true, Calls: CallsWhole, Usage: UsageXGroq,
		CallID: func(id string) string { return "call_" + alnumID(id, 24) },
	}

	// DeepSeek: reasoning as reasoning_content, calls one after the other
	// with ids "call_0_…", the usage in the finish chunk with its own
	// cache counters (prompt_cache_hit_tokens, prompt_cache_miss_tokens)
	// and no prompt_tokens_details. From DeepSeek's API docs (Context
	// Caching, Reasoning Model) and the ds-api crate's Usage.
	DeepSeek = Dialect{
		Name: "deepseek", RoleChunk: true, Calls: CallsOneByOne, Usage: UsageInFinish,
		CallID: func(id string) string { return "call_0_" + hexID(id, 32) },
		ShapeUsage: func(u *Usage) {
			if d := u.PromptTokensDetails; d != nil {
				u.PromptCacheHitTokens = d.CachedTokens
				u.PromptCacheMissTokens = u.PromptTokens - d.CachedTokens
			}
			u.PromptTokensDetails = nil
		},
	}

	// Gemini: Gemini's OpenAI endpoint: no reasoning shown, each call
	// whole without an index, with an id "function-call-…", Gemini's
	// extra_content (thought_signature) on the first of parallel calls
	// (dayu-agent's capture in noho/dayu-agent#45), "stop" as the finish reason even
	// after calls, the usage (counts only) inside the finish chunk. A
	// request whose earlier calls come back without their
	// thought_signature is refused, as Gemini 3 refuses it ("Function call
	// is missing a thought_signature"; NousResearch/hermes-agent#2997,
	// Gitlawb/openclaude#426). From
	// open-webui/computer#224, THU-MAIC/OpenMAIC#1556 and
	// AstrBotDevs/AstrBot#6661.
	Gemini = Dialect{
		Name: "gemini", Reasoning: "-", Calls: geminiCalls, FinishCalls: "stop", Usage: UsageInFinish,
		CallID:     func(id string) string { return fmt.Sprintf("function-call-%d", geminiNumber(id)) },
		ShapeUsage: countsOnly,
		Check:      geminiSignatures,
	}

	// Mistral: the role chunk, then calls with ids of 9 letters and
	// digits, all whole in one delta that is the finish chunk itself, with
	// the usage (counts only). From
	// mistral-common's tool-call id rule ("a-z, A-Z, 0-9, with a length
	// of 9", anomalyco/opencode#1680), vllm-project/vllm#10821 and
	// mistralai/client-python#16.
	Mistral = Dialect{
		Name: "mistral", Reasoning: "-", RoleChunk: true, Calls: CallsTogether, CallsInFinish: true, Usage: UsageInFinish,
		CallID:     func(id string) string { return alnumID(id, 9) },
		ShapeUsage: countsOnly,
	}
)

// NIM: NVIDIA NIM (MiniMax M2.7 and others on integrate.api.nvidia.com):
// calls one by one with the whole name resent in every delta. From
// NousResearch/hermes-agent#8259, #11984 and #12233.
var NIM = Dialect{Name: "nim", RoleChunk: true, Calls: CallsNamesResent,
	CallID: func(id string) string { return "chatcmpl-tool-" + hexID(id, 32) }}

// Dialects are the servers' dialects, for table tests.
func Dialects() []Dialect {
	return []Dialect{OpenAI, Azure, VLLM, LlamaCpp, Ollama020, OllamaOld, LiteLLM, OpenRouter, Groq, DeepSeek, Gemini, Mistral, NIM}
}

// countsOnly: a server that reports no cached prompt tokens.
func countsOnly(u *Usage) { u.PromptTokensDetails = nil }

func fingerprint(fp string) func(*Chunk) {
	return func(c *Chunk) { c.SystemFingerprint = fp }
}

// ollamaChunk: Ollama's chunks carry the role in every delta.
func ollamaChunk(c *Chunk) {
	c.SystemFingerprint = "fp_ollama"
	for i := range c.Choices {
		if c.Choices[i].FinishReason == nil {
			c.Choices[i].Delta.Role = "assistant"
		}
	}
}

func geminiCalls(calls []model.ToolCall) [][]ToolCallDelta {
	out := CallsWholeNoIndex(calls)
	if len(out) > 0 { // of parallel calls, only the first has a signature
		out[0][0].ExtraContent = json.RawMessage(`{"google":{"thought_signature":"c2lnbmF0dXJl"}}`)
	}
	return out
}

// geminiSignatures refuses an assistant message whose first call lacks
// the extra_content it was streamed with (of parallel calls, Gemini signs
// and checks the first).
func geminiSignatures(r *Request) *InvalidRequest {
	for i, m := range r.Messages {
		for j, c := range m.ToolCalls[:min(1, len(m.ToolCalls))] {
			if len(c.ExtraContent) == 0 {
				return &InvalidRequest{
					Message: fmt.Sprintf("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:%s` , position %d.", c.Function.Name, j+1),
					Param:   fmt.Sprintf("messages[%d].tool_calls[%d]", i, j),
				}
			}
		}
	}
	return nil
}

func geminiNumber(id string) uint64 {
	d := digest(id)
	var n uint64
	for _, b := range d[:7] {
		n = n<<8 | uint64(b)
	}
	return n
}

const (
	azureFilter  = `{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}`
	azurePrelude = `{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":` + azureFilter + `}]}`
	azureTrailer = `{"id":"","object":"","created":0,"model":"","choices":[{"index":0,"finish_reason":null,"content_filter_results":` + azureFilter + `,"content_filter_offsets":{"check_offset":0,"start_offset":0,"end_offset":64}}]}`
)
