package openaitest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
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
	// Images: at most 500 in a request, 50 MB of image bytes in all
	// (OpenAI's "Images and vision" guide: image input requirements).
	MaxImages     = 500
	MaxImageBytes = 50 << 20
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
	if e := checkMessages(r.Messages); e != nil {
		return e
	}
	return checkParts(r.Messages)
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

// partTypes are the content part types each role's messages take.
var partTypes = map[string][]string{
	"system":    {"text"},
	"developer": {"text"},
	"user":      {"text", "image_url", "input_audio", "file"},
	"assistant": {"text", "refusal"},
	"tool":      {"text"},
}

// imageTypes are the image types the API takes (PNG, JPEG, WEBP and
// non-animated GIF); Chat Completions takes files (file_data) as PDFs only.
var imageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// checkParts checks array contents: each part's type is one its role
// takes, with what that type needs; an image is an http(s) URL or a
// base64 data URL of an image type the API takes; a file part has
// file_data (a base64 data URL of a PDF) or file_id, not both; and the
// request's images stay within MaxImages and MaxImageBytes.
func checkParts(msgs []Message) *InvalidRequest {
	images, imageBytes := 0, 0
	for i, m := range msgs {
		if m.Parts != nil && len(m.Parts) == 0 {
			return &InvalidRequest{Message: fmt.Sprintf("Invalid 'messages[%d].content': empty array. Expected an array with minimum length 1, but got an empty array instead.", i),
				Param: fmt.Sprintf("messages[%d].content", i), Code: "empty_array"}
		}
		for j, p := range m.Parts {
			at := fmt.Sprintf("messages[%d].content[%d]", i, j)
			allowed := partTypes[m.Role]
			if !slices.Contains(allowed, p.Type) {
				return &InvalidRequest{Message: fmt.Sprintf("Invalid value: '%s'. Supported values are: %s.", p.Type, quoteList(allowed)),
					Param: at + ".type", Code: "invalid_value"}
			}
			missing := func(field string) *InvalidRequest {
				return &InvalidRequest{Message: fmt.Sprintf("Missing required parameter: '%s.%s'.", at, field), Param: at + "." + field, Code: "missing_required_parameter"}
			}
			switch p.Type {
			case "text":
				if p.Text == nil {
					return missing("text")
				}
			case "refusal":
				if p.Refusal == nil {
					return missing("refusal")
				}
			case "input_audio":
				if len(p.InputAudio) == 0 {
					return missing("input_audio")
				}
			case "image_url":
				if p.ImageURL == nil {
					return missing("image_url")
				}
				if d := p.ImageURL.Detail; d != "" && d != "auto" && d != "low" && d != "high" {
					return &InvalidRequest{Message: fmt.Sprintf("Invalid value: '%s'. Supported values are: 'auto', 'low', and 'high'.", d), Param: at + ".image_url.detail", Code: "invalid_value"}
				}
				n, e := checkImageURL(at+".image_url.url", p.ImageURL.URL)
				if e != nil {
					return e
				}
				images, imageBytes = images+1, imageBytes+n
			case "file":
				if p.File == nil {
					return missing("file")
				}
				if e := checkFilePart(at+".file", p.File); e != nil {
					return e
				}
			}
		}
	}
	if images > MaxImages {
		return &InvalidRequest{Message: fmt.Sprintf("Too many images in request. Max is %d.", MaxImages), Param: "messages", Code: "invalid_value"}
	}
	if imageBytes > MaxImageBytes {
		return &InvalidRequest{Message: fmt.Sprintf("Total image size exceeds the limit of %d bytes.", MaxImageBytes), Param: "messages", Code: "invalid_value"}
	}
	return nil
}

// checkImageURL checks an image's url and returns its data's size (0
// for an http(s) URL).
func checkImageURL(param, u string) (int, *InvalidRequest) {
	if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		return 0, nil
	}
	mt, data, ok := parseDataURL(u)
	if !ok || !slices.Contains(imageTypes, mt) {
		return 0, &InvalidRequest{Message: fmt.Sprintf("Invalid image URL: '%s'. Expected a URL or a base64-encoded data URL with an image MIME type of %s, but got '%s'.", param, quoteList(imageTypes), truncateValue(u)),
			Param: param, Code: "invalid_value"}
	}
	return len(data), nil
}

// checkFilePart: file_data (a base64 data URL of a PDF) or file_id.
func checkFilePart(param string, f *FilePart) *InvalidRequest {
	switch {
	case f.FileData == nil && f.FileID == nil:
		return &InvalidRequest{Message: fmt.Sprintf("Missing required parameter: one of '%s.file_data' or '%s.file_id'.", param, param), Param: param, Code: "missing_required_parameter"}
	case f.FileData != nil && f.FileID != nil:
		return &InvalidRequest{Message: fmt.Sprintf("Invalid '%s': 'file_data' and 'file_id' are mutually exclusive.", param), Param: param, Code: "invalid_value"}
	case f.FileData != nil:
		if mt, _, ok := parseDataURL(*f.FileData); !ok || mt != "application/pdf" {
			return &InvalidRequest{Message: fmt.Sprintf("Invalid file data: '%s.file_data'. Expected a base64-encoded data URL with an application/pdf MIME type (the Chat Completions API takes PDF files only), but got '%s'.", param, truncateValue(*f.FileData)),
				Param: param + ".file_data", Code: "invalid_value"}
		}
	}
	return nil
}

// parseDataURL parses "data:<media type>;base64,<data>".
func parseDataURL(u string) (mediaType string, data []byte, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", nil, false
	}
	head, b64, found := strings.Cut(rest, ",")
	mt, isB64 := strings.CutSuffix(head, ";base64")
	if !found || !isB64 {
		return "", nil, false
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", nil, false
	}
	return strings.ToLower(mt), data, true
}

func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = "'" + v + "'"
	}
	if len(q) <= 1 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + ", and " + q[len(q)-1]
}

func truncateValue(s string) string {
	if len(s) > 48 {
		return s[:48] + "..."
	}
	return s
}

// CheckTextOnly returns what a text-only model's server refuses in r: an
// image_url, input_audio or file part.
func CheckTextOnly(r *Request) *InvalidRequest {
	for i, m := range r.Messages {
		for j, p := range m.Parts {
			if p.Type != "text" && p.Type != "refusal" {
				return &InvalidRequest{Message: fmt.Sprintf("Invalid content type. %s is only supported by certain models.", p.Type),
					Param: fmt.Sprintf("messages.[%d].content.[%d].type", i, j), Code: "invalid_value"}
			}
		}
	}
	return nil
}
