package a2a

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/transport/internal/httpjson"
)

// ErrorCode is a JSON-RPC error code: the standard ones and A2A's
// (spec §5.4, a2a.proto).
type ErrorCode int

// Error codes.
const (
	CodeParseError     ErrorCode = -32700
	CodeInvalidRequest ErrorCode = -32600
	CodeMethodNotFound ErrorCode = -32601
	CodeInvalidParams  ErrorCode = -32602
	CodeInternal       ErrorCode = -32603

	CodeTaskNotFound                 ErrorCode = -32001
	CodeTaskNotCancelable            ErrorCode = -32002
	CodePushNotificationNotSupported ErrorCode = -32003
	CodeUnsupportedOperation         ErrorCode = -32004
	CodeContentTypeNotSupported      ErrorCode = -32005
	CodeInvalidAgentResponse         ErrorCode = -32006
	CodeExtendedCardNotConfigured    ErrorCode = -32007
	CodeExtensionSupportRequired     ErrorCode = -32008
	CodeVersionNotSupported          ErrorCode = -32009

	// CodeQuotaExceeded is Conclave's (from JSON-RPC's server-defined
	// range; A2A 1.0 gives back-pressure no code): a tenant's quota
	// refused the request, and it may succeed later (HTTP 429 with
	// Retry-After). Its ErrorInfo has the domain QuotaDomain and the
	// quota's code as reason (TOO_MANY_RUNS, RATE_LIMITED,
	// TOO_MANY_STREAMS), with metadata retry_after_seconds.
	CodeQuotaExceeded ErrorCode = -32050
)

// QuotaDomain is the ErrorInfo domain of CodeQuotaExceeded.
const QuotaDomain = "conclave.quota"

// reason is the google.rpc.ErrorInfo reason A2A pairs with each code
// (the @a2a-js/sdk error specs); standard codes other than invalid params
// carry none.
func (c ErrorCode) reason() string {
	switch c {
	case CodeInvalidParams:
		return "INVALID_PARAMS"
	case CodeTaskNotFound:
		return "TASK_NOT_FOUND"
	case CodeTaskNotCancelable:
		return "TASK_NOT_CANCELABLE"
	case CodePushNotificationNotSupported:
		return "PUSH_NOTIFICATION_NOT_SUPPORTED"
	case CodeUnsupportedOperation:
		return "UNSUPPORTED_OPERATION"
	case CodeContentTypeNotSupported:
		return "CONTENT_TYPE_NOT_SUPPORTED"
	case CodeInvalidAgentResponse:
		return "INVALID_AGENT_RESPONSE"
	case CodeExtendedCardNotConfigured:
		return "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
	case CodeExtensionSupportRequired:
		return "EXTENSION_SUPPORT_REQUIRED"
	case CodeVersionNotSupported:
		return "VERSION_NOT_SUPPORTED"
	}
	return ""
}

// RPCError is a JSON-RPC error object. It implements error, so handlers
// return it and errors.As finds it.
type RPCError struct {
	Code    ErrorCode   `json:"code"`
	Message string      `json:"message"`
	Data    []ErrorInfo `json:"data,omitempty"`
	// status is the HTTP status of the answer when it is not the usual
	// one (200, or 500 for CodeInternal); retryAfter, when set, is sent
	// as Retry-After.
	status     int
	retryAfter time.Duration
}

// ErrorInfo is google.rpc.ErrorInfo, the detail A2A attaches to its errors.
type ErrorInfo struct {
	Type     string            `json:"@type"`
	Reason   string            `json:"reason"`
	Domain   string            `json:"domain"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("a2a: %s (%d)", e.Message, e.Code) }

// rpcErrorf builds an RPCError with its ErrorInfo.
func rpcErrorf(code ErrorCode, format string, args ...any) *RPCError {
	e := &RPCError{Code: code, Message: fmt.Sprintf(format, args...)}
	if r := code.reason(); r != "" {
		e.Data = []ErrorInfo{{Type: "type.googleapis.com/google.rpc.ErrorInfo", Reason: r, Domain: "a2a-protocol.org"}}
	}
	return e
}

// invalidParams reports a failure to decode params (or a part of them).
func invalidParams(what string, err error) *RPCError {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var unknown *messages.UnknownFieldError
	var utf *messages.InvalidUTF8Error
	switch {
	case errors.Is(err, messages.ErrEmptyJSON), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return rpcErrorf(CodeInvalidParams, "%s: a JSON object is required", what)
	case errors.As(err, &syn):
		return rpcErrorf(CodeInvalidParams, "%s: malformed JSON at byte %d: %v", what, syn.Offset, syn)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = what
		}
		return rpcErrorf(CodeInvalidParams, "%s: %s must be %s, not %s", what, field, httpjson.JSONKind(typ.Type), typ.Value)
	case errors.As(err, &unknown), errors.As(err, &utf):
		return rpcErrorf(CodeInvalidParams, "%s: %v", what, err)
	case errors.Is(err, messages.ErrTrailingData):
		return rpcErrorf(CodeInvalidParams, "%s: unexpected data after the JSON value", what)
	}
	return rpcErrorf(CodeInvalidParams, "%s: %s", what, strings.TrimPrefix(err.Error(), "json: "))
}

// quotaError is a refusal by a tenant's quota (code is the quota's, as
// REST names it): CodeQuotaExceeded, HTTP 429, Retry-After.
func quotaError(code, message string, retryAfter time.Duration) *RPCError {
	secs := max(int64((retryAfter+time.Second-1)/time.Second), 1)
	return &RPCError{Code: CodeQuotaExceeded, Message: code + ": " + message,
		Data: []ErrorInfo{{Type: "type.googleapis.com/google.rpc.ErrorInfo", Reason: strings.ToUpper(code), Domain: QuotaDomain,
			Metadata: map[string]string{"retry_after_seconds": strconv.FormatInt(secs, 10)}}},
		status: http.StatusTooManyRequests, retryAfter: time.Duration(secs) * time.Second}
}

// streamSlotError is the answer when the server's stream caps refuse a
// streaming call (StreamSlot): a quota refusal when the cap says when to
// retry, 503 otherwise.
func streamSlotError(err error) *RPCError {
	var e *httpjson.Error
	if errors.As(err, &e) && e.Status == http.StatusTooManyRequests {
		return quotaError(e.Code, e.Message, e.RetryAfter)
	}
	re := rpcErrorf(CodeInternal, "%v", err)
	re.status = http.StatusServiceUnavailable
	if e != nil {
		re.status, re.retryAfter = e.Status, e.RetryAfter
	}
	return re
}
