package agui_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// verifier re-implements, for Go tests, what @ag-ui/client 1.0.0 checks on
// a stream (shared/design/protocols.md §1.1–§1.4): the event schemas as
// enforced (unknown fields and unknown types are warnings there, errors
// here; nulls and wrong types are fatal there), verifyEvents' grammar, the
// state patches applying, plus our own checks (the stream ends with a
// terminal event; RUN_STARTED echoes threadId and runId).
type verifier struct {
	threadID string // expected threadId; "" = any
	runIDs   []string

	n            int
	first        bool
	runStarted   bool
	runFinished  bool
	runError     bool
	lastType     string
	messages     map[string]bool // open text messages
	toolCalls    map[string]bool
	reasonSpans  map[string]bool
	reasonMsgs   map[string]bool
	ownMessage   map[string]*string // owners: nil = parent
	ownToolCall  map[string]*string
	ownReasoning map[string]*string
	steps        map[string]map[string]bool // owner ("\x00" = parent) → names
	subagents    map[string]bool            // active
	closedSubs   map[string]bool
	state        any
	events       []map[string]any
	outcomes     []map[string]any // RUN_FINISHED outcomes, in order
}

func newVerifier(threadID string) *verifier {
	v := &verifier{threadID: threadID, first: true}
	v.reset()
	return v
}

func (v *verifier) reset() {
	v.messages, v.toolCalls, v.reasonSpans, v.reasonMsgs = map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	v.ownMessage, v.ownToolCall, v.ownReasoning = map[string]*string{}, map[string]*string{}, map[string]*string{}
	v.steps, v.subagents, v.closedSubs = map[string]map[string]bool{}, map[string]bool{}, map[string]bool{}
	v.runFinished, v.runError = false, false
}

type fieldKind int

const (
	fString fieldKind = iota + 1
	fInt
	fAny     // any value but null
	fAnyNull // any value, null included
	fObject
	fArray
	fBool
)

type fieldSpec map[string]fieldKind

var common = fieldSpec{"type": fString, "timestamp": fInt, "rawEvent": fAny, "metadata": fObject}

// specs: required fields, optional fields.
var schemas = map[string][2]fieldSpec{
	"RUN_STARTED":               {{"threadId": fString, "runId": fString}, {"protocolVersion": fString, "parentRunId": fString, "input": fObject}},
	"RUN_FINISHED":              {{"threadId": fString, "runId": fString}, {"result": fAny, "outcome": fObject, "usage": fArray}},
	"RUN_ERROR":                 {{"message": fString}, {"code": fString, "usage": fArray}},
	"STEP_STARTED":              {{"stepName": fString}, {}},
	"STEP_FINISHED":             {{"stepName": fString}, {}},
	"TEXT_MESSAGE_START":        {{"messageId": fString}, {"role": fString, "name": fString}},
	"TEXT_MESSAGE_CONTENT":      {{"messageId": fString, "delta": fString}, {}},
	"TEXT_MESSAGE_END":          {{"messageId": fString}, {}},
	"TOOL_CALL_START":           {{"toolCallId": fString, "toolCallName": fString}, {"parentMessageId": fString}},
	"TOOL_CALL_ARGS":            {{"toolCallId": fString, "delta": fString}, {}},
	"TOOL_CALL_END":             {{"toolCallId": fString}, {}},
	"TOOL_CALL_RESULT":          {{"messageId": fString, "toolCallId": fString, "content": fAny}, {"role": fString}},
	"STATE_SNAPSHOT":            {{"snapshot": fAnyNull}, {}},
	"STATE_DELTA":               {{"delta": fArray}, {}},
	"MESSAGES_SNAPSHOT":         {{"messages": fArray}, {}},
	"REASONING_START":           {{"messageId": fString}, {}},
	"REASONING_MESSAGE_START":   {{"messageId": fString, "role": fString}, {}},
	"REASONING_MESSAGE_CONTENT": {{"messageId": fString, "delta": fString}, {}},
	"REASONING_MESSAGE_END":     {{"messageId": fString}, {}},
	"REASONING_END":             {{"messageId": fString}, {}},
	"SUBAGENT_STARTED":          {{"subagentRunId": fString, "name": fString}, {"description": fString, "parentSubagentRunId": fString, "parentToolCallId": fString, "parentMessageId": fString}},
	"SUBAGENT_FINISHED":         {{"subagentRunId": fString}, {"result": fAny, "outcome": fObject}},
	"SUBAGENT_ERROR":            {{"subagentRunId": fString, "message": fString}, {"code": fString}},
	"CUSTOM":                    {{"name": fString, "value": fAnyNull}, {}},
}

