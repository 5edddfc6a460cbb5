// Package web is the dashboard that `conclave serve` serves at "/": a
// static page of plain JavaScript modules (no build step) and the
// libraries it vendors, embedded in the binary so that it works offline.
// The page talks to the server only through the documented API
// (docs/api.md): it holds no state on the server and needs no route of its
// own beyond its files.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// Files is the dashboard's files: index.html at the root, its modules
// under js/, styles and vendored libraries.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has "static"
	}
	return sub
}

// Handler serves the dashboard: "/" is index.html, any other path one of
// its files, with its content type by extension. It answers only GET and
// HEAD of files it has; everything else goes to notFound (the API's JSON
// 404, so that a mistyped API path is not answered with a page). Files
// are revalidated on every load (Cache-Control: no-cache), so a new
// binary's page is never mixed with an old one's modules.
func Handler(notFound http.Handler) http.Handler {
	files := Files()
	server := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			notFound.ServeHTTP(w, r)
			return
		}
		name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
		if name == "" {
			name = "index.html"
		}
		if st, err := fs.Stat(files, name); err != nil || st.IsDir() || name == "index.html" && r.URL.Path != "/" {
			notFound.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path = "/" + name
		if name == "index.html" {
			u.Path = "/" // FileServer redirects /index.html to ./
		}
		r2.URL = &u
		server.ServeHTTP(w, r2)
	})
}
