//go:build linux

package transport

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// tcpBytesAcked is how many bytes of what was written on c its peer's kernel
// has acknowledged (TCP_INFO tcpi_bytes_acked, Linux 4.1 and later), from
// the connection's first byte; false when it cannot be read.
func tcpBytesAcked(c net.Conn) (int64, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return 0, false
	}
	return int64(info.Bytes_acked), true
}
