package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP tasks (spec 2025-11-25): a server marks a tool it can only run as a
// task with execution.taskSupport "required"; a plain tools/call of it
// fails. Conclave does not implement MCP tasks, so such a tool is never
// offered to an agent. The SDK drops the execution member when it decodes
// a tool, so taskPeek reads it off the raw tools/list answers on their
// way to the SDK.

// taskPeek wraps a transport and records the tools its server's
// tools/list answers mark taskSupport "required".
type taskPeek struct {
	sdk.Transport
	mu       sync.Mutex
	required map[string]bool
}

func (t *taskPeek) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &peekConn{Connection: c, t: t}, nil
}

// needsTasks reports whether the server marked tool name taskSupport
// "required".
func (t *taskPeek) needsTasks(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.required[name]
}

type peekConn struct {
	sdk.Connection
	t *taskPeek
}

func (c *peekConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if r, ok := m.(*jsonrpc.Response); ok && bytes.Contains(r.Result, []byte(`"taskSupport"`)) {
		c.t.record(r.Result)
	}
	return m, err
}

// record notes the required-task tools of a result that lists tools.
func (t *taskPeek) record(result json.RawMessage) {
	var list struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution *struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &list) != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tl := range list.Tools {
		if tl.Execution != nil && tl.Execution.TaskSupport == "required" {
			if t.required == nil {
				t.required = map[string]bool{}
			}
			t.required[tl.Name] = true
		}
	}
}
