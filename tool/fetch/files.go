package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// DefaultFileTimeout bounds the fetch of one attached file: connect,
// redirects and body.
const DefaultFileTimeout = 15 * time.Second

// FilesConfig configures Files. Prefixes is required.
type FilesConfig struct {
	// Prefixes are the URL prefixes a run's files may be fetched from
	// (conclave serve --allow-file-url): absolute http or https URLs; one
	// without a path stands for its whole origin. A URL is allowed when
	// it starts with one of them, and so must every redirect be.
	Prefixes []string
	// AllowPrivate and Allow: as the fetch tool's (Config). By default
	// loopback, private, link-local and the like are refused at connect
	// time, whatever the prefixes say.
	AllowPrivate bool
	Allow        []netip.AddrPort
	// Timeout bounds one file's fetch (default DefaultFileTimeout).
	Timeout time.Duration
	// MaxRedirects bounds the redirects followed (default
	// DefaultMaxRedirects; negative: none).
	MaxRedirects int
	// Resolver resolves host names (default net.DefaultResolver).
	Resolver Resolver
}

// Files fetches the files runs attach by URL (actors.FileFetcher) from
// the operator's allowed prefixes only, through the fetch tool's address
// guard. It is safe for concurrent use.
type Files struct {
	cfg      FilesConfig
	prefixes []string // normalised: each ends its origin with at least "/"
	client   *http.Client
}

// NewFiles returns the file fetcher configured by cfg.
func NewFiles(cfg FilesConfig) (*Files, error) {
	if len(cfg.Prefixes) == 0 {
		return nil, errors.New("fetch: files: no allowed URL prefix")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultFileTimeout
	}
	if cfg.MaxRedirects == 0 {
		cfg.MaxRedirects = DefaultMaxRedirects
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	f := &Files{cfg: cfg}
	for _, p := range cfg.Prefixes {
		u, err := checkURL(p)
		if err != nil {
			return nil, fmt.Errorf("fetch: files: prefix %q: %w", p, err)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("fetch: files: prefix %q has a query or fragment", p)
		}
		if u.Path == "" {
			u.Path = "/" // an origin: "https://a.example" must not allow "https://a.example.evil/"
		}
		f.prefixes = append(f.prefixes, u.String())
	}
	tr := guardedTransport(guard{allowPrivate: cfg.AllowPrivate, allow: cfg.Allow}, cfg.Resolver, cfg.Timeout)
	f.client = &http.Client{Transport: tr, CheckRedirect: f.checkRedirect}
	return f, nil
}

// Close closes the fetcher's idle connections.
func (f *Files) Close() { f.client.CloseIdleConnections() }

// allowed reports whether u starts with an allowed prefix. A path with a
// dot segment is refused: the server would resolve it out of the prefix.
func (f *Files) allowed(u *url.URL) bool {
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	s := u.String()
	for _, p := range f.prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func (f *Files) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > f.cfg.MaxRedirects {
		return fmt.Errorf("more than %d redirects", f.cfg.MaxRedirects)
	}
	if !f.allowed(req.URL) {
		return &messages.FileError{Code: messages.FileURLNotAllowed, Problem: fmt.Sprintf("redirect to %s, which no allowed prefix covers", req.URL.Redacted())}
	}
	return nil
}

// FetchFile GETs raw if an allowed prefix covers it, reading at most max
// bytes of the body (a longer one is file_too_large), within the
// configured timeout.
func (f *Files) FetchFile(ctx context.Context, raw string, max int64) ([]byte, string, error) {
	u, err := messages.ParseFileURL(raw)
	if err != nil {
		return nil, "", &messages.FileError{Code: messages.FileInvalid, Problem: err.Error()}
	}
	if !f.allowed(u) {
		return nil, "", &messages.FileError{Code: messages.FileURLNotAllowed,
			Problem: fmt.Sprintf("url %s is under none of the prefixes this server allows (conclave serve --allow-file-url)", u.Redacted())}
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("User-Agent", "conclave-files/1")
	resp, err := f.client.Do(req)
	if err != nil {
		var fe *messages.FileError
		if errors.As(err, &fe) {
			return nil, "", fe
		}
		return nil, "", fmt.Errorf("fetch %s: %w", u.Redacted(), unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, "", fmt.Errorf("fetch %s: HTTP %s", resp.Request.URL.Redacted(), resp.Status)
	}
	if resp.ContentLength > max {
		return nil, "", &messages.FileError{Code: messages.FileTooLarge, Problem: fmt.Sprintf("%s is %d bytes, over the %d allowed", u.Redacted(), resp.ContentLength, max)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, "", fmt.Errorf("fetch %s: reading the response: %w", u.Redacted(), err)
	}
	if int64(len(body)) > max {
		return nil, "", &messages.FileError{Code: messages.FileTooLarge, Problem: fmt.Sprintf("%s is over the %d bytes allowed", u.Redacted(), max)}
	}
	return body, resp.Header.Get("Content-Type"), nil
}
