package tool

import (
	"context"

	"github.com/conclave-ai/conclave/messages"
)

// CallInfo names the call a Tool.Call serves: what a tool needs for an
// idempotency key, a log line, or (testkit/sim) a deterministic identity.
type CallInfo struct {
	Tenant  messages.TenantID // the run's owner (empty: none given)
	RunID   messages.RunID
	AgentID string
	CallID  string // the model's id of the call, unique within the agent's turn
	Index   int    // the call's position among the turn's calls (0-based)
	Attempt int    // the agent's attempt (1-based; grows when it is restarted)
	Turn    int    // the agent's turn that made the call (1-based)
}

type callInfoKey struct{}

// WithCallInfo returns ctx carrying c; the engine calls every tool with it.
func WithCallInfo(ctx context.Context, c CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, c)
}

// CallInfoFrom returns the CallInfo of ctx, if it has one.
func CallInfoFrom(ctx context.Context) (CallInfo, bool) {
	c, ok := ctx.Value(callInfoKey{}).(CallInfo)
	return c, ok
}
