//go:build linux

package transport

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// onFD runs f on c's file descriptor; false when c has none.
func onFD(c net.Conn, f func(fd int) error) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var ferr error
	if err := raw.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil || ferr != nil {
		return false
	}
	return true
}

// tcpBytesAcked is how many bytes of what was written on c its peer's kernel
// has acknowledged (TCP_INFO tcpi_bytes_acked, Linux 4.1 and later), from
// the connection's first byte — on the side that dialled, plus one for the
// SYN (ackCount); false when it cannot be read.
func tcpBytesAcked(c net.Conn) (int64, bool) {
	var info *unix.TCPInfo
	ok := onFD(c, func(fd int) (err error) {
		info, err = unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		return err
	})
	if !ok {
		return 0, false
	}
	return int64(info.Bytes_acked), true
}

// unreadBytes is how many bytes c's kernel holds that this process has
// not read yet (SIOCINQ); false when it cannot be read.
func unreadBytes(c net.Conn) (int, bool) {
	var n int
	ok := onFD(c, func(fd int) (err error) {
		n, err = unix.IoctlGetInt(fd, unix.SIOCINQ)
		return err
	})
	return n, ok
}

// cutSocket ends c at one instant of its kernel's: shutdown(SHUT_RDWR)
// sends the FIN, and from then on the kernel answers any data the peer
// sends with a reset without acknowledging it (RFC 1122 §4.2.2.13; Linux
// in FIN-WAIT with the read side shut), while every byte it acknowledged
// before stays readable. So what the peer saw acknowledged is exactly what
// this process can still read — unlike close, which discards unread bytes
// the kernel has acknowledged, and which Go delays until the reading
// goroutine lets go of the descriptor. The reader reads to the end and
// closes c. False when c has no descriptor or the shutdown failed.
//
// A connection the peer already reset refuses the shutdown (ENOTCONN): it
// counts as cut — nothing more can arrive, and its reader reads what the
// kernel acknowledged before the reset, then the reset. Closing it
// instead discarded that (the acknowledged records of a sender that gave
// up on a silent connection with an abortive close).
func cutSocket(c net.Conn) bool {
	return onFD(c, func(fd int) error {
		if err := unix.Shutdown(fd, unix.SHUT_RDWR); err != nil && !errors.Is(err, unix.ENOTCONN) {
			return err
		}
		return nil
	})
}

// nothingInFlight reports that every data segment c sent was acknowledged
// (TCP_INFO tcpi_unacked is 0): what is not acknowledged is still in this
// kernel's send queue, never transmitted. False when it cannot be read.
func nothingInFlight(c net.Conn) bool {
	var info *unix.TCPInfo
	ok := onFD(c, func(fd int) (err error) {
		info, err = unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		return err
	})
	return ok && info.Unacked == 0
}
