package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
)

// ErrRefusedAddress is the error of a connection to an address the guard
// refuses (loopback, private, link-local, ...).
var ErrRefusedAddress = errors.New("fetch: refused address")

// Resolver resolves a host name to its addresses (*net.Resolver does).
// It must be safe for concurrent use.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// cgnat is the carrier-grade NAT range (RFC 6598), which netip does not
// name; thisNet is 0.0.0.0/8 ("this network", RFC 791); nat64 the
// well-known NAT64 prefix, whose addresses embed an IPv4 address.
var (
	cgnat   = netip.MustParsePrefix("100.64.0.0/10")
	thisNet = netip.MustParsePrefix("0.0.0.0/8")
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	// compat is the deprecated IPv4-compatible form ::a.b.c.d; sixToFour
	// (2002::/16) embeds an IPv4 address in its bits 16 to 48.
	compat    = netip.MustParsePrefix("::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Refused reports why a connection to ip is refused ("" when it is not):
// loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local
// (169.254/16 — the cloud metadata address 169.254.169.254 among them —
// and fe80::/10), unspecified and 0.0.0.0/8, multicast, broadcast and
// CGNAT 100.64/10; an IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible
// (::a.b.c.d), NAT64 (64:ff9b::a.b.c.d) or 6to4 (2002:AABB:CCDD::)
// address is judged by the IPv4 address it embeds.
func Refused(ip netip.Addr) string {
	ip = ip.Unmap()
	if ip.Is6() {
		b := ip.As16()
		switch {
		case ip == netip.IPv6Unspecified() || ip == netip.IPv6Loopback():
		case nat64.Contains(ip) || compat.Contains(ip):
			ip = netip.AddrFrom4([4]byte(b[12:]))
		case sixToFour.Contains(ip):
			ip = netip.AddrFrom4([4]byte(b[2:6]))
		}
	}
	switch {
	case !ip.IsValid():
		return "invalid"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsUnspecified() || thisNet.Contains(ip):
		return "unspecified"
	case ip.IsMulticast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast():
		return "multicast"
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast"
	case cgnat.Contains(ip):
		return "CGNAT"
	}
	return ""
}

// guard decides which addresses the fetch tool may connect to. It is
// applied where the connection is made (dialer.Control), to the address
// actually dialled, so neither a DNS name resolving to a refused address,
// nor a redirect to one, nor DNS rebinding between a check and the
// connection can get through.
type guard struct {
	allowPrivate bool
	allow        []netip.AddrPort // exceptions: exactly these ip:port
}

// check is a net.Dialer.Control: address is the ip:port being dialled.
func (g guard) check(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q is not an ip:port", ErrRefusedAddress, address)
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if g.allowPrivate || slices.Contains(g.allow, ap) {
		return nil
	}
	if why := Refused(ap.Addr()); why != "" {
		return fmt.Errorf("%w: %s is %s", ErrRefusedAddress, ap.Addr(), why)
	}
	return nil
}

// dialer connects through the guard, resolving names with its resolver:
// every resolved address is dialled in turn, each checked by the guard.
type dialer struct {
	resolver Resolver
	net      net.Dialer // Control: guard.check
}

func (d *dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		ips, err = d.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
	}
	var errs []error
	for _, ip := range ips {
		c, err := d.net.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("fetch: %s has no address", host)
	}
	return nil, errors.Join(errs...)
}