// Events that may not carry subagentRunId.
var runScoped = map[string]bool{"RUN_STARTED": true, "RUN_FINISHED": true, "RUN_ERROR": true, "MESSAGES_SNAPSHOT": true}

func checkKind(name string, val any, k fieldKind) error {
	if val == nil && k != fAnyNull {
		return fmt.Errorf("%s is null", name)
	}
	switch k {
	case fString:
		if _, ok := val.(string); !ok {
			return fmt.Errorf("%s must be a string, got %T", name, val)
		}
	case fInt:
		n, ok := val.(json.Number)
		if !ok {
			return fmt.Errorf("%s must be a number, got %T", name, val)
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || math.Abs(float64(i)) > 1<<53-1 {
			return fmt.Errorf("%s must be an integer within ±2^53, got %s", name, n)
		}
	case fObject:
		if _, ok := val.(map[string]any); !ok {
			return fmt.Errorf("%s must be an object, got %T", name, val)
		}
	case fArray:
		if _, ok := val.([]any); !ok {
			return fmt.Errorf("%s must be an array, got %T", name, val)
		}
	case fBool:
		if _, ok := val.(bool); !ok {
			return fmt.Errorf("%s must be a boolean", name)
		}
	}
	return nil
}

// checkObject checks an object's fields against required and optional specs.
func checkObject(where string, obj map[string]any, req, opt fieldSpec) error {
	for k, kind := range req {
		val, ok := obj[k]
		if !ok {
			return fmt.Errorf("%s: required field %s missing", where, k)
		}
		if err := checkKind(where+"."+k, val, kind); err != nil {
			return err
		}
	}
	for k, val := range obj {
		if _, ok := req[k]; ok {
			continue
		}
		kind, ok := opt[k]
		if !ok {
			return fmt.Errorf("%s: unknown field %q (the client strips it with a warning)", where, k)
		}
		if err := checkKind(where+"."+k, val, kind); err != nil {
			return err
		}
	}
	return nil
}

var (
	versionRE = regexp.MustCompile(`^\d+\.\d+$`)
	pointerRE = regexp.MustCompile(`^(/([^/~]|~[01])*)*$`)
)

// schema checks one event's shape.
func (v *verifier) schema(ev map[string]any, typ string) error {
	spec, ok := schemas[typ]
	if !ok {
		return fmt.Errorf("unknown event type %q (the client drops it with a warning)", typ)
	}
	opt := fieldSpec{}
	for k, kind := range common {
		opt[k] = kind
	}
	for k, kind := range spec[1] {
		opt[k] = kind
	}
	if !runScoped[typ] {
		opt["subagentRunId"] = fString
	}
	req := fieldSpec{}
	for k, kind := range spec[0] {
		req[k] = kind
	}
	if err := checkObject(typ, ev, req, opt); err != nil {
		return err
	}
	switch typ {
	case "RUN_STARTED":
		if pv, ok := ev["protocolVersion"].(string); ok && (!versionRE.MatchString(pv) || pv != "1.0") {
			return fmt.Errorf("RUN_STARTED.protocolVersion %q: the client warns unless it is 1.0 or older", pv)
		}
	case "RUN_FINISHED":
		if o, ok := ev["outcome"].(map[string]any); ok {
			switch o["type"] {
			case "success":
				if err := checkObject("RUN_FINISHED.outcome", o, fieldSpec{"type": fString}, fieldSpec{"pendingToolCallIds": fArray}); err != nil {
					return err
				}
			case "cancelled":
				if err := checkObject("RUN_FINISHED.outcome", o, fieldSpec{"type": fString}, fieldSpec{}); err != nil {
					return err
				}
			case "interrupt":
				if err := checkObject("RUN_FINISHED.outcome", o, fieldSpec{"type": fString, "interrupts": fArray}, fieldSpec{}); err != nil {
					return err
				}
				ins := o["interrupts"].([]any)
				if len(ins) == 0 {
					return fmt.Errorf("RUN_FINISHED.outcome.interrupts is empty")
				}
				for i, x := range ins {
					in, ok := x.(map[string]any)
					if !ok {
						return fmt.Errorf("interrupt %d is not an object", i)
					}
					if err := checkObject("interrupt", in, fieldSpec{"id": fString, "reason": fString},
						fieldSpec{"message": fString, "toolCallId": fString, "responseSchema": fObject, "expiresAt": fString, "metadata": fObject, "subagentRunId": fString}); err != nil {
						return err
					}
				}
			default:
				return fmt.Errorf("RUN_FINISHED.outcome.type %v", o["type"])
			}
		}
		if err := checkUsage(ev); err != nil {
			return err
		}
	case "RUN_ERROR":
		if err := checkUsage(ev); err != nil {
			return err
		}
	case "TEXT_MESSAGE_START":
		if r, ok := ev["role"].(string); ok && !slices.Contains([]string{"developer", "system", "assistant", "user"}, r) {
			return fmt.Errorf("TEXT_MESSAGE_START.role %q", r)
		}
	case "REASONING_MESSAGE_START":
		if ev["role"] != "reasoning" {
			return fmt.Errorf("REASONING_MESSAGE_START.role must be reasoning")
		}
	case "TOOL_CALL_RESULT":
		if r, ok := ev["role"]; ok && r != "tool" {
			return fmt.Errorf("TOOL_CALL_RESULT.role must be tool")
		}
		switch ev["content"].(type) {
		case string, []any:
		default:
			return fmt.Errorf("TOOL_CALL_RESULT.content must be a string or parts")
		}
	case "STATE_DELTA":
		for i, x := range ev["delta"].([]any) {
			op, ok := x.(map[string]any)
			if !ok {
				return fmt.Errorf("delta op %d is not an object", i)
			}
			path, _ := op["path"].(string)
			if !pointerRE.MatchString(path) {
				return fmt.Errorf("delta op %d: path %q is not a JSON pointer", i, path)
			}
			switch op["op"] {
			case "add", "replace", "test":
				if _, ok := op["value"]; !ok {
					return fmt.Errorf("delta op %d: %v without value", i, op["op"])
				}
			case "remove":
			case "move", "copy":
				if _, ok := op["from"].(string); !ok {
					return fmt.Errorf("delta op %d: %v without from", i, op["op"])
				}
			default:
				return fmt.Errorf("delta op %d: unknown op %v", i, op["op"])
			}
		}
	case "SUBAGENT_FINISHED":
		if o, ok := ev["outcome"].(map[string]any); ok {
			switch o["type"] {
			case "success":
				if err := checkObject("SUBAGENT_FINISHED.outcome", o, fieldSpec{"type": fString}, fieldSpec{}); err != nil {
					return err
				}
			case "suspended":
				if err := checkObject("SUBAGENT_FINISHED.outcome", o, fieldSpec{"type": fString}, fieldSpec{"interruptIds": fArray}); err != nil {
					return err
				}
				for _, id := range asSlice(o["interruptIds"]) {
					if _, ok := id.(string); !ok {
						return fmt.Errorf("SUBAGENT_FINISHED.outcome.interruptIds holds a non-string")
					}
				}
			default:
				return fmt.Errorf("SUBAGENT_FINISHED.outcome.type %v", o["type"])
			}
		}
	}
	return nil
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

func checkUsage(ev map[string]any) error {
	for i, x := range asSlice(ev["usage"]) {
		u, ok := x.(map[string]any)
		if !ok {
			return fmt.Errorf("usage %d is not an object", i)
		}
		if err := checkObject("usage", u, fieldSpec{}, fieldSpec{"provider": fString, "model": fString, "inputTokens": fInt,
			"outputTokens": fInt, "totalTokens": fInt, "reasoningTokens": fInt, "cachedInputTokens": fInt, "cacheWriteInputTokens": fInt}); err != nil {
			return err
		}
	}
	return nil
}

func tagOf(ev map[string]any) *string {
	if s, ok := ev["subagentRunId"].(string); ok {
		return &s
	}
	return nil
}

func ownerName(o *string) string {
	if o == nil {
		return "(parent)"
	}
	return *o
}

// tagError: a tagged continuation must agree with its opener's owner.
func tagError(ev map[string]any, owner *string, known bool, what, id string) error {
	tag := tagOf(ev)
	if tag == nil || !known {
		return nil
	}
	if owner == nil || *owner != *tag {
		return fmt.Errorf("%s: subagentRunId %q does not match the %s %q opener's %s", ev["type"], *tag, what, id, ownerName(owner))
	}
	return nil
}

// event checks the next frame's JSON.
func (v *verifier) event(raw []byte) error {
	v.n++
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var ev map[string]any
	if err := dec.Decode(&ev); err != nil {
		return fmt.Errorf("event %d: not a JSON object: %v", v.n, err)
	}
	typ, _ := ev["type"].(string)
	if typ == "" {
		return fmt.Errorf("event %d: no type", v.n)
	}
	if err := v.schema(ev, typ); err != nil {
		return fmt.Errorf("event %d (%s): schema: %w", v.n, typ, err)
	}
	if err := v.grammar(ev, typ); err != nil {
		return fmt.Errorf("event %d (%s): %w", v.n, typ, err)
	}
	v.events = append(v.events, ev)
	v.lastType = typ
	return nil
}

func (v *verifier) grammar(ev map[string]any, typ string) error {
	if v.runError && typ != "RUN_STARTED" {
		return fmt.Errorf("event after RUN_ERROR")
	}
	if v.runFinished && typ != "RUN_ERROR" && typ != "RUN_STARTED" {
		return fmt.Errorf("event after RUN_FINISHED")
	}
	if v.first {
		v.first = false
		if typ != "RUN_STARTED" && typ != "RUN_ERROR" {
			return fmt.Errorf("first event must be RUN_STARTED")
		}
	} else if typ == "RUN_STARTED" {
		if v.runStarted && !v.runFinished && !v.runError {
			return fmt.Errorf("RUN_STARTED while a run is active")
		}
		if v.runFinished || v.runError {
			v.reset()
		}
	}
	str := func(k string) string { s, _ := ev[k].(string); return s }
	tag := tagOf(ev)
	switch typ {
	case "RUN_STARTED":
		v.runStarted = true
		if v.threadID != "" && str("threadId") != v.threadID {
			return fmt.Errorf("threadId %q, want %q", str("threadId"), v.threadID)
		}
		v.runIDs = append(v.runIDs, str("runId"))
	case "RUN_FINISHED":
		for owner, names := range v.steps {
			if len(names) > 0 {
				return fmt.Errorf("RUN_FINISHED while steps are active (owner %q): %v", owner, names)
			}
		}
		for what, m := range map[string]map[string]bool{"text messages": v.messages, "reasoning messages": v.reasonMsgs,
			"reasoning spans": v.reasonSpans, "tool calls": v.toolCalls, "subagents": v.subagents} {
			if len(m) > 0 {
				return fmt.Errorf("RUN_FINISHED while %s are active: %v", what, keys(m))
			}
		}
		if len(v.runIDs) > 0 && str("runId") != v.runIDs[len(v.runIDs)-1] {
			return fmt.Errorf("RUN_FINISHED.runId %q does not echo RUN_STARTED's %q", str("runId"), v.runIDs[len(v.runIDs)-1])
		}
		if o, ok := ev["outcome"].(map[string]any); ok {
			v.outcomes = append(v.outcomes, o)
		} else {
			v.outcomes = append(v.outcomes, map[string]any{"type": "success"})
		}
		v.runFinished = true
	case "RUN_ERROR":
		v.runError = true
	case "TEXT_MESSAGE_START":
		id := str("messageId")
		if v.messages[id] {
			return fmt.Errorf("text message %q already in progress", id)
		}
		owner, known := v.ownMessage[id]
		if err := tagError(ev, owner, known, "message", id); err != nil {
			return err
		}
		v.messages[id] = true
		if !known {
			v.ownMessage[id] = tag
		}
	case "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END":
		id := str("messageId")
		if !v.messages[id] {
			return fmt.Errorf("no active text message %q", id)
		}
		owner, known := v.ownMessage[id]
		if err := tagError(ev, owner, known, "message", id); err != nil {
			return err
		}
		if typ == "TEXT_MESSAGE_END" {
			delete(v.messages, id)
		}
	case "TOOL_CALL_START":
		id := str("toolCallId")
		if v.toolCalls[id] {
			return fmt.Errorf("tool call %q already in progress", id)
		}
		var inherited *string
		inheritedKnown := false
		if pm, ok := ev["parentMessageId"].(string); ok {
			if po, known := v.ownMessage[pm]; known {
				if tag != nil && (po == nil || *po != *tag) {
					return fmt.Errorf("TOOL_CALL_START: subagentRunId %q does not match its parent message %q owner %s", *tag, pm, ownerName(po))
				}
				inherited, inheritedKnown = po, true
			}
		}
		owner, known := v.ownToolCall[id]
		if err := tagError(ev, owner, known, "tool call", id); err != nil {
			return err
		}
		v.toolCalls[id] = true
		if !known {
			if tag != nil {
				v.ownToolCall[id] = tag
			} else if inheritedKnown {
				v.ownToolCall[id] = inherited
			} else {
				v.ownToolCall[id] = nil
			}
		}
	case "TOOL_CALL_ARGS", "TOOL_CALL_END":
		id := str("toolCallId")
		if !v.toolCalls[id] {
			return fmt.Errorf("no active tool call %q", id)
		}
		owner, known := v.ownToolCall[id]
		if err := tagError(ev, owner, known, "tool call", id); err != nil {
			return err
		}
		if typ == "TOOL_CALL_END" {
			delete(v.toolCalls, id)
		}
	case "TOOL_CALL_RESULT":
		v.ownMessage[str("messageId")] = tag
	case "STEP_STARTED", "STEP_FINISHED":
		name, owner := str("stepName"), "\x00"
		if tag != nil {
			owner = *tag
		}
		if v.steps[owner] == nil {
			v.steps[owner] = map[string]bool{}
		}
		if typ == "STEP_STARTED" {
			if v.steps[owner][name] {
				return fmt.Errorf("step %q already active", name)
			}
			v.steps[owner][name] = true
		} else {
			if !v.steps[owner][name] {
				return fmt.Errorf("STEP_FINISHED for step %q that was not started by this owner", name)
			}
			delete(v.steps[owner], name)
		}
	case "REASONING_START", "REASONING_MESSAGE_START":
		id := str("messageId")
		open := v.reasonMsgs
		if typ == "REASONING_START" {
			open = v.reasonSpans
		}
		if open[id] {
			return fmt.Errorf("reasoning %q already in progress", id)
		}
		owner, known := v.ownReasoning[id]
		if err := tagError(ev, owner, known, "reasoning message", id); err != nil {
			return err
		}
		open[id] = true
		if !known {
			v.ownReasoning[id] = tag
		}
	case "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END":
		id := str("messageId")
		open := v.reasonMsgs
		if typ == "REASONING_END" {
			open = v.reasonSpans
		}
		if !open[id] {
			return fmt.Errorf("no active reasoning %q", id)
		}
		owner, known := v.ownReasoning[id]
		if err := tagError(ev, owner, known, "reasoning message", id); err != nil {
			return err
		}
		if typ != "REASONING_MESSAGE_CONTENT" {
			delete(open, id)
		}
	case "SUBAGENT_STARTED":
		id := str("subagentRunId")
		if v.subagents[id] {
			return fmt.Errorf("subagent %q already active", id)
		}
		if v.closedSubs[id] {
			return fmt.Errorf("subagent %q already finished in this run: ids are not reusable", id)
		}
		if p, ok := ev["parentSubagentRunId"].(string); ok && !v.subagents[p] && !v.closedSubs[p] {
			return fmt.Errorf("parentSubagentRunId %q has not been started in this run", p)
		}
		v.subagents[id] = true
	case "SUBAGENT_FINISHED", "SUBAGENT_ERROR":
		id := str("subagentRunId")
		if !v.subagents[id] {
			return fmt.Errorf("no active subagent %q", id)
		}
		delete(v.subagents, id)
		v.closedSubs[id] = true
	case "STATE_SNAPSHOT":
		v.state = deepCopy(ev["snapshot"]) // patches apply to the copy, the event stays as sent
	case "STATE_DELTA":
		for _, x := range ev["delta"].([]any) {
			op := x.(map[string]any)
			if err := applyOp(&v.state, op); err != nil {
				return fmt.Errorf("state patch fails (the client warns): %v", err)
			}
		}
	}
	return nil
}

// end checks the stream's end: it must close with a terminal event.
func (v *verifier) end() error {
	if v.n == 0 {
		return fmt.Errorf("empty stream")
	}
	if v.lastType != "RUN_FINISHED" && v.lastType != "RUN_ERROR" {
		return fmt.Errorf("stream ended after %s, not RUN_FINISHED or RUN_ERROR", v.lastType)
	}
	return nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func deepCopy(x any) any {
	switch x := x.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, v := range x {
			m[k] = deepCopy(v)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, v := range x {
			s[i] = deepCopy(v)
		}
		return s
	default:
		return x
	}
}

// applyOp applies an add or replace to a JSON document.
func applyOp(doc *any, op map[string]any) error {
	path := op["path"].(string)
	kind := op["op"].(string)
	if kind != "add" && kind != "replace" {
		return fmt.Errorf("op %s not supported by this test", kind)
	}
	if path == "" {
		*doc = op["value"]
		return nil
	}
	toks := strings.Split(path[1:], "/")
	cur := *doc
	for i, t := range toks {
		t = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		last := i == len(toks)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				if _, ok := c[t]; !ok && kind == "replace" {
					return fmt.Errorf("replace %s: no such member", path)
				}
				c[t] = op["value"]
				return nil
			}
			next, ok := c[t]
			if !ok {
				return fmt.Errorf("%s: no member %q", path, t)
			}
			cur = next
		case []any:
			idx, err := strconv.Atoi(t)
			if err != nil || idx < 0 || idx >= len(c) {
				return fmt.Errorf("%s: bad index %q", path, t)
			}
			if last {
				c[idx] = op["value"]
				return nil
			}
			cur = c[idx]
		default:
			return fmt.Errorf("%s: cannot descend into %T", path, cur)
		}
	}
	return nil
}
