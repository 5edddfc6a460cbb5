package web_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/web"
)

func TestHandler_ServesFilesAndFallsBack(t *testing.T) {
	t.Parallel()
	fallback := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "fallback", http.StatusTeapot) })
	h := web.Handler(fallback)
	for _, tc := range []struct {
		method, path string
		code         int
		ctype        string
	}{
		{http.MethodGet, "/", 200, "text/html; charset=utf-8"},
		{http.MethodHead, "/", 200, "text/html; charset=utf-8"},
		{http.MethodGet, "/js/state.js", 200, "text/javascript; charset=utf-8"},
		{http.MethodGet, "/vendor/LICENSE-dagre.txt", 200, "text/plain; charset=utf-8"},
		{http.MethodGet, "/js/", http.StatusTeapot, ""},          // no directory listings
		{http.MethodGet, "/index.html", http.StatusTeapot, ""},   // the page is only at /
		{http.MethodGet, "/missing.js", http.StatusTeapot, ""},   // unknown files
		{http.MethodPost, "/js/state.js", http.StatusTeapot, ""}, // GET and HEAD only
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.code || tc.ctype != "" && rec.Header().Get("Content-Type") != tc.ctype {
			t.Errorf("%s %s = %d %q, want %d %q", tc.method, tc.path, rec.Code, rec.Header().Get("Content-Type"), tc.code, tc.ctype)
		}
		if tc.code == 200 && !strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s %s has no Content-Security-Policy", tc.method, tc.path)
		}
	}
}

// TestFiles_ImportsResolve: every module the page loads imports only
// files that are embedded, so the page works offline (no CDN).
func TestFiles_ImportsResolve(t *testing.T) {
	t.Parallel()
	files := web.Files()
	imports := regexp.MustCompile(`(?m)(?:from|import)\s*\(?\s*"([^"]+)"|new URL\("([^"]+)"`)
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasPrefix(p, "js/") {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		for _, m := range imports.FindAllStringSubmatch(string(b), -1) {
			ref := m[1] + m[2]
			if !strings.HasPrefix(ref, "./") && !strings.HasPrefix(ref, "../") {
				t.Errorf("%s imports %q: only relative imports of embedded files", p, ref)
				continue
			}
			if _, err := fs.Stat(files, path.Join(path.Dir(p), ref)); err != nil {
				t.Errorf("%s imports %q, which is not embedded", p, ref)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEventTypes_Listed: the page listens to every event type of the
// catalogue (EventSource needs a listener per name; a missing one would
// leave a gap in the page's seqs).
func TestEventTypes_Listed(t *testing.T) {
	t.Parallel()
	src, err := fs.ReadFile(web.Files(), "js/state.js")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)export const EVENT_TYPES = \[(.*?)\];`).FindSubmatch(src)
	if m == nil {
		t.Fatal("js/state.js has no EVENT_TYPES list")
	}
	listed := map[string]bool{}
	for _, q := range regexp.MustCompile(`"([a-z_]+)"`).FindAllSubmatch(m[1], -1) {
		listed[string(q[1])] = true
	}
	for _, typ := range messages.EventTypes() {
		if !listed[string(typ)] {
			t.Errorf("js/state.js EVENT_TYPES lacks %s", typ)
		}
		delete(listed, string(typ))
	}
	for typ := range listed {
		t.Errorf("js/state.js EVENT_TYPES lists %s, which is no event type", typ)
	}
}
