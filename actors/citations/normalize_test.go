package citations_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/actors/citations"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, raw, want string
	}{
		{"already normal", "https://example.com/a/b?x=1", "https://example.com/a/b?x=1"},
		{"lowercase scheme", "HTTPS://example.com/a", "https://example.com/a"},
		{"lowercase host", "https://Example.COM/a", "https://example.com/a"},
		{"path case kept", "https://example.com/A/B", "https://example.com/A/B"},
		{"http default port", "http://example.com:80/a", "http://example.com/a"},
		{"https default port", "https://example.com:443/a", "https://example.com/a"},
		{"https port on http kept", "http://example.com:443/a", "http://example.com:443/a"},
		{"http port on https kept", "https://example.com:80/a", "https://example.com:80/a"},
		{"other port kept", "http://example.com:8080/a", "http://example.com:8080/a"},
		{"port leading zeros", "http://example.com:0080/a", "http://example.com/a"},
		{"empty port", "http://example.com:/a", "http://example.com/a"},
		{"fragment dropped", "https://example.com/a#section-2", "https://example.com/a"},
		{"empty fragment dropped", "https://example.com/a#", "https://example.com/a"},
		{"userinfo dropped", "https://user:secret@example.com/a", "https://example.com/a"},
		{"user only dropped", "https://user@example.com/a", "https://example.com/a"},
		{"query sorted by key", "https://example.com/a?b=2&a=1&c=3", "https://example.com/a?a=1&b=2&c=3"},
		{"repeated keys kept and sorted by value", "https://example.com/?tag=z&tag=a&id=1&tag=m", "https://example.com?id=1&tag=a&tag=m&tag=z"},
		{"exact duplicate parameter kept", "https://example.com/?a=1&a=1", "https://example.com?a=1&a=1"},
		{"key without = kept, before a=", "https://example.com/?b&a=&a", "https://example.com?a&a=&b"},
		{"empty parameters dropped", "https://example.com/?a=1&&b=2&", "https://example.com?a=1&b=2"},
		{"? alone dropped", "https://example.com/a?", "https://example.com/a"},
		{"empty query with fragment", "https://example.com/a?#top", "https://example.com/a"},
		{"value encoding kept", "https://example.com/?q=a+b&r=a%2Bb&s=a/b&t=x%2Fy", "https://example.com?q=a+b&r=a%2Bb&s=a/b&t=x%2Fy"},
		{"uppercase escapes in query", "https://example.com/?q=%2f%c3%bc", "https://example.com?q=%2F%C3%BC"},
		{"uppercase escapes in path", "https://example.com/a%2fb", "https://example.com/a%2Fb"},
		{"unreserved escapes decoded", "https://example.com/%7Euser/%41?k=%2D%5f", "https://example.com/~user/A?k=-_"},
		{"space and non-ASCII escaped", "https://example.com/a b/ü?q=a b", "https://example.com/a%20b/%C3%BC?q=a%20b"},
		{"escaped and literal space agree", "https://example.com/a!b%20c", "https://example.com/a!b%20c"},
		{"literal sub-delims in path kept", "https://example.com/a!b c", "https://example.com/a!b%20c"},
		{"= in value kept", "https://example.com/?a=b=c", "https://example.com?a=b=c"},
		{"trailing slash stripped", "https://example.com/a/b/", "https://example.com/a/b"},
		{"trailing slashes stripped", "https://example.com/a//", "https://example.com/a"},
		{"root slash stripped", "https://example.com/", "https://example.com"},
		{"root slash stripped before query", "https://example.com/?a=1", "https://example.com?a=1"},
		{"no path", "https://example.com", "https://example.com"},
		{"inner empty segment kept", "https://example.com/a//b", "https://example.com/a//b"},
		{"IPv6 without port", "http://[::1]/x", "http://[::1]/x"},
		{"IPv6 with port", "http://[::1]:8080/x", "http://[::1]:8080/x"},
		{"IPv6 default port", "http://[::1]:80/x", "http://[::1]/x"},
		{"IPv6 uppercase and uncompressed", "https://[2001:DB8:0:0:0:0:0:1]/x", "https://[2001:db8::1]/x"},
		{"IPv6 zone", "http://[fe80::1%25eth0]:8080/", "http://[fe80::1%25eth0]:8080"},
		{"IPv4", "http://192.168.0.1:80/x/", "http://192.168.0.1/x"},
		{"Unicode host lowercased", "https://BÜCHER.de/", "https://bücher.de"},
		{"surrounding white space", "  https://example.com/a \n", "https://example.com/a"},
		{"everything at once", "HTTPS://User:Pw@WWW.Example.com:443/Docs/%7eme/?z=%2f&a=2&a=1#frag", "https://www.example.com/Docs/~me?a=1&a=2&z=%2F"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := citations.Normalize(tt.raw)
			if err != nil {
				t.Fatalf("Normalize(%q): %v", tt.raw, err)
			}
			if got != tt.want {
				t.Fatalf("Normalize(%q) = %q, want %q", tt.raw, got, tt.want)
			}
			again, err := citations.Normalize(got)
			if err != nil || again != got {
				t.Fatalf("not idempotent: Normalize(%q) = %q, %v", got, again, err)
			}
		})
	}
}

