// Package citations numbers the sources a run's agents cite. URLs are
// normalised so that the same page cited by two agents, or twice in two
// spellings, gets one number; numbers are 1-based in first-seen order.
//
// Manager is immutable: every operation returns a new Manager and leaves the
// receiver as it was, so a Manager can be handed to another actor (a
// delegation hand-off, an event) without copying or locking.
package citations

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalidURL wraps every error of Normalize.
var ErrInvalidURL = errors.New("citations: invalid url")

// Normalize returns the canonical form of an absolute http or https URL:
//
//   - surrounding white space is ignored;
//   - the scheme and host are lowercased (an IPv6 host is written in its
//     canonical form, always in brackets: "http://[::1]:8080/x"; a
//     non-ASCII host is kept as Unicode, not punycode);
//   - the port is written without leading zeros and dropped when it is the
//     scheme's default (http 80, https 443); "http://x:443" keeps its port;
//   - the userinfo (credentials) and the fragment are dropped;
//   - percent-escapes in the path and the query are normalised as RFC 3986
//     §6.2.2 describes: hex digits are uppercased ("%2f" → "%2F"), escapes
//     of unreserved characters are decoded ("%7E" → "~"), and characters
//     that may not appear literally are escaped (a space → "%20",
//     "ü" → "%C3%BC"); everything else is kept as written, so "+" stays "+"
//     and "%2B" stays "%2B", and "a%2Fb" stays distinct from "a/b";
//   - trailing slashes are stripped from the path, and "/" alone becomes "";
//     dot segments and empty segments inside the path are kept;
//   - the query's "&"-separated parameters are sorted by key, then by value
//     (comparing their normalised escaped forms), stably; repeated keys are
//     kept, empty parameters ("a=1&&b=2") are dropped, and a key without "="
//     stays without it; an empty query (a "?" alone) is dropped.
//
// Query parameters are not decoded into url.Values and re-encoded (that
// would turn "/" into "%2F" and a space into "+"): each parameter keeps its
// own spelling, up to the escape normalisation above.
//
// Normalize rejects, wrapping ErrInvalidURL: text net/url cannot parse, a
// URL that is not absolute (no scheme, or no "//host"), a scheme other than
// http or https, an empty host, a port above 65535, and an invalid
// percent-escape. Normalize is idempotent: Normalize(Normalize(u)) ==
// Normalize(u).
func Normalize(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidURL, raw, fmt.Sprintf(format, args...))
	}
	switch {
	case u.Scheme == "":
		return "", invalid("not an absolute URL (no scheme)")
	case u.Scheme != "http" && u.Scheme != "https":
		// url.Parse has lowercased the scheme.
		return "", invalid("scheme %q is not http or https", u.Scheme)
	case u.Opaque != "":
		return "", invalid("not an absolute URL (no //host after the scheme)")
	}

	host, err := normalizeHost(u.Hostname())
	if err != nil {
		return "", invalid("%v", err)
	}
	port, err := normalizePort(u.Scheme, u.Port())
	if err != nil {
		return "", invalid("%v", err)
	}

	// The path as written: url.Parse keeps it in RawPath when it differs
	// from the default escaping of Path. (EscapedPath would re-escape all
	// of a path that has one character to escape, "!" included.)
	rawPath := u.RawPath
	if rawPath == "" {
		rawPath = u.EscapedPath()
	}
	path, err := normalizeEscapes(rawPath, "/&=")
	if err != nil {
		return "", invalid("path: %v", err)
	}
	path = strings.TrimRight(path, "/")

	query, err := normalizeQuery(u.RawQuery)
	if err != nil {
		return "", invalid("query: %v", err)
	}

	// The result is assembled by hand: url.URL.String would escape a
	// non-ASCII host and could pick another spelling of the path.
	var b strings.Builder
	b.WriteString(u.Scheme)
	b.WriteString("://")
	b.WriteString(host)
	if port != "" {
		b.WriteString(":")
		b.WriteString(port)
	}
	b.WriteString(path)
	if query != "" {
		b.WriteString("?")
		b.WriteString(query)
	}
	return b.String(), nil
}

// normalizeHost lowercases a host (as url.URL.Hostname returns it: without
// brackets, unescaped) and writes it as it appears in a URL.
func normalizeHost(h string) (string, error) {
	if h == "" {
		return "", errors.New("empty host")
	}
	if !strings.Contains(h, ":") {
		return strings.ToLower(h), nil
	}
	// An IPv6 literal, perhaps with a zone ("fe80::1%en0"). url.Parse does
	// not check the address itself.
	addr, err := netip.ParseAddr(h)
	if err != nil || !addr.Is6() {
		return "", fmt.Errorf("invalid IPv6 host %q", h)
	}
	// netip writes the address in lowercase, compressed form and the zone
	// as it is; in a URL the zone's "%" is escaped (RFC 6874).
	return "[" + strings.Replace(addr.String(), "%", "%25", 1) + "]", nil
}

// normalizePort drops a default port and leading zeros.
func normalizePort(scheme, port string) (string, error) {
	if port == "" {
		return "", nil // no port, or an empty one: "http://x:/"
	}
	// url.Parse has checked that the port is all digits.
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", fmt.Errorf("invalid port %q", port)
	}
	if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
		return "", nil
	}
	return strconv.FormatUint(n, 10), nil
}

// normalizeQuery sorts a raw query's parameters, normalising each one's
// escapes.
func normalizeQuery(raw string) (string, error) {
	type param struct {
		key, value string
		hasValue   bool
	}
	var params []param
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, hasValue := strings.Cut(part, "=")
		// "?" and "/" may appear literally in a query (RFC 3986 §3.4).
		k, err := normalizeEscapes(k, "/?")
		if err != nil {
			return "", err
		}
		v, err = normalizeEscapes(v, "/?=")
		if err != nil {
			return "", err
		}
		params = append(params, param{k, v, hasValue})
	}
	slices.SortStableFunc(params, func(a, b param) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		if c := strings.Compare(a.value, b.value); c != 0 {
			return c
		}
		// "a" before "a=".
		switch {
		case a.hasValue == b.hasValue:
			return 0
		case b.hasValue:
			return -1
		default:
			return 1
		}
	})
	var b strings.Builder
	for i, p := range params {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.key)
		if p.hasValue {
			b.WriteByte('=')
			b.WriteString(p.value)
		}
	}
	return b.String(), nil
}

// normalizeEscapes applies RFC 3986 §6.2.2's percent-encoding normalisation
// to one component: escapes of unreserved characters are decoded, other
// escapes get uppercase hex digits, and a byte that is neither unreserved,
// a sub-delimiter other than "&" and "=", ":", "@", nor in extra is escaped.
// A "%" that does not start an escape is an error.
func normalizeEscapes(s, extra string) (string, error) {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return "", fmt.Errorf("invalid escape %q", s[i:min(i+3, len(s))])
			}
			d := unhex(s[i+1])<<4 | unhex(s[i+2])
			if isUnreserved(d) {
				b.WriteByte(d)
			} else {
				b.WriteByte('%')
				b.WriteByte(hex[d>>4])
				b.WriteByte(hex[d&15])
			}
			i += 2
		case isUnreserved(c) || strings.IndexByte("!$'()*+,;:@", c) >= 0 || strings.IndexByte(extra, c) >= 0:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String(), nil
}

// isUnreserved reports whether c is an RFC 3986 unreserved character.
func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}
