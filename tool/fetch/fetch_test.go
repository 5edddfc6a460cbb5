package fetch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/tool/fetch"
)

// fakeResolver resolves every name to its addresses (the injected DNS).
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

func addrPort(t *testing.T, srv *httptest.Server) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

func newTool(t *testing.T, cfg fetch.Config) *fetch.Tool {
	t.Helper()
	ft, err := fetch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ft.Close)
	return ft
}

func call(t *testing.T, ft *fetch.Tool, url string) (string, error) {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"url": url})
	res, err := ft.Call(t.Context(), args)
	return res.Content, err
}

func server(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func okHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, "secret of the local network")
}

func TestRefused(t *testing.T) {
	t.Parallel()
	refused := []string{"127.0.0.1", "127.1.2.3", "::1", "10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.1",
		"192.168.1.1", "169.254.169.254", "169.254.0.1", "fe80::1", "fc00::1", "fd12:3456::1", "0.0.0.0", "::",
		"0.1.2.3", "224.0.0.1", "ff02::1", "255.255.255.255", "100.64.0.1", "100.127.255.254",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1",
		"::7f00:1", "::a00:1", "2002:7f00:1::", "2002:a9fe:a9fe::1", "2002:c0a8:101::"}
	for _, s := range refused {
		if fetch.Refused(netip.MustParseAddr(s)) == "" {
			t.Errorf("Refused(%s) = \"\", want a reason", s)
		}
	}
	for _, s := range []string{"93.184.215.14", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1", "64:ff9b::808:808"} {
		if why := fetch.Refused(netip.MustParseAddr(s)); why != "" {
			t.Errorf("Refused(%s) = %q, want allowed", s, why)
		}
	}
}

func TestTool_Call_RefusesLocalAddresses(t *testing.T) {
	t.Parallel()
	srv := server(t, okHandler)
	port := addrPort(t, srv).Port()
	ft := newTool(t, fetch.Config{Resolver: fakeResolver{
		"loopback.test": {netip.MustParseAddr("127.0.0.1")},
		"private.test":  {netip.MustParseAddr("10.1.2.3")},
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
		"mapped.test":   {netip.MustParseAddr("::ffff:127.0.0.1")},
	}, Timeout: 5 * time.Second})
	for _, u := range []string{
		srv.URL,
		fmt.Sprintf("http://[::1]:%d/", port),
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", port),
		"http://10.0.0.1/",
		"http://169.254.169.254/latest/meta-data/",
		fmt.Sprintf("http://loopback.test:%d/", port),
		fmt.Sprintf("http://mapped.test:%d/", port),
		"http://private.test/",
		"http://metadata.test/latest/meta-data/",
	} {
		out, err := call(t, ft, u)
		if !errors.Is(err, fetch.ErrRefusedAddress) {
			t.Errorf("fetch %s = %q, %v; want ErrRefusedAddress", u, out, err)
		}
	}
}

func TestTool_Call_RefusesRedirectToLocal(t *testing.T) {
	t.Parallel()
	inner := server(t, okHandler)
	outer := server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	// Only the outer server is allowed, exactly by its ip:port.
	ft := newTool(t, fetch.Config{Allow: []netip.AddrPort{addrPort(t, outer)}, Resolver: fakeResolver{
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
	}, Timeout: 5 * time.Second})
	for _, to := range []string{inner.URL + "/", "http://169.254.169.254/latest/", "http://metadata.test/", "http://10.9.9.9/"} {
		out, err := call(t, ft, outer.URL+"/?to="+to)
		if !errors.Is(err, fetch.ErrRefusedAddress) {
			t.Errorf("redirect to %s = %q, %v; want ErrRefusedAddress", to, out, err)
		}
	}
	// The same redirect is followed when private addresses are allowed.
	open := newTool(t, fetch.Config{AllowPrivate: true})
	out, err := call(t, open, outer.URL+"/?to="+inner.URL+"/")
	if err != nil || !strings.Contains(out, "secret of the local network") {
		t.Fatalf("with AllowPrivate: %q, %v", out, err)
	}
}

