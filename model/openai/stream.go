package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// ErrClosed is returned by Recv after Close.
var ErrClosed = errors.New("openai: stream closed")

// The streamed chunk as this package reads it: only the fields it uses, so
// that encoding/json decodes a chunk with a few allocations (the SDK's
// ChatCompletionChunk decoder keeps every field's metadata and costs about
// three times more per token; see BENCHMARKS.md). The reasoning fields are not
// in OpenAI's schema: vLLM, llama.cpp and DeepSeek send
// "reasoning_content", Ollama and OpenRouter "reasoning".
type (
	wireChunk struct {
		Model   string       `json:"model"`
		Choices []wireChoice `json:"choices"`
		Usage   *wireUsage   `json:"usage"`
		Error   *wireError   `json:"error"`
		// Groq reports usage in x_groq.usage of the finish chunk.
		XGroq *struct {
			Usage *wireUsage `json:"usage"`
		} `json:"x_groq"`
	}
	wireChoice struct {
		Index        int64     `json:"index"`
		Delta        wireDelta `json:"delta"`
		FinishReason string    `json:"finish_reason"` // null decodes as ""
	}
	wireDelta struct {
		Content          string          `json:"content"` // null decodes as ""
		Refusal          string          `json:"refusal"`
		ReasoningContent json.RawMessage `json:"reasoning_content"`
		Reasoning        json.RawMessage `json:"reasoning"`
		ToolCalls        []wireCallDelta `json:"tool_calls"`
	}
	wireCallDelta struct {
		Index    *int64 `json:"index"` // nil: the server sent none (older Ollama)
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
		// Gemini's thought_signature, which it wants back with the call.
		ExtraContent json.RawMessage `json:"extra_content"`
	}
	wireUsage struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		// Sent by proxies in front of Anthropic models (LiteLLM,
		// OpenRouter): prompt tokens written to the cache.
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		// DeepSeek's count of cached prompt tokens, instead of
		// prompt_tokens_details.cached_tokens.
		PromptCacheHitTokens int64 `json:"prompt_cache_hit_tokens"`
	}
	wireError struct {
		Message string `json:"message"`
	}
)

// stream is one turn in progress: it reads the response's SSE events (the
// SDK's decoder), decodes each chunk and queues the model.Chunks it
// carries. Used by one goroutine (model.Stream's contract); nothing here is
// shared.
type stream struct {
	ctx          context.Context
	dec          ssestream.Decoder
	req          *model.Request
	model        string
	promptTokens int64 // the request's estimate, for a server that sends no usage

	queue []model.Chunk // chunks decoded but not yet returned, in order
	head  int

	calls    []*callBuf // by first appearance; at most one per index
	finished bool       // the choice has had its finish_reason
	flushed  bool       // calls emitted
	usage    *messages.Usage
	outBytes int // text and reasoning, for the usage estimate

	done   bool  // nothing more will be read
	err    error // what Recv returns once the queue is empty (nil: io.EOF)
	closed bool
}

// callBuf accumulates one tool call's deltas.
type callBuf struct {
	index    int64
	id, name string
	args     strings.Builder
	extra    json.RawMessage // the last extra_content (Gemini), sent back with the call
}

func (st *stream) push(c model.Chunk) { st.queue = append(st.queue, c) }

// errEmpty: the answer held no chunk at all.
var errEmpty = errors.New("the stream ended before its first chunk")

// first reads events until one chunk has been decoded. Its error is the
// transport's (retryable before the first chunk), errEmpty, or a decoding
// error wrapping model.ErrModel.
func (st *stream) first() error {
	ok, err := st.read()
	switch {
	case err != nil:
		return err
	case !ok:
		return errEmpty
	}
	return nil
}

// read reads and takes the next chunk; false at the end ([DONE] or the
// end of the body).
func (st *stream) read() (bool, error) {
	if !st.dec.Next() {
		return false, st.dec.Err()
	}
	data := st.dec.Event().Data
	if bytes.HasPrefix(data, []byte("[DONE]")) {
		return false, nil
	}
	var c wireChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return false, fmt.Errorf("%w: openai: %s: malformed chunk: %v", model.ErrModel, st.model, err)
	}
	if c.Error != nil {
		return false, fmt.Errorf("%w: %w: openai: %s: the server reports an error: %s", model.ErrModel, model.ErrTransient, st.model, c.Error.Message)
	}
	st.take(&c)
	return true, nil
}

// Recv returns the next chunk: see model.Stream.
func (st *stream) Recv() (model.Chunk, error) {
	for {
		if st.closed {
			return nil, ErrClosed
		}
		if err := st.ctx.Err(); err != nil {
			return nil, err
		}
		if st.head < len(st.queue) {
			c := st.queue[st.head]
			st.queue[st.head] = nil
			st.head++
			if st.head == len(st.queue) {
				st.queue, st.head = st.queue[:0], 0
			}
			return c, nil
		}
		if st.done {
			if st.err != nil {
				return nil, st.err
			}
			return nil, io.EOF
		}
		ok, err := st.read()
		if !ok || err != nil {
			st.end(err)
		}
	}
}

// Close releases the HTTP response; it is safe to call more than once.
func (st *stream) Close() error {
	if st.closed {
		return nil
	}
	st.closed = true
	return st.dec.Close()
}

