// Package fetch is the built-in fetch tool: an HTTP GET of a URL, its
// response reduced to text (HTML to readable text), the URL a citation
// source. It refuses, at connect time, loopback, private, link-local,
// multicast and CGNAT addresses unless configured otherwise (see
// Refused), and bounds the response's size, the call's time and the
// redirects it follows.
package fetch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/tool"
)

// Name is the tool's name.
const Name = "fetch"

// Defaults of Config's limits.
const (
	// DefaultMaxBytes bounds the bytes read of a response: enough for a
	// long article's HTML, small enough to hold in memory per call.
	DefaultMaxBytes = 2 << 20
	// DefaultMaxText bounds the text a call returns (about 16k tokens):
	// what a model can usefully read of one page in a turn.
	DefaultMaxText = 64 << 10
	// DefaultTimeout bounds a call: connect, redirects and body.
	DefaultTimeout = 20 * time.Second
	// DefaultMaxRedirects bounds the redirects a call follows.
	DefaultMaxRedirects = 5
)

// Config configures the fetch tool. The zero value is valid: the limits'
// defaults, the system resolver, private addresses refused.
type Config struct {
	// AllowPrivate lets the tool connect to any address: for tests and
	// development only (it lets a model reach the host's loopback, its
	// network and the cloud metadata service).
	AllowPrivate bool
	// Allow lists exact ip:port addresses the tool may connect to even
	// though they are refused otherwise (a local test server).
	Allow []netip.AddrPort
	// MaxBytes bounds the bytes read of a response (default
	// DefaultMaxBytes); the rest is not read and the result says so.
	MaxBytes int64
	// MaxText bounds the result's text in bytes (default DefaultMaxText);
	// a longer text is cut, with a note.
	MaxText int
	// Timeout bounds a call (default DefaultTimeout).
	Timeout time.Duration
	// MaxRedirects bounds the redirects followed (default
	// DefaultMaxRedirects; negative: none).
	MaxRedirects int
	// DefaultURL, when set, is the url argument's default in the schema:
	// what the scripted model fetches when a scenario's calls name fetch.
	DefaultURL string
	// Resolver resolves host names (default net.DefaultResolver).
	Resolver Resolver
	// Logger receives a line per call (default: discard).
	Logger *slog.Logger
}

// Tool is the fetch tool. It is safe for concurrent use.
type Tool struct {
	cfg    Config
	def    tool.Def
	client *http.Client
}

var _ tool.Tool = (*Tool)(nil)

// New returns the fetch tool configured by cfg.
func New(cfg Config) (*Tool, error) {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxText <= 0 {
		cfg.MaxText = DefaultMaxText
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxRedirects == 0 {
		cfg.MaxRedirects = DefaultMaxRedirects
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DefaultURL != "" {
		if _, err := checkURL(cfg.DefaultURL); err != nil {
			return nil, fmt.Errorf("fetch: default url: %w", err)
		}
	}
	tr := guardedTransport(guard{allowPrivate: cfg.AllowPrivate, allow: cfg.Allow}, cfg.Resolver, cfg.Timeout)
	t := &Tool{cfg: cfg}
	t.client = &http.Client{Transport: tr, CheckRedirect: t.checkRedirect}
	schema, err := t.schema()
	if err != nil {
		return nil, err
	}
	// Risk low: a GET reads; it sends no body, no cookies and no
	// credentials, and it cannot reach this host or its network. What it
	// can do is carry data out in the URL it is given (a prompt-injected
	// agent): a governance policy that cares can require approvals from
	// low on.
	t.def = tool.Def{
		Name:        Name,
		DisplayName: "Fetch",
		Description: "HTTP GET a web page or document (http or https) and return it as text: HTML reduced to readable text, " +
			"plain text and JSON as they are. The URL is cited as a source. Private and local addresses are refused.",
		Schema:  schema,
		Risk:    tool.RiskLow,
		Timeout: cfg.Timeout + 5*time.Second, // the call's own bound ends it first
	}
	return t, nil
}

func (t *Tool) schema() (json.RawMessage, error) {
	u := map[string]any{
		"type":        "string",
		"format":      "uri",
		"description": "the http or https URL to fetch",
		"examples":    []string{"https://example.org/"},
	}
	if t.cfg.DefaultURL != "" {
		u["default"] = t.cfg.DefaultURL
	}
	return json.Marshal(map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"url": u},
		"required":             []string{"url"},
		"additionalProperties": false,
	})
}

