package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// ErrClosed is returned by Recv after Close.
var ErrClosed = errors.New("openai: stream closed")

// stream is one turn in progress: it reads the SDK's chunks and turns each
// into the model.Chunks it carries, which it queues. Used by one goroutine
// (model.Stream's contract); nothing here is shared.
type stream struct {
	ctx          context.Context
	s            *ssestream.Stream[oa.ChatCompletionChunk]
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
}

func (st *stream) push(c model.Chunk) { st.queue = append(st.queue, c) }

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
		if st.s.Next() {
			st.take(st.s.Current())
			continue
		}
		st.end(st.s.Err())
	}
}

// Close releases the HTTP response; it is safe to call more than once.
func (st *stream) Close() error {
	if st.closed {
		return nil
	}
	st.closed = true
	return st.s.Close()
}

// take decodes one chunk into the queue.
func (st *stream) take(c oa.ChatCompletionChunk) {
	if c.Model != "" {
		st.model = c.Model
	}
	if c.JSON.Usage.Valid() {
		u := c.Usage
		st.usage = &messages.Usage{
			InputTokens:       u.PromptTokens,
			OutputTokens:      u.CompletionTokens,
			CachedInputTokens: u.PromptTokensDetails.CachedTokens,
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
// (vLLM, llama.cpp, DeepSeek) or else "reasoning" (Ollama, OpenRouter).
func reasoningOf(d *oa.ChatCompletionChunkChoiceDelta) string {
	for _, key := range [...]string{"reasoning_content", "reasoning"} {
		f, ok := d.JSON.ExtraFields[key]
		if !ok {
			continue
		}
		raw := f.Raw()
		if raw == "" || raw == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			continue // not a string (some servers send objects): not reasoning text we can show
		}
		if s != "" {
			return s
		}
	}
	return ""
}

func (st *stream) addCall(d *oa.ChatCompletionChunkChoiceDeltaToolCall) {
	var c *callBuf
	for _, b := range st.calls {
		if b.index == d.Index {
			c = b
			break
		}
	}
	if c == nil {
		c = &callBuf{index: d.Index}
		st.calls = append(st.calls, c)
	}
	if d.ID != "" {
		c.id = d.ID
	}
	if d.Function.Name != "" {
		c.name += d.Function.Name // some servers split names too
	}
	c.args.WriteString(d.Function.Arguments)
}

// flushCalls queues the accumulated calls as complete model.Calls, once.
func (st *stream) flushCalls() error {
	if st.flushed {
		return nil
	}
	st.flushed = true
	for k, c := range st.calls {
		if c.name == "" {
			return fmt.Errorf("%w: openai: %s: tool call %d has no name", model.ErrModel, st.model, c.index)
		}
		args := strings.TrimSpace(c.args.String())
		if args == "" {
			args = "{}"
		}
		if !json.Valid([]byte(args)) {
			return fmt.Errorf("%w: openai: %s: the arguments of tool call %s (%s) are not JSON: %.200q", model.ErrModel, st.model, c.id, c.name, args)
		}
		id := c.id
		if id == "" { // some local servers send none: the agent's turn and position make one
			id = st.req.AgentID + "-t" + strconv.Itoa(st.req.Turn) + "-c" + strconv.Itoa(k+1)
		}
		st.push(&model.Call{Call: model.ToolCall{ID: id, Name: c.name, Args: json.RawMessage(args)}})
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
		st.err = fmt.Errorf("%w: openai: %s: stream: %w", model.ErrModel, st.model, err)
		return
	}
	if !st.finished {
		st.err = fmt.Errorf("%w: openai: %s: the stream ended without a finish_reason (connection dropped?)", model.ErrModel, st.model)
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
	_ = st.s.Close()
}
