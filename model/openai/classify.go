package openai

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"

	oa "github.com/openai/openai-go/v3"

	"github.com/conclave-ai/conclave/model"
)

// failure is what a failed attempt (before the first chunk) was.
type failure struct {
	code      model.Code
	detail    string // upstream's own words, or the transport's
	retryable bool
	// down: a failure of the endpoint itself (unreachable, 5xx), which
	// the circuit breaker counts.
	down bool
}

// classify sorts a failed attempt's error into its class (issue 29): what
// the failure event says, and whether another attempt may help.
func classify(err error) failure {
	var apiErr *oa.Error
	if errors.As(err, &apiErr) {
		f := failure{detail: upstreamText(apiErr)}
		low := strings.ToLower(apiErr.Code + " " + apiErr.Type + " " + apiErr.Message)
		switch c := apiErr.StatusCode; {
		case c == http.StatusUnauthorized || c == http.StatusForbidden:
			f.code = model.CodeAuth
		case c == http.StatusTooManyRequests:
			f.code, f.retryable = model.CodeRateLimited, true
		case c == http.StatusRequestTimeout:
			f.code, f.retryable = model.CodeTimeout, true
		case c == http.StatusConflict: // OpenAI's "retry this request" conflicts
			f.code, f.retryable = model.CodeServerError, true
		case c >= 500:
			f.code, f.retryable, f.down = model.CodeServerError, true, true
		case strings.Contains(low, "context_length") || strings.Contains(low, "context length") ||
			strings.Contains(low, "context window") || strings.Contains(low, "too many tokens") || strings.Contains(low, "maximum context"):
			f.code = model.CodeContextTooLong
		case strings.Contains(low, "content_filter") || strings.Contains(low, "content management policy") || strings.Contains(low, "content_policy"):
			f.code = model.CodeContentFiltered
		default:
			f.code = model.CodeBadRequest
		}
		return f
	}
	switch {
	case errors.Is(err, errEmpty), errors.Is(err, model.ErrModel):
		return failure{code: model.CodeMalformedStream, detail: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return failure{code: model.CodeTimeout, detail: err.Error(), retryable: true}
	case isDial(err):
		return failure{code: model.CodeUnreachable, detail: err.Error(), retryable: true, down: true}
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		// The connection dropped before the first chunk.
		return failure{code: model.CodeServerError, detail: err.Error(), retryable: true, down: true}
	}
	return failure{code: model.CodeServerError, detail: err.Error()}
}

// isDial reports whether err is a failure to reach the server at all:
// refused, DNS, no route.
func isDial(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED)
}

// upstreamText is the server's message, with its status.
func upstreamText(e *oa.Error) string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	return http.StatusText(e.StatusCode) + " (" + strconv.Itoa(e.StatusCode) + "): " + msg
}