// guardedTransport connects only where g allows (checked at connect
// time, on the address dialled), never through a proxy, with timeout
// bounding the connection and the wait for the answer's headers.
func guardedTransport(g guard, r Resolver, timeout time.Duration) *http.Transport {
	d := &dialer{resolver: r, net: net.Dialer{Timeout: timeout, Control: g.check}}
	return &http.Transport{
		Proxy:                  nil, // never a proxy: the guard must see the real destination
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  timeout,
		MaxIdleConns:           16,
		IdleConnTimeout:        30 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// Def returns the tool's definition.
func (t *Tool) Def() tool.Def { return t.def }

// Close closes the tool's idle connections.
func (t *Tool) Close() { t.client.CloseIdleConnections() }

// checkURL parses an http or https URL with a host.
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("only http and https urls are fetched, not %q", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("the url has no host")
	}
	if u.User != nil {
		return nil, errors.New("urls with credentials are refused")
	}
	return u, nil
}

func (t *Tool) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > t.cfg.MaxRedirects {
		return fmt.Errorf("more than %d redirects", t.cfg.MaxRedirects)
	}
	if _, err := checkURL(req.URL.String()); err != nil {
		return fmt.Errorf("redirect to %s: %w", req.URL.Redacted(), err)
	}
	return nil
}

// Call fetches args.url.
func (t *Tool) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	var in struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return tool.Result{}, fmt.Errorf("%w: %v", tool.ErrInvalidArgs, err)
	}
	u, err := checkURL(in.URL)
	if err != nil {
		return tool.Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	page, err := t.get(ctx, u)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("fetch %s: no complete response within %s", u.Redacted(), t.cfg.Timeout)
		}
		t.cfg.Logger.Info("fetch", "url", u.Redacted(), "err", err)
		return tool.Result{}, err
	}
	t.cfg.Logger.Info("fetch", "url", u.Redacted(), "final", page.url, "bytes", page.read, "text", len(page.text))
	return tool.Result{Content: page.content(t.cfg.MaxText), Sources: []model.Source{{URL: page.url, Title: page.title}}}, nil
}

// page is a fetched response, as text.
type page struct {
	url, title, text string
	read             int
	truncated        bool // the response had more than MaxBytes
}

func (t *Tool) get(ctx context.Context, u *url.URL) (*page, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "conclave-fetch/1")
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,text/*;q=0.8")
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", u.Redacted(), unwrapURLError(err))
	}
	defer resp.Body.Close()
	final := resp.Request.URL.Redacted()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("fetch %s: HTTP %s", final, resp.Status)
	}
	// A declared content type is checked before the body is read.
	ct := resp.Header.Get("Content-Type")
	var kind textKind
	if ct != "" {
		if kind, err = kindOf(ct); err != nil {
			return nil, fmt.Errorf("fetch %s: %w", final, err)
		}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, t.cfg.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: reading the response: %w", final, err)
	}
	p := &page{url: final, read: len(body)}
	if int64(len(body)) > t.cfg.MaxBytes {
		body, p.truncated, p.read = body[:t.cfg.MaxBytes], true, int(t.cfg.MaxBytes)
	}
	if ct == "" {
		if kind, err = kindOf(http.DetectContentType(body)); err != nil {
			return nil, fmt.Errorf("fetch %s: %w", final, err)
		}
	}
	if kind == kindHTML {
		p.title, p.text = HTMLText(bytes.NewReader(body))
	} else {
		p.text = strings.ToValidUTF8(string(body), "\uFFFD")
	}
	return p, nil
}

// textKind is how a response becomes text.
type textKind int

const (
	kindText textKind = iota // as it is: text/*, JSON
	kindHTML                 // reduced to readable text
)

// kindOf is how a response of content type ct becomes text, or an error
// for a type that is not fetched.
func kindOf(ct string) (textKind, error) {
	mt, _, err := mime.ParseMediaType(ct)
	switch {
	case err != nil:
		return 0, fmt.Errorf("invalid content type %q", ct)
	case mt == "text/html" || mt == "application/xhtml+xml":
		return kindHTML, nil
	case strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return kindText, nil
	}
	return 0, fmt.Errorf("content type %s is not fetched (only text, HTML and JSON)", mt)
}

// unwrapURLError drops *url.Error's repetition of the method and URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// content is what the model reads: the URL, the title, the text, cut at
// max bytes with a note.
func (p *page) content(max int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "URL: %s\n", p.url)
	if p.title != "" {
		fmt.Fprintf(&b, "Title: %s\n", p.title)
	}
	b.WriteString("\n")
	text := p.text
	cut := len(text) > max
	if cut {
		n := max
		for n > 0 && !utf8.RuneStart(text[n]) { // back to a rune boundary
			n--
		}
		text = text[:n]
	}
	b.WriteString(text)
	if cut {
		fmt.Fprintf(&b, "\n\n[text cut at %d of %d bytes]", len(text), len(p.text))
	}
	if p.truncated {
		fmt.Fprintf(&b, "\n\n[response cut at %d bytes; the rest was not read]", p.read)
	}
	return b.String()
}
