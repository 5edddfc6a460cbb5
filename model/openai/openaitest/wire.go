package openaitest

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The OpenAI Chat Completions wire format, as much of it as Conclave's
// backend sends and reads. Chunks are encoded with encoding/json exactly as
// a server sends them.

// Chunk is one streamed chat.completion.chunk.
type Chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
	// Fields of other servers (see dialect.go): Azure's first chunk's
	// prompt_filter_results, Groq's x_groq (its request id, and its usage
	// in the finish chunk), llama.cpp's timings.
	SystemFingerprint   string          `json:"system_fingerprint,omitempty"`
	PromptFilterResults json.RawMessage `json:"prompt_filter_results,omitempty"`
	XGroq               *XGroq          `json:"x_groq,omitempty"`
	// Timings are llama.cpp's, in every chunk.
	Timings json.RawMessage `json:"timings,omitempty"`
}

// XGroq is Groq's x_groq chunk field.
type XGroq struct {
	ID    string `json:"id"`
	Usage *Usage `json:"usage,omitempty"`
}

// ChunkChoice is a choice of a chunk. FinishReason is null until the last
// chunk of the choice.
type ChunkChoice struct {
	Index        int     `json:"index"`
	Delta        Delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
	// ContentFilterResults is Azure's, in every choice.
	ContentFilterResults json.RawMessage `json:"content_filter_results,omitempty"`
}

// Delta is what a chunk adds. ReasoningContent and Reasoning are the
// non-standard reasoning fields (vLLM, llama.cpp, DeepSeek send the first;
// Ollama and OpenRouter the second).
type Delta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	Reasoning        string          `json:"reasoning,omitempty"`
	ToolCalls        []ToolCallDelta `json:"tool_calls,omitempty"`
}

// ToolCallDelta is a fragment of the tool call at Index: the first carries
// its ID, Type and name, the next ones pieces of its arguments. NoIndex
// leaves "index" out (older Ollama, Gemini).
type ToolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function FunctionDelta `json:"function"`
	// ExtraContent is Gemini's (its thought_signature).
	ExtraContent json.RawMessage `json:"extra_content,omitempty"`
	NoIndex      bool            `json:"-"`
}

// MarshalJSON encodes d, without "index" when NoIndex is set.
func (d ToolCallDelta) MarshalJSON() ([]byte, error) {
	type plain ToolCallDelta // without the method
	if !d.NoIndex {
		return json.Marshal(plain(d))
	}
	return json.Marshal(struct {
		ID           string          `json:"id,omitempty"`
		Type         string          `json:"type,omitempty"`
		Function     FunctionDelta   `json:"function"`
		ExtraContent json.RawMessage `json:"extra_content,omitempty"`
	}{d.ID, d.Type, d.Function, d.ExtraContent})
}

// FunctionDelta is a fragment of a function call.
type FunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Usage is the usage chunk's (stream_options.include_usage).
type Usage struct {
	PromptTokens        int64          `json:"prompt_tokens"`
	CompletionTokens    int64          `json:"completion_tokens"`
	TotalTokens         int64          `json:"total_tokens"`
	PromptTokensDetails *PromptDetails `json:"prompt_tokens_details,omitempty"`
	// CacheCreationInputTokens is what proxies in front of Anthropic
	// models send: prompt tokens written to the cache.
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens,omitempty"`
	// DeepSeek's cache counters, instead of prompt_tokens_details.
	PromptCacheHitTokens  int64 `json:"prompt_cache_hit_tokens,omitempty"`
	PromptCacheMissTokens int64 `json:"prompt_cache_miss_tokens,omitempty"`
}

// PromptDetails breaks the prompt tokens down.
type PromptDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// Chunk constructors, for scripted replies.

// TextChunk is a chunk with a content delta.
func TextChunk(s string) Chunk { return deltaChunk(Delta{Content: &s}) }

// ReasoningContentChunk is a chunk with a reasoning_content delta.
func ReasoningContentChunk(s string) Chunk { return deltaChunk(Delta{ReasoningContent: s}) }

// ReasoningChunk is a chunk with a reasoning delta.
func ReasoningChunk(s string) Chunk { return deltaChunk(Delta{Reasoning: s}) }

// CallChunk is a chunk with tool call deltas.
func CallChunk(calls ...ToolCallDelta) Chunk { return deltaChunk(Delta{ToolCalls: calls}) }

