package mcp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

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

// TestServers_StreamableHTTPRestart: an HTTP server that restarts loses
// its sessions; the call that finds out fails with ErrServerDied, and the
// server is connected again (a new session), after which calls work.
func TestServers_StreamableHTTPRestart(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		servers []*sdk.Server
		h       http.Handler
	)
	restart := func() {
		srv := testServer(func(context.Context) {}, nil)
		mu.Lock()
		defer mu.Unlock()
		servers = append(servers, srv)
		h = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	}
	restart()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		cur := h
		mu.Unlock()
		cur.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, srv := range servers {
			for ss := range srv.Sessions() {
				_ = ss.Close()
			}
		}
	})
	s := start(t, mcp.Config{Servers: []mcp.Spec{{Name: "web", URL: ts.URL}}, Logger: newLogRecorder(t).logger(),
		PingInterval: -1, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if _, err := call(t, s, "web.echo", `{"message":"one"}`); err != nil {
		t.Fatal(err)
	}
	restart()
	if _, err := call(t, s, "web.echo", `{"message":"two"}`); !errors.Is(err, mcp.ErrServerDied) {
		t.Fatalf("a call to the restarted server: %v, want ErrServerDied", err)
	}
	waitStatus(t, s, "web", func(st mcp.Status) bool { return st.Up && st.Restarts == 1 })
	if res, err := call(t, s, "web.echo", `{"message":"three"}`); err != nil || res.Content != "echo: three" {
		t.Fatalf("after the restart: %+v, %v", res, err)
	}
}
