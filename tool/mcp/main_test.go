package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// The stdio tests run this test binary as the MCP server: with
// serverModeEnv set, TestMain serves testServer over stdin and stdout
// (serveStdio) instead of running the tests.
const (
	serverModeEnv = "CONCLAVE_TEST_MCP_SERVER"
	modeServe     = "serve" // serve the tools over stdio
	modeExit      = "exit"  // say something on stderr and exit 2 (a server that cannot start)
)

func TestMain(m *testing.M) {
	switch os.Getenv(serverModeEnv) {
	case modeServe:
		os.Exit(serveStdio())
	case modeExit:
		fmt.Fprintln(os.Stderr, "no configuration found")
		os.Exit(2)
	}
	goleak.VerifyTestMain(m)
}

// serveStdio serves testServer over stdin and stdout until stdin ends.
func serveStdio() int {
	srv := testServer(func(ctx context.Context) {
		fmt.Fprintln(os.Stderr, blockStarted) // the client logs our stderr: the test waits for this line
	}, func() {
		fmt.Fprintln(os.Stderr, "crashing")
		os.Exit(3)
	})
	if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

// blockStarted is what the block tool says when a call starts.
const blockStarted = "block started"

type echoArgs struct {
	Message string `json:"message" jsonschema:"the text to echo"`
}

type bigArgs struct {
	Bytes int `json:"bytes"`
}

type noArgs struct{}

// testServer is an MCP server built with the SDK, served over stdio by a
// child process and over streamable HTTP by httptest. Its tools:
//
//   - echo {message}: "echo: <message>" (read-only: low risk);
//   - links: a text, two resource links and an embedded resource;
//   - fail: an isError result "it broke";
//   - wipe: "wiped" (destructive: high risk);
//   - plain: "plain" (no annotations: medium risk);
//   - big {bytes}: that many 'x';
//   - env: its environment (the tests of what a stdio server inherits);
//   - block: calls started, then blocks until its call is cancelled;
//   - crash (when crash is not nil): calls crash;
//   - "bad name!", "bad_name_" and a 70-byte name: names tool.Set would refuse.
func testServer(started func(context.Context), crash func()) *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "conclave-test", Version: "1"}, nil)
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echoes its message.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in echoArgs) (*sdk.CallToolResult, any, error) {
			return text("echo: " + in.Message), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "links", Description: "Returns links."},
		func(context.Context, *sdk.CallToolRequest, noArgs) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "two pages"},
				&sdk.ResourceLink{URI: "https://example.org/a", Name: "a", Title: "Page A"},
				&sdk.ResourceLink{URI: "https://example.org/b", Name: "b"},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "https://example.org/c", MIMEType: "text/plain", Text: "embedded text"}},
			}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "fail", Description: "Fails."},
		func(context.Context, *sdk.CallToolRequest, noArgs) (*sdk.CallToolResult, any, error) {
			return nil, nil, errors.New("it broke")
		})
	destructive := true
	sdk.AddTool(srv, &sdk.Tool{Name: "wipe", Annotations: &sdk.ToolAnnotations{DestructiveHint: &destructive}},
		func(context.Context, *sdk.CallToolRequest, noArgs) (*sdk.CallToolResult, any, error) {
			return text("wiped"), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "plain", Title: "Plain tool"},
		func(context.Context, *sdk.CallToolRequest, noArgs) (*sdk.CallToolResult, any, error) {
			return text("plain"), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "big", Description: "Returns bytes of x."},
		func(_ context.Context, _ *sdk.CallToolRequest, in bigArgs) (*sdk.CallToolResult, any, error) {
			return text(strings.Repeat("x", in.Bytes)), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "env", Description: "Lists its environment, NAME=VALUE a line, sorted."},
		func(context.Context, *sdk.CallToolRequest, noArgs) (*sdk.CallToolResult, any, error) {
			env := os.Environ()
			slices.Sort(env)
			return text(strings.Join(env, "\n")), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "progress", Description: "Reports its progress three times, when asked to."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ noArgs) (*sdk.CallToolResult, any, error) {
			token := req.Params.GetProgressToken()
			if token == nil {
				return text("no progress token"), nil, nil
			}
			for i := 1; i <= 3; i++ {
				if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
					ProgressToken: token, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)}); err != nil {
					return nil, nil, err
				}
			}
			// A token that is not the call's: the client drops it.
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: "other", Progress: 9})
			return text("reported"), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "block", Description: "Blocks until cancelled."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ noArgs) (*sdk.CallToolResult, any, error) {
			started(ctx)
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	if crash != nil {
		sdk.AddTool(srv, &sdk.Tool{Name: "crash", Description: "Kills the server."},
			func(context.Context, *sdk.CallToolRequest, noArgs) (*sdk.CallToolResult, any, error) {
				crash()
				return nil, nil, nil
			})
	}
	for _, name := range []string{"bad name!", "bad_name_", strings.Repeat("long", 17) + "xy"} {
		sdk.AddTool(srv, &sdk.Tool{Name: name},
			func(context.Context, *sdk.CallToolRequest, noArgs) (*sdk.CallToolResult, any, error) {
				return text(name), nil, nil
			})
	}
	return srv
}
