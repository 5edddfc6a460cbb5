package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

func TestServe_StartsAndStopsOnSignal(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	a := &app{stdout: &bytes.Buffer{}, stderr: &stderr, isTTY: func(io.Writer) bool { return false }, now: time.Now}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		sc := &serveCmd{app: a, addr: "127.0.0.1:0", heartbeat: 10 * time.Second, logLevel: "warn", dataDir: t.TempDir(), ready: func(s string) { addr <- s }}
		done <- sc.run(ctx)
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case err := <-done:
		t.Fatalf("serve ended before it listened: %v\n%s", err, stderr.String())
	}
	body, _ := json.Marshal(messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 2, Tokens: 2}})
	resp, err := http.Post(base+"/api/v1/runs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var rc messages.RunCreated
	if err := json.NewDecoder(resp.Body).Decode(&rc); err != nil || resp.StatusCode != 201 {
		t.Fatalf("POST = %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	stream, err := http.Get(rc.StreamURL)
	if err != nil {
		t.Fatal(err)
	}
	sbody, err := skipSSERetry(stream.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := testkit.NewSSEReader(sbody)
	for {
		f, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if f.Event == string(messages.RunFinished) {
			break
		}
	}
	cancel() // SIGINT
	for {
		f, err := r.Next()
		if err != nil {
			t.Fatalf("stream ended without its final frame: %v", err)
		}
		if f.Event == "stream_closed" {
			break
		}
	}
	stream.Body.Close()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v, stderr:\n%s", err, stderr.String())
	}
}

func TestServe_RefusesOpenAddressWithoutTokens(t *testing.T) {
	t.Setenv("CONCLAVE_TOKENS", "")
	var stdout, stderr bytes.Buffer
	a := &app{stdout: &stdout, stderr: &stderr, isTTY: func(io.Writer) bool { return false }, now: time.Now}
	if c := execute(context.Background(), a, []string{"serve", "--addr", "0.0.0.0:0", "--data", t.TempDir()}); c != exitUsage {
		t.Fatalf("exit %d, want %d", c, exitUsage)
	}
	if !strings.Contains(stderr.String(), "without tokens") {
		t.Fatalf("stderr = %q", stderr.String())
	}
}

// closeFailing is a journal whose Close fails.
type closeFailing struct{ *journal.Memory }

func (closeFailing) Close() error { return errors.New("disk gone") }

func TestServe_CloseJournalFailureFails(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	var err error
	closeJournal(closeFailing{journal.NewMemory()}, logger, &err)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitFailed || !strings.Contains(err.Error(), "disk gone") {
		t.Fatalf("closeJournal = %v; want an exit-1 failure", err)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "disk gone") {
		t.Fatalf("not logged: %s", logs.String())
	}
	earlier := failure(errors.New("first"))
	err = earlier
	closeJournal(closeFailing{journal.NewMemory()}, logger, &err)
	if err != earlier {
		t.Fatalf("closeJournal replaced the earlier error with %v", err)
	}
	err = nil
	closeJournal(journal.NewMemory(), logger, &err)
	if err != nil {
		t.Fatalf("closeJournal of a healthy journal = %v", err)
	}
}

func TestServe_MemoryShutdownLog(t *testing.T) {
	t.Parallel()
	var stderr testkit.LockedBuffer
	a := &app{stdout: &bytes.Buffer{}, stderr: &stderr, isTTY: func(io.Writer) bool { return false }, now: time.Now}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		sc := &serveCmd{app: a, addr: "127.0.0.1:0", heartbeat: 10 * time.Second, logLevel: "info", memory: true, ready: func(string) { cancel() }}
		done <- sc.run(ctx)
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "ending live runs with run_error interrupted") {
		t.Fatalf("the in-memory server's shutdown log does not say that runs end:\n%s", stderr.String())
	}
}

// TestServe_Dashboard checks that conclave serve serves the embedded
// dashboard at "/" and its assets with their content types, while unknown
// API paths keep the API's JSON 404.
func TestServe_Dashboard(t *testing.T) {
	t.Parallel()
	a := &app{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, isTTY: func(io.Writer) bool { return false }, now: time.Now}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		sc := &serveCmd{app: a, addr: "127.0.0.1:0", heartbeat: 10 * time.Second, logLevel: "warn", memory: true, ready: func(s string) { addr <- s }}
		done <- sc.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(10 * time.Second):
		t.Fatal("conclave serve did not start within 10 s")
	}
	get := func(path string) (int, string, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	for _, tc := range []struct{ path, ctype, contains string }{
		{"/", "text/html; charset=utf-8", `<script type="module" src="js/main.js">`},
		{"/js/main.js", "text/javascript; charset=utf-8", "import"},
		{"/js/layout-worker.js", "text/javascript; charset=utf-8", "dagre"},
		{"/vendor/dagre.esm.js", "text/javascript; charset=utf-8", "export{"},
		{"/app.css", "text/css; charset=utf-8", "data-node-state"},
	} {
		code, ctype, body := get(tc.path)
		if code != http.StatusOK || ctype != tc.ctype || !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s = %d %q (%d bytes), want 200 %q containing %q", tc.path, code, ctype, len(body), tc.ctype, tc.contains)
		}
	}
	for _, path := range []string{"/api/v1/nope", "/api/v1/runs/missing", "/nope.js", "/index.html/x", "/api"} {
		code, ctype, body := get(path)
		if code != http.StatusNotFound || ctype != "application/json" || !strings.Contains(body, `"code":"not_found"`) {
			t.Errorf("GET %s = %d %q %s, want the API's JSON 404", path, code, ctype, body)
		}
	}
	resp, err := http.Post(base+"/", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST / = %d, want 404", resp.StatusCode)
	}
}

