//go:build !linux

package transport

import "net"

// newSendQueue: only Linux is probed (SIOCOUTQ); elsewhere the kernel's
// send queue counts as received.
func newSendQueue(net.Conn) sendQueue { return noSendQueue{} }