func TestNormalize_Invalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, raw, msg string
	}{
		{"empty", "", "no scheme"},
		{"relative path", "/a/b", "no scheme"},
		{"host without scheme", "example.com/a", "no scheme"},
		{"scheme-relative", "//example.com/a", "no scheme"},
		{"ftp", "ftp://example.com/a", `scheme "ftp" is not http or https`},
		{"mailto", "mailto:someone@example.com", `scheme "mailto" is not http or https`},
		{"javascript", "JavaScript:alert(1)", `scheme "javascript" is not http or https`},
		{"opaque http", "http:example.com/a", "no //host"},
		{"empty host", "http:///a", "empty host"},
		{"port without host", "http://:80/a", "empty host"},
		{"port out of range", "http://example.com:65536/", "invalid port"},
		{"bad path escape", "http://example.com/%zz", "invalid URL escape"},
		{"bad query escape", "http://example.com/?q=%zz", "invalid escape"},
		{"truncated query escape", "http://example.com/?q=100%", "invalid escape"},
		{"unclosed IPv6", "http://[::1/", "missing ']'"},
		{"not an IPv6 address", "http://[::g]/", "::g"},
		{"IPv4 in brackets", "http://[1.2.3.4]/", "1.2.3.4"},
		{"control character", "http://example.com/\x7f", "invalid control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := citations.Normalize(tt.raw)
			if !errors.Is(err, citations.ErrInvalidURL) {
				t.Fatalf("Normalize(%q) = %q, %v; want ErrInvalidURL", tt.raw, got, err)
			}
			if !strings.Contains(err.Error(), tt.msg) || !strings.HasPrefix(err.Error(), "citations: ") {
				t.Fatalf("Normalize(%q) error %q does not say %q", tt.raw, err, tt.msg)
			}
		})
	}
}

// TestNormalize_Equivalent checks that spellings of one URL normalise alike.
func TestNormalize_Equivalent(t *testing.T) {
	t.Parallel()
	groups := [][]string{
		{"https://example.com/a?x=1&y=2", "HTTPS://EXAMPLE.com:443/a/?y=2&x=1#f", "https://u:p@example.com/a?y=2&x=1", "https://example.com/%61?x=%31&y=2"},
		{"http://[::1]:8080", "http://[0:0:0:0:0:0:0:1]:08080/", "HTTP://[::1]:8080/#x"},
	}
	for _, g := range groups {
		want, err := citations.Normalize(g[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range g[1:] {
			if got, err := citations.Normalize(raw); err != nil || got != want {
				t.Errorf("Normalize(%q) = %q, %v; want %q", raw, got, err, want)
			}
		}
	}
}

// FuzzNormalize checks that Normalize is idempotent and that what it
// returns is a URL it accepts.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		"https://example.com/a?b=2&a=1#x", "http://[::1]:8080/x/", "HTTP://U:P@Example.COM:80/%7e?%2f=%41&a&a=",
		"https://bücher.de/ü?q=a b", "http://x/a!b%20c", "ftp://x", "http://[fe80::1%25en0]/", "http://x:0443/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := citations.Normalize(raw)
		if err != nil {
			return
		}
		again, err := citations.Normalize(got)
		if err != nil || again != got {
			t.Fatalf("Normalize(%q) = %q, then %q, %v", raw, got, again, err)
		}
	})
}
