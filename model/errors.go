package model

import (
	"errors"

	"github.com/conclave-ai/conclave/messages"
)

// Code is the stable class of a model failure, as the failure events carry
// it (messages.ModelErrorCode).
type Code = messages.ModelErrorCode

// Codes of Error.
const (
	// CodeTimeout: the model was silent longer than the idle timeout, or
	// its turn outlasted the turn deadline (WithTimeouts).
	CodeTimeout = messages.ModelErrTimeout
	// CodeTurnLimit: the agent used its maximum of model turns.
	CodeTurnLimit = messages.ModelErrTurnLimit
	// The classes of a model server's failures (messages.ModelErr*).
	CodeUnreachable     = messages.ModelErrUnreachable
	CodeAuth            = messages.ModelErrAuth
	CodeRateLimited     = messages.ModelErrRateLimited
	CodeBadRequest      = messages.ModelErrBadRequest
	CodeContextTooLong  = messages.ModelErrContextTooLong
	CodeContentFiltered = messages.ModelErrContentFiltered
	CodeServerError     = messages.ModelErrServerError
	CodeMalformedStream = messages.ModelErrMalformedStream
	CodeUnavailable     = messages.ModelErrUnavailable
)

// Error is a model failure with a stable Code. It matches ErrModel under
// errors.Is, and its cause, if any, too. It is not ErrTransient: the agent
// fails at once.
type Error struct {
	Code    Code
	Message string // for people: what happened, with the bound that was hit
	Err     error  // the cause, or nil
}

func (e *Error) Error() string {
	s := "model: " + string(e.Code) + ": " + e.Message
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrModel and the cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrModel}
	}
	return []error{ErrModel, e.Err}
}

// CodeOf returns the Code of the first *Error in err's tree, "" if none.
func CodeOf(err error) Code {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return ""
}