// TestServe_AllowFileURL: serve --allow-file-url PREFIX (and
// --allow-file-url-addr for the local file server) fetches a run's file by
// URL before the run starts, into run_started; a URL under no prefix is
// 422 file_url_not_allowed, and one on a private address not allowed is
// 422 file_fetch_failed (the address guard).
func TestServe_AllowFileURL(t *testing.T) {
	t.Parallel()
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/markdown")
		_, _ = io.WriteString(w, "# Brief from "+r.URL.Path)
	}))
	defer files.Close()
	start := func(prefixes, addrs []string) string {
		var stderr bytes.Buffer
		a := &app{stdout: &bytes.Buffer{}, stderr: &stderr, isTTY: func(io.Writer) bool { return false }, now: time.Now}
		ctx, cancel := context.WithCancel(context.Background())
		addr := make(chan string, 1)
		done := make(chan error, 1)
		sc := &serveCmd{app: a, addr: "127.0.0.1:0", heartbeat: 10 * time.Second, logLevel: "warn", memory: true, ready: func(s string) { addr <- s },
			fileURLs: prefixes, fileURLAddrs: addrs} // --allow-file-url, --allow-file-url-addr
		go func() { done <- sc.run(ctx) }()
		t.Cleanup(func() {
			cancel()
			<-done
		})
		select {
		case s := <-addr:
			return "http://" + s
		case err := <-done:
			t.Fatalf("serve ended before it listened: %v\n%s", err, stderr.String())
		}
		return ""
	}
	post := func(base, url string) (int, []byte) {
		body, _ := json.Marshal(messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, Tokens: 2},
			Files: []messages.InputFile{{Name: "brief.md", URL: url}}})
		resp, err := http.Post(base+"/api/v1/runs", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	hostPort := strings.TrimPrefix(files.URL, "http://")
	base := start([]string{files.URL + "/pub/"}, []string{hostPort})
	code, b := post(base, files.URL+"/pub/brief.md")
	if code != http.StatusCreated {
		t.Fatalf("allowed URL: %d %s", code, b)
	}
	var rc messages.RunCreated
	if err := json.Unmarshal(b, &rc); err != nil {
		t.Fatal(err)
	}
	events, err := readStream(t, rc.StreamURL+"&until=run_end&run_id="+string(rc.RunID))
	if err != nil {
		t.Fatal(err)
	}
	st := events[0].Payload.(*messages.RunStartedPayload)
	if len(st.Files) != 1 || string(st.Files[0].Data) != "# Brief from /pub/brief.md" || st.Files[0].URL != files.URL+"/pub/brief.md" {
		t.Fatalf("run_started files %+v", st.Files)
	}
	if code, b := post(base, files.URL+"/secret.md"); code != http.StatusUnprocessableEntity || !strings.Contains(string(b), "file_url_not_allowed") {
		t.Errorf("URL under no prefix: %d %s", code, b)
	}
	guarded := start([]string{files.URL + "/pub/"}, nil)
	if code, b := post(guarded, files.URL+"/pub/brief.md"); code != http.StatusUnprocessableEntity || !strings.Contains(string(b), "file_fetch_failed") || !strings.Contains(string(b), "loopback") {
		t.Errorf("loopback without --allow-file-url-addr: %d %s", code, b)
	}
}

// readStream reads an SSE stream that ends (until=run_end) into envelopes.
func readStream(t *testing.T, url string) ([]*messages.Envelope, error) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := skipSSERetry(resp.Body)
	if err != nil {
		return nil, err
	}
	r := testkit.NewSSEReader(body)
	var out []*messages.Envelope
	for {
		f, err := r.Next()
		if err != nil {
			return out, nil // the stream ended
		}
		if f.Data == "" || f.Event == "" || !messages.EventType(f.Event).Known() {
			continue
		}
		env := new(messages.Envelope)
		if err := json.Unmarshal([]byte(f.Data), env); err != nil {
			return nil, err
		}
		out = append(out, env)
	}
}

// TestServeCmd_FileFetcher: the --allow-file-url flags' mistakes.
func TestServeCmd_FileFetcher(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prefixes, addrs []string
		want            string
	}{
		{nil, []string{"127.0.0.1:80"}, "--allow-file-url-addr needs --allow-file-url"},
		{[]string{"https://files.example/"}, []string{"localhost"}, `invalid --allow-file-url-addr "localhost"`},
		{[]string{"ftp://files.example/"}, nil, "--allow-file-url: "},
	} {
		sc := &serveCmd{fileURLs: tc.prefixes, fileURLAddrs: tc.addrs}
		if _, err := sc.fileFetcher(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: %v, want %q", tc.prefixes, tc.addrs, err, tc.want)
		}
	}
	if f, err := (&serveCmd{}).fileFetcher(); f != nil || err != nil {
		t.Errorf("no flags: %v, %v; want no fetcher", f, err)
	}
}