func TestTool_Call_HTMLToText(t *testing.T) {
	t.Parallel()
	srv := server(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><title>The  Sky</title><style>body{color:red}</style>
<script>var tracking = 1;</script></head><body><nav><a href="/">Home</a> <a href="/x">Menu</a></nav>
<article><h1>Why the sky is blue</h1><p>Sunlight is <b>scattered</b> by
 molecules.</p><ul><li>Rayleigh</li><li>Mie</li></ul><pre>  keep   this</pre></article>
<footer>Copyright</footer><div hidden>invisible</div></body></html>`)
	})
	ft := newTool(t, fetch.Config{Allow: []netip.AddrPort{addrPort(t, srv)}})
	args, _ := json.Marshal(map[string]string{"url": srv.URL + "/sky"})
	res, err := ft.Call(t.Context(), args)
	if err != nil {
		t.Fatal(err)
	}
	want := "URL: " + srv.URL + "/sky\nTitle: The Sky\n\n# Why the sky is blue\nSunlight is scattered by molecules.\n- Rayleigh\n- Mie\n  keep   this"
	if res.Content != want {
		t.Errorf("content:\n%q\nwant\n%q", res.Content, want)
	}
	if len(res.Sources) != 1 || res.Sources[0].URL != srv.URL+"/sky" || res.Sources[0].Title != "The Sky" {
		t.Errorf("sources = %+v", res.Sources)
	}
}

func TestTool_Call_Limits(t *testing.T) {
	t.Parallel()
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, strings.Repeat("a", 5000))
		case "/slow":
			w.Header().Set("Content-Type", "text/plain")
			w.(http.Flusher).Flush()
			<-r.Context().Done() // until the client gives up
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/ftp":
			http.Redirect(w, r, "ftp://example.org/", http.StatusFound)
		case "/zip":
			w.Header().Set("Content-Type", "application/zip")
			fmt.Fprint(w, "PK")
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"a":1}`)
		case "/sniff": // no Content-Type: sniffed from the body
			w.Header()["Content-Type"] = nil
			fmt.Fprint(w, "<html><body><p>sniffed</p><script>x()</script></body></html>")
		case "/404":
			http.NotFound(w, r)
		}
	})
	allow := []netip.AddrPort{addrPort(t, srv)}

	small := newTool(t, fetch.Config{Allow: allow, MaxBytes: 1000, MaxText: 100})
	out, err := call(t, small, srv.URL+"/big")
	if err != nil || !strings.Contains(out, "[text cut at 100 of 1000 bytes]") || !strings.Contains(out, "[response cut at 1000 bytes") ||
		!strings.Contains(out, strings.Repeat("a", 100)) || strings.Contains(out, strings.Repeat("a", 101)) {
		t.Errorf("big: %q, %v", out, err)
	}
	if out, err := call(t, small, srv.URL+"/json"); err != nil || !strings.HasSuffix(out, `{"a":1}`) {
		t.Errorf("json: %q, %v", out, err)
	}
	if out, err := call(t, small, srv.URL+"/sniff"); err != nil || !strings.HasSuffix(out, "\n\nsniffed") {
		t.Errorf("sniff: %q, %v", out, err)
	}
	if _, err := call(t, small, srv.URL+"/zip"); err == nil || !strings.Contains(err.Error(), "content type application/zip is not fetched") {
		t.Errorf("zip: %v", err)
	}
	if _, err := call(t, small, srv.URL+"/404"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("404: %v", err)
	}
	if _, err := call(t, small, srv.URL+"/ftp"); err == nil || !strings.Contains(err.Error(), "only http and https") {
		t.Errorf("ftp redirect: %v", err)
	}
	if _, err := call(t, small, "file:///etc/passwd"); err == nil || !strings.Contains(err.Error(), "only http and https") {
		t.Errorf("file url: %v", err)
	}

	redirects := newTool(t, fetch.Config{Allow: allow, MaxRedirects: 3})
	if _, err := call(t, redirects, srv.URL+"/loop"); err == nil || !strings.Contains(err.Error(), "more than 3 redirects") {
		t.Errorf("loop: %v", err)
	}

	slow := newTool(t, fetch.Config{Allow: allow, Timeout: 200 * time.Millisecond})
	start := time.Now()
	if _, err := call(t, slow, srv.URL+"/slow"); err == nil || !strings.Contains(err.Error(), "no complete response within 200ms") {
		t.Errorf("slow: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("slow call took %s", d)
	}
}

func TestNew_Schema(t *testing.T) {
	t.Parallel()
	ft := newTool(t, fetch.Config{DefaultURL: "https://example.org/doc"})
	d := ft.Def()
	if d.Name != "fetch" || d.Risk != "low" || !strings.Contains(string(d.Schema), `"default":"https://example.org/doc"`) {
		t.Errorf("def = %+v, schema %s", d, d.Schema)
	}
	if _, err := fetch.New(fetch.Config{DefaultURL: "gopher://x"}); err == nil {
		t.Error("a default url that is not http(s) is accepted")
	}
}