// take decodes one chunk into the queue.
func (st *stream) take(c *wireChunk) {
	if c.Model != "" {
		st.model = c.Model
	}
	u := c.Usage
	if u == nil && c.XGroq != nil {
		u = c.XGroq.Usage
	}
	if u != nil {
		st.usage = &messages.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
			CacheCreateTokens: u.CacheCreationInputTokens, CacheReadTokens: u.PromptCacheHitTokens}
		if d := u.PromptTokensDetails; d != nil {
			st.usage.CacheReadTokens = max(st.usage.CacheReadTokens, d.CachedTokens)
		}
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // n is 1: other choices are not ours
		}
		d := &ch.Delta
		if r := reasoningOf(d); r != "" {
			st.outBytes += len(r)
			st.push(&model.Reasoning{Text: r})
		}
		if d.Content != "" {
			st.outBytes += len(d.Content)
			st.push(&model.Text{Text: d.Content})
		}
		if d.Refusal != "" {
			st.outBytes += len(d.Refusal)
			st.push(&model.Text{Text: d.Refusal})
		}
		for j := range d.ToolCalls {
			st.addCall(&d.ToolCalls[j])
		}
		if ch.FinishReason != "" {
			st.finished = true
			if err := st.flushCalls(); err != nil {
				st.fail(err)
				return
			}
		}
	}
}

// reasoningOf reads the non-standard reasoning delta: "reasoning_content"
// or else "reasoning"; a value that is not a string (some servers send
// objects) is not text to show.
func reasoningOf(d *wireDelta) string {
	for _, raw := range [...]json.RawMessage{d.ReasoningContent, d.Reasoning} {
		if len(raw) == 0 || raw[0] != '"' {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// addCall folds one tool-call delta into the call it continues, or
// starts a new call. Servers differ (issue 28's fixtures):
//   - OpenAI, vLLM, llama.cpp: an index per call, the id and name in the
//     call's first delta, the arguments in pieces;
//   - Ollama 0.20 streams each of several parallel calls whole, every one
//     at index 0 with its own id: a new id at a taken index is a new call;
//   - older Ollama sends no index: a delta with an id other than the last
//     call's starts a new call, one without continues the last call;
//   - NIM, some proxies and some GPT-5 streams resend the whole name (so
//     far) in every delta: a name that extends the one accumulated
//     replaces it, a fragment that does not is appended (servers that
//     split names);
//   - Gemini sends no index either (as older Ollama), and extra_content
//     with a call, kept to go back with it;
//   - Mistral sends every call whole in the finish chunk; LiteLLM in
//     front of Anthropic models numbers calls from 1.
func (st *stream) addCall(d *wireCallDelta) {
	var c *callBuf
	if d.Index == nil {
		if n := len(st.calls); n > 0 && (d.ID == "" || d.ID == st.calls[n-1].id) {
			c = st.calls[n-1]
		}
	} else {
		for i := len(st.calls) - 1; i >= 0; i-- { // the latest call at the index
			if b := st.calls[i]; b.index == *d.Index {
				if d.ID == "" || b.id == "" || b.id == d.ID {
					c = b
				}
				break
			}
		}
	}
	if c == nil {
		index := int64(len(st.calls))
		if d.Index != nil {
			index = *d.Index
		}
		c = &callBuf{index: index}
		st.calls = append(st.calls, c)
	}
	if d.ID != "" {
		c.id = d.ID
	}
	if name := d.Function.Name; name != "" {
		if c.name != "" && strings.HasPrefix(name, c.name) {
			c.name = name // resent whole (so far)
		} else {
			c.name += name // the next piece of a split name
		}
	}
	c.args.WriteString(d.Function.Arguments)
	if e := d.ExtraContent; len(e) > 0 && string(e) != "null" {
		c.extra = append(json.RawMessage(nil), e...) // the decoder's buffer is reused
	}
}

// flushCalls queues the accumulated calls as complete model.Calls, once.
func (st *stream) flushCalls() error {
	if st.flushed {
		return nil
	}
	st.flushed = true
	names := wireNamesOf(*st.req) // the request's: its calls come back in wire names
	for k, c := range st.calls {
		if c.name == "" {
			return fmt.Errorf("%w: openai: %s: tool call %d has no name", model.ErrModel, st.model, c.index)
		}
		args := strings.TrimSpace(c.args.String())
		if args == "" {
			args = "{}"
		}
		// Arguments that are not JSON are passed on as they came: the
		// runtime answers the call with an error result the model can act
		// on, as it does an unknown tool (model.ToolCall).
		id := c.id
		if id == "" { // some local servers send none: the agent's turn and position make one
			id = st.req.AgentID + "-t" + strconv.Itoa(st.req.Turn) + "-c" + strconv.Itoa(k+1)
		}
		st.push(&model.Call{Call: model.ToolCall{ID: id, Name: names.local(c.name), Args: json.RawMessage(args), Meta: c.extra}})
	}
	st.calls = nil
	return nil
}

// end handles the end of the SDK stream (err nil: it ended normally).
func (st *stream) end(err error) {
	st.done = true
	if err != nil {
		if cerr := st.ctx.Err(); cerr != nil {
			st.err = cerr
			return
		}
		if !errors.Is(err, model.ErrModel) { // the connection failed: worth a restart
			err = fmt.Errorf("%w: %w: openai: %s: stream: %w", model.ErrModel, model.ErrTransient, st.model, err)
		}
		st.err = err
		return
	}
	if !st.finished {
		st.err = fmt.Errorf("%w: %w: openai: %s: the stream ended without a finish_reason (connection dropped?)", model.ErrModel, model.ErrTransient, st.model)
		return
	}
	if err := st.flushCalls(); err != nil {
		st.err = err
		return
	}
	u := st.usage
	if u == nil { // the server sent no usage: estimate it
		u = &messages.Usage{InputTokens: st.promptTokens, OutputTokens: int64((st.outBytes + 3) / 4)}
	}
	st.push(&model.Usage{Model: st.model, Usage: *u})
}

// fail stops the stream with err after what is queued.
func (st *stream) fail(err error) {
	st.done, st.err = true, err
}
