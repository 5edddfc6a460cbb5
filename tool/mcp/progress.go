package mcp

import (
	"context"
	"strconv"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conclave-ai/conclave/tool"
)

// progressTokens are the progress tokens of the calls in flight that take
// progress reports (tool.WantsProgress), each mapped to its call's
// context. A server's notifications/progress with one of them becomes a
// report of that call (tool.ReportProgress); one with a token not (or no
// longer) in flight is dropped, as the MCP spec allows. The zero value is
// ready. Safe for concurrent use.
type progressTokens struct {
	mu    sync.Mutex // guards the fields below
	next  uint64
	calls map[string]context.Context
}

// add gives the call of ctx a new token; forget removes it (once the call
// has returned: later notifications are dropped).
func (p *progressTokens) add(ctx context.Context) (token string, forget func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls == nil {
		p.calls = make(map[string]context.Context)
	}
	p.next++
	token = "conclave-" + strconv.FormatUint(p.next, 10)
	p.calls[token] = ctx
	return token, func() {
		p.mu.Lock()
		delete(p.calls, token)
		p.mu.Unlock()
	}
}

// notified takes a server's notifications/progress. Tokens are ours, so
// strings; a number (which the spec also allows) is not one of them.
func (p *progressTokens) notified(n *sdk.ProgressNotificationParams) {
	token, ok := n.ProgressToken.(string)
	if !ok {
		return
	}
	p.mu.Lock()
	ctx := p.calls[token]
	p.mu.Unlock()
	if ctx != nil {
		tool.ReportProgress(ctx, n.Progress, n.Total, n.Message)
	}
}