// CallStart is the first delta of a call: its id and name.
func CallStart(index int, id, name string) ToolCallDelta {
	return ToolCallDelta{Index: index, ID: id, Type: "function", Function: FunctionDelta{Name: name}}
}

// CallArgs is a piece of a call's arguments.
func CallArgs(index int, args string) ToolCallDelta {
	return ToolCallDelta{Index: index, Function: FunctionDelta{Arguments: args}}
}

// FinishChunk ends the choice with reason ("stop", "tool_calls", "length").
func FinishChunk(reason string) Chunk {
	c := deltaChunk(Delta{})
	c.Choices[0].FinishReason = &reason
	return c
}

// UsageChunk is the usage chunk: no choices.
func UsageChunk(prompt, completion, cached int64) Chunk {
	return Chunk{Object: "chat.completion.chunk", Choices: []ChunkChoice{}, Usage: &Usage{
		PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion,
		PromptTokensDetails: &PromptDetails{CachedTokens: cached},
	}}
}

func deltaChunk(d Delta) Chunk {
	return Chunk{Object: "chat.completion.chunk", Choices: []ChunkChoice{{Delta: d}}}
}

// Request is a chat completion request as the server reads it.
type Request struct {
	Model          string          `json:"model"`
	Messages       []Message       `json:"messages"`
	Tools          []Tool          `json:"tools,omitempty"`
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	Temperature    *float64        `json:"temperature,omitempty"`
	Stream         bool            `json:"stream"`
	StreamOptions  *StreamOptions  `json:"stream_options,omitempty"`
	// Authorization is the request's Authorization header (not JSON).
	Authorization string `json:"-"`
	// Traceparent is the request's W3C traceparent header (not JSON).
	Traceparent string `json:"-"`
}

// StreamOptions are the request's stream options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one message of a request.
type Message struct {
	Role       string     `json:"role"`
	Content    Content    `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Parts is the content when it was sent as an array of parts (Content
	// is then their text, joined); nil for a string content.
	Parts []ContentPart `json:"-"`
}

// UnmarshalJSON reads a message, keeping an array content's parts.
func (m *Message) UnmarshalJSON(b []byte) error {
	type plain Message // without the method
	var raw struct {
		plain
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = Message(raw.plain)
	c := bytes.TrimSpace(raw.Content)
	if len(c) > 0 && c[0] == '[' {
		if err := json.Unmarshal(c, &m.Parts); err != nil {
			return fmt.Errorf("content: %w", err)
		}
		if m.Parts == nil {
			m.Parts = []ContentPart{}
		}
	}
	if len(c) == 0 {
		return nil
	}
	return m.Content.UnmarshalJSON(c)
}

// ContentPart is one part of an array content: text, image_url,
// input_audio, file (user messages), refusal (assistant messages).
type ContentPart struct {
	Type       string          `json:"type"`
	Text       *string         `json:"text,omitempty"`
	Refusal    *string         `json:"refusal,omitempty"`
	ImageURL   *ImageURL       `json:"image_url,omitempty"`
	File       *FilePart       `json:"file,omitempty"`
	InputAudio json.RawMessage `json:"input_audio,omitempty"`
}

// ImageURL is an image_url part's image: an http(s) URL or a base64
// data URL.
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// FilePart is a file part's file: file_data (a base64 data URL) with its
// filename, or the file_id of an uploaded file.
type FilePart struct {
	FileData *string `json:"file_data,omitempty"`
	FileID   *string `json:"file_id,omitempty"`
	Filename *string `json:"filename,omitempty"`
}

// Content is a message's content: a string, or text parts (joined).
type Content string

// UnmarshalJSON reads a string, null or an array of {"type":"text","text"}.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*c = ""
		return nil
	case len(b) > 0 && b[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		var s string
		for _, p := range parts {
			s += p.Text
		}
		*c = Content(s)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("content: %w", err)
	}
	*c = Content(s)
	return nil
}

// ToolCall is a call in an assistant message. ExtraContent is what
// Gemini sent with the call (its thought_signature) and wants back.
type ToolCall struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Function     FunctionCall    `json:"function"`
	ExtraContent json.RawMessage `json:"extra_content,omitempty"`
}

// FunctionCall is a call's function and arguments (a JSON text).
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a tool definition of a request.
type Tool struct {
	Type     string      `json:"type"`
	Function FunctionDef `json:"function"`
}

// FunctionDef is a function tool's definition.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ResponseFormat is the request's response_format.
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is a json_schema response format.
type JSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict bool            `json:"strict,omitempty"`
}

// errorBody is an OpenAI error answer.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}
