//go:build !linux

package transport

import "net"

// tcpBytesAcked cannot be read here: what a peer acknowledged is not
// tracked, and what this node's kernel took counts as delivered.
func tcpBytesAcked(net.Conn) (int64, bool) { return 0, false }

// unreadBytes cannot be read here.
func unreadBytes(net.Conn) (int, bool) { return 0, false }

// cutSocket is not relied on here: the connection is closed outright.
func cutSocket(net.Conn) bool { return false }

// resetIf cannot read acknowledgements here: nothing is reset.
func resetIf(net.Conn, func(bytesAcked int64, inFlight, windowOpen bool) bool) (int64, bool, bool) {
	return 0, false, false
}
