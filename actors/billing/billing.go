// Package billing is the tenant budget pre-flight hook: before a run
// starts and before each model turn, a Checker may deny the tenant's
// spend, with insufficient_budget or tenant_suspended. HTTPChecker asks a
// billing service over HTTP (serve --billing-url), and decides what a
// failed check means (fail open: allow; fail closed: deny).
//
// Checks run off the actors' mailboxes: a run's start is checked on the
// caller's goroutine (Engine.StartRun), a turn's in the goroutine that
// streams the turn, before it calls the model.
package billing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// Stage is when a check is made.
type Stage string

const (
	StageRun  Stage = "run"  // before the run starts
	StageTurn Stage = "turn" // before one model turn
)

// Codes a Decision denies with: the run_error codes (and, for a start,
// the HTTP error codes) the denial is reported with.
const (
	CodeInsufficientBudget = messages.ErrCodeInsufficientBudget
	CodeTenantSuspended    = messages.ErrCodeTenantSuspended
)

// Request is what a check is asked about. It is the JSON body an
// HTTPChecker posts.
type Request struct {
	Stage  Stage             `json:"stage"`
	Tenant messages.TenantID `json:"tenant"`
	RunID  messages.RunID    `json:"run_id"`
	// Agent and Model name a turn's agent and its model (StageTurn).
	Agent string `json:"agent,omitempty"`
	Model string `json:"model,omitempty"`
	// SpentTokens and SpentUSD are what the run spent so far (0 at its
	// start); SpentUSD is absent when a model has no price.
	SpentTokens int64    `json:"spent_tokens"`
	SpentUSD    *float64 `json:"spent_usd,omitempty"`
	// EstimatedTokens and EstimatedUSD are the most the run may spend:
	// its budget (StageRun; absent without one, and for a turn).
	EstimatedTokens int64    `json:"estimated_tokens,omitempty"`
	EstimatedUSD    *float64 `json:"estimated_usd,omitempty"`
}

// Decision is a check's answer, and the JSON body an HTTPChecker expects
// back: {"allow": true} or {"allow": false, "code": "tenant_suspended",
// "reason": "..."}. A denial without a code is insufficient_budget.
type Decision struct {
	Allow  bool               `json:"allow"`
	Code   messages.ErrorCode `json:"code,omitempty"`
	Reason string             `json:"reason,omitempty"`
}

// Denied is the error of a denied check.
type Denied struct {
	Stage  Stage
	Code   messages.ErrorCode // CodeInsufficientBudget or CodeTenantSuspended
	Reason string
}

func (d *Denied) Error() string {
	return fmt.Sprintf("billing: %s denied (%s): %s", d.Stage, d.Code, d.Reason)
}

// Checker decides whether a tenant may spend. Implementations are safe
// for concurrent use; Check honours ctx.
type Checker interface {
	Check(ctx context.Context, r Request) (Decision, error)
}

// Gate runs a Checker and turns its answer into nil (allowed) or a
// *Denied: a denial without a known code is insufficient_budget, and a
// failed check (an error, a timeout) allows when FailOpen and denies with
// insufficient_budget otherwise. A nil Gate allows everything.
type Gate struct {
	Checker  Checker
	FailOpen bool
}

// Check asks the gate's checker about r.
func (g *Gate) Check(ctx context.Context, r Request) error {
	if g == nil || g.Checker == nil {
		return nil
	}
	d, err := g.Checker.Check(ctx, r)
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err() // the caller gave up: not the billing service's failure
	case err != nil && g.FailOpen:
		return nil
	case err != nil:
		return &Denied{Stage: r.Stage, Code: CodeInsufficientBudget, Reason: "the billing check failed and billing fails closed: " + err.Error()}
	case d.Allow:
		return nil
	}
	code := d.Code
	if code != CodeTenantSuspended {
		code = CodeInsufficientBudget
	}
	reason := d.Reason
	if reason == "" {
		reason = "denied by the billing service"
	}
	return &Denied{Stage: r.Stage, Code: code, Reason: reason}
}

// DefaultTimeout bounds one HTTP check when HTTPChecker.Timeout is 0.
const DefaultTimeout = 2 * time.Second

// maxAnswer bounds the body of a billing service's answer.
const maxAnswer = 64 << 10

// HTTPChecker POSTs each Request as JSON to URL and reads a Decision
// from a 200 answer. Any other status, a body that is not a Decision, a
// connection error or a check longer than Timeout is an error (the Gate's
// FailOpen decides what it means).
type HTTPChecker struct {
	URL     string
	Timeout time.Duration // default DefaultTimeout
	Client  *http.Client  // default http.DefaultClient
	// Header, when set, is added to every request (an Authorization).
	Header http.Header
}

var _ Checker = (*HTTPChecker)(nil)

// ErrStatus is the error of an answer that is not 200.
var ErrStatus = errors.New("billing: unexpected status")

// Check implements Checker.
func (c *HTTPChecker) Check(ctx context.Context, r Request) (Decision, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := json.Marshal(r)
	if err != nil {
		return Decision{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return Decision{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range c.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	client := c.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return Decision{}, fmt.Errorf("billing: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return Decision{}, fmt.Errorf("billing: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Decision{}, fmt.Errorf("%w %d", ErrStatus, resp.StatusCode)
	}
	var d Decision
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		return Decision{}, fmt.Errorf("billing: the answer is not a decision: %w", err)
	}
	return d, nil
}
