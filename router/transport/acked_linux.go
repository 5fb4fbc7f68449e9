//go:build linux

package transport

import (
	"errors"
	"net"
	"syscall"
	"time"

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

// inFlight reads what c's kernel knows of the data segments it sent and the
// peer has not acknowledged: whether there are any (TCP_INFO tcpi_unacked),
// and whether they may still be taken — the last data segment left
// (tcpi_last_data_sent, retransmissions included) within
// unsettledAfterSend plus twice the smoothed round trip, so that the
// peer's kernel may have taken it and its acknowledgement may not be here
// yet. A segment that left longer ago and is still unacknowledged was not
// taken (the peer's buffer was full, or its kernel pruned it): it will
// only be retransmitted. ok is false when TCP_INFO cannot be read.
func inFlight(c net.Conn) (some, unsettled, ok bool) {
	var info *unix.TCPInfo
	ok = onFD(c, func(fd int) (err error) {
		info, err = unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		return err
	})
	if !ok {
		return false, false, false
	}
	if info.Unacked == 0 {
		return false, false, true
	}
	since := time.Duration(info.Last_data_sent) * time.Millisecond
	rtt := time.Duration(info.Rtt) * time.Microsecond
	return true, since < unsettledAfterSend+2*rtt, true
}
