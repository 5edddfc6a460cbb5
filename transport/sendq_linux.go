//go:build linux

package transport

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// outq reads a Linux socket's send queue with ioctl(SIOCOUTQ): the bytes
// not yet acknowledged by the peer, sent or not.
type outq struct{ rc syscall.RawConn }

var _ sendQueue = outq{}

// newSendQueue returns the probe of c's socket, or the fallback when c
// does not expose one.
func newSendQueue(c net.Conn) sendQueue {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return noSendQueue{}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return noSendQueue{}
	}
	return outq{rc: rc}
}

// PeerClosed peeks at the socket without waiting and without consuming:
// end of stream (a FIN) or an error (a reset) means the peer is gone;
// nothing to read (EAGAIN), or bytes, means it is still there.
func (q outq) PeerClosed() bool {
	var buf [1]byte
	closed := false
	err := q.rc.Control(func(fd uintptr) {
		n, _, rerr := unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		closed = (n == 0 && rerr == nil) || (rerr != nil && rerr != unix.EAGAIN && rerr != unix.EINTR)
	})
	return err == nil && closed
}

func (q outq) Queued() (int, bool) {
	n, ierr := 0, error(nil)
	// Control holds a reference on the descriptor, not its read or write
	// lock: it runs while the writer is blocked in a write.
	if err := q.rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil || ierr != nil {
		return 0, false
	}
	return n, true
}
