package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conclave-ai/conclave/tool/mcp"
)

// TestServers_StreamableHTTP: a streamable HTTP server's tools are called
// by URL, their results converted as over stdio.
func TestServers_StreamableHTTP(t *testing.T) {
	t.Parallel()
	srv := testServer(func(context.Context) {}, nil)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(h)
	// Cleanups run last first: these after the Servers' Shutdown (start).
	t.Cleanup(func() {
		ts.Close()
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
	})
	sp, err := mcp.ParseSpec("web=" + ts.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, mcp.Config{Servers: []mcp.Spec{sp}, Logger: newLogRecorder(t).logger(), PingInterval: -1})
	if res, err := call(t, s, "web.echo", `{"message":"over http"}`); err != nil || res.Content != "echo: over http" {
		t.Errorf("echo: %+v, %v", res, err)
	}
	res, err := call(t, s, "web.links", `{}`)
	if err != nil || len(res.Sources) != 3 || res.Sources[0].URL != "https://example.org/a" {
		t.Errorf("links: %+v, %v", res, err)
	}
}
