package openaitest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// The Chat Completions API's documented request rules, which the fake
// enforces as upstream does: a request upstream refuses is a 400 here
// too, with upstream's error body (message, type invalid_request_error,
// param, code), so that no test passes against the fake with a request
// the real API would refuse. Messages are upstream's, as its clients see
// them (e.g. "Invalid 'tools[0].function.name': string does not match
// pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.").

// Limits of the API.
const (
	MaxTools               = 128
	MaxFunctionName        = 64
	MaxFunctionDescription = 1024
)

var functionName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// InvalidRequest is a request the API refuses (HTTP 400).
type InvalidRequest struct {
	Message string
	Param   string
	Code    string
}

func (e *InvalidRequest) Error() string { return e.Message }

// CheckRequest returns what the API would refuse in r, or nil.
func CheckRequest(r *Request) *InvalidRequest {
	if r.Model == "" {
		return &InvalidRequest{Message: "you must provide a model parameter", Code: "missing_required_parameter"}
	}
	if len(r.Messages) == 0 {
		return &InvalidRequest{Message: "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
			Param: "messages", Code: "empty_array"}
	}
	if t := r.Temperature; t != nil && (*t < 0 || *t > 2) {
		return &InvalidRequest{Message: fmt.Sprintf("Invalid 'temperature': decimal %s. Expected a value between 0 and 2, but got %v instead.",
			map[bool]string{true: "below minimum value", false: "above maximum value"}[*t < 0], *t), Param: "temperature", Code: "decimal_out_of_range"}
	}
	if len(r.Tools) > MaxTools {
		return &InvalidRequest{Message: fmt.Sprintf("Invalid 'tools': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", MaxTools, len(r.Tools)),
			Param: "tools", Code: "array_above_max_length"}
	}
	for i, t := range r.Tools {
		at := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return &InvalidRequest{Message: fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function' and 'custom'.", t.Type), Param: at + ".type", Code: "invalid_value"}
		}
		if e := checkName(at+".function.name", t.Function.Name); e != nil {
			return e
		}
		if n := utf8.RuneCountInString(t.Function.Description); n > MaxFunctionDescription {
			return &InvalidRequest{Message: fmt.Sprintf("Invalid '%s.function.description': string too long. Expected a string with maximum length %d, but got a string with length %d instead.", at, MaxFunctionDescription, n),
				Param: at + ".function.description", Code: "string_above_max_length"}
		}
		if len(t.Function.Parameters) > 0 {
			var schema struct {
				Type any `json:"type"`
			}
			if err := json.Unmarshal(t.Function.Parameters, &schema); err != nil || schema.Type != "object" {
				return &InvalidRequest{Message: fmt.Sprintf("Invalid schema for function '%s': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"%v\"'.", t.Function.Name, schema.Type),
					Param: at + ".function.parameters", Code: "invalid_function_parameters"}
			}
		}
	}
	return checkMessages(r.Messages)
}

func checkName(param, name string) *InvalidRequest {
	if !functionName.MatchString(name) {
		return &InvalidRequest{Message: fmt.Sprintf("Invalid '%s': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", param),
			Param: param, Code: "invalid_value"}
	}
	if len(name) > MaxFunctionName {
		return &InvalidRequest{Message: fmt.Sprintf("Invalid '%s': string too long. Expected a string with maximum length %d, but got a string with length %d instead.", param, MaxFunctionName, len(name)),
			Param: param, Code: "string_above_max_length"}
	}
	return nil
}

// checkMessages: the roles are known; every assistant message with
// tool_calls is followed by tool messages answering each of its calls
// (before any other message), and every tool message answers a call of
// the assistant message before it.
func checkMessages(msgs []Message) *InvalidRequest {
	var open map[string]bool // calls of the last assistant message not answered yet
	openAt := 0
	unanswered := func() *InvalidRequest {
		var ids []string
		for id, waiting := range open {
			if waiting {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		return &InvalidRequest{Message: "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
			"The following tool_call_ids did not have response messages: " + strings.Join(ids, ", "), Param: fmt.Sprintf("messages.[%d].role", openAt)}
	}
	for i, m := range msgs {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return &InvalidRequest{Message: fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", m.Role),
				Param: fmt.Sprintf("messages[%d].role", i), Code: "invalid_value"}
		}
		if m.Role == "tool" {
			if !open[m.ToolCallID] {
				return &InvalidRequest{Message: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
					Param: fmt.Sprintf("messages.[%d].role", i)}
			}
			open[m.ToolCallID] = false
			continue
		}
		if e := unanswered(); e != nil {
			return e
		}
		open = nil
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			open, openAt = map[string]bool{}, i
			for j, c := range m.ToolCalls {
				if e := checkName(fmt.Sprintf("messages[%d].tool_calls[%d].function.name", i, j), c.Function.Name); e != nil {
					return e
				}
				open[c.ID] = true
			}
		}
	}
	return unanswered()
}
