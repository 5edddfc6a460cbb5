package fetch_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/tool/fetch"
)

func newFiles(t *testing.T, cfg fetch.FilesConfig) *fetch.Files {
	t.Helper()
	f, err := fetch.NewFiles(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func fileCode(err error) messages.FileErrorCode {
	var fe *messages.FileError
	if errors.As(err, &fe) {
		return fe.Code
	}
	return ""
}

// TestFiles_FetchFile: a file under an allowed prefix is fetched with its
// declared type; one outside every prefix, a redirect out of them, a dot
// segment and a body over max are refused with their codes.
func TestFiles_FetchFile(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/pub/a.txt", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("hello"))
	})
	mux.HandleFunc("/pub/big.txt", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush() // no Content-Length: the limit is met while reading
		_, _ = w.Write([]byte(strings.Repeat("x", 100)))
	})
	mux.HandleFunc("/pub/out", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/secret.txt", http.StatusFound) })
	mux.HandleFunc("/pub/in", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/pub/a.txt", http.StatusFound) })
	mux.HandleFunc("/secret.txt", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("secret")) })
	mux.HandleFunc("/pub/gone", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	f := newFiles(t, fetch.FilesConfig{Prefixes: []string{srv.URL + "/pub/"}, Allow: []netip.AddrPort{addrPort(t, srv)}})
	ctx := context.Background()

	data, mt, err := f.FetchFile(ctx, srv.URL+"/pub/a.txt", 1024)
	if err != nil || string(data) != "hello" || mt != "text/plain; charset=utf-8" {
		t.Fatalf("allowed: %q %q %v", data, mt, err)
	}
	if data, _, err := f.FetchFile(ctx, srv.URL+"/pub/in", 1024); err != nil || string(data) != "hello" {
		t.Fatalf("redirect within the prefix: %q %v", data, err)
	}
	for _, tc := range []struct {
		url  string
		max  int64
		code messages.FileErrorCode
	}{
		{srv.URL + "/secret.txt", 1024, messages.FileURLNotAllowed},
		{srv.URL + "/pub/out", 1024, messages.FileURLNotAllowed},
		{srv.URL + "/pub/../secret.txt", 1024, messages.FileURLNotAllowed},
		{srv.URL + "/pub/a.txt", 4, messages.FileTooLarge},
		{srv.URL + "/pub/big.txt", 50, messages.FileTooLarge},
		{"ftp://x.example/pub/a", 1024, messages.FileInvalid},
		{srv.URL + "/pub/gone", 1024, ""}, // a plain error: file_fetch_failed
	} {
		_, _, err := f.FetchFile(ctx, tc.url, tc.max)
		if err == nil || fileCode(err) != tc.code {
			t.Errorf("%s (max %d): %v, want code %q", tc.url, tc.max, err, tc.code)
		}
	}
}

// TestFiles_Guard: an allowed prefix does not lift the address guard: a
// loopback server is refused unless allowed by address.
func TestFiles_Guard(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("x")) }))
	defer srv.Close()
	f := newFiles(t, fetch.FilesConfig{Prefixes: []string{srv.URL}, Timeout: 5 * time.Second})
	_, _, err := f.FetchFile(context.Background(), srv.URL+"/a.txt", 10)
	if !errors.Is(err, fetch.ErrRefusedAddress) {
		t.Fatalf("loopback: %v, want ErrRefusedAddress", err)
	}
}

// TestNewFiles_Prefixes: a prefix without a path stands for its origin
// only (not a longer host name); bad prefixes are refused.
func TestNewFiles_Prefixes(t *testing.T) {
	t.Parallel()
	f := newFiles(t, fetch.FilesConfig{Prefixes: []string{"https://files.example"}, Resolver: fakeResolver{}})
	_, _, err := f.FetchFile(context.Background(), "https://files.example.evil/a.txt", 10)
	if fileCode(err) != messages.FileURLNotAllowed {
		t.Fatalf("longer host: %v", err)
	}
	for _, p := range []string{"", "ftp://x.example/", "https://x.example/?q=1", "/relative"} {
		var prefixes []string
		if p != "" {
			prefixes = []string{p}
		}
		if _, err := fetch.NewFiles(fetch.FilesConfig{Prefixes: prefixes}); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
}
