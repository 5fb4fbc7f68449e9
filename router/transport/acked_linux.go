//go:build linux

package transport

import (
	"errors"
	"net"
	"syscall"
	"unsafe"

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

// resetIf reads, in one pass on c's descriptor, what its peer's kernel has
// acknowledged (tcpi_bytes_acked, as tcpBytesAcked), whether a data
// segment is in flight (tcpi_unacked) and whether the window the peer last
// advertised is open (tcpi_snd_wnd; a kernel too old to report it leaves
// it 0, closed, and abortIfUnaccepted decides as before), asks reset, and
// when it says so resets the connection there and then: SO_LINGER 0, and
// a disconnect (connect to AF_UNSPEC: tcp_disconnect sends the reset and
// discards the send queue; the descriptor stays open until it is closed).
// bytesAcked is the count read in that pass; ok is false when c has no
// descriptor or TCP_INFO cannot be read.
//
// Why at once, not by the close that follows: from the moment the count
// is read, anything this kernel still sends and the peer acknowledges is
// counted as not delivered and sent again — and a peer that resumes
// reading just then opens its window and gets a burst of it. Between the
// read and a close that came later (the goroutine's other work, its
// scheduling on a loaded machine) that was 1,000 to 2,500 records twice
// in a few of 20 runs of TestStuckReceiverLongerThanTwoPeerTimeouts, once
// a reconnecting peer's admission no longer waited and the linger of its
// second connection ended just as the receiver resumed. What remains is
// the time between two system calls.
func resetIf(c net.Conn, reset func(bytesAcked int64, inFlight, windowOpen bool) bool) (bytesAcked int64, didReset, ok bool) {
	ok = onFD(c, func(fd int) error {
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return err
		}
		bytesAcked = int64(info.Bytes_acked)
		if !reset(bytesAcked, info.Unacked != 0, info.Snd_wnd != 0) {
			return nil
		}
		if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
			return nil // not reset: the close stays graceful
		}
		didReset = true
		// Should the disconnect fail, SO_LINGER 0 makes the close reset.
		sa := unix.RawSockaddr{Family: unix.AF_UNSPEC}
		_, _, _ = unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
		return nil
	})
	return bytesAcked, didReset, ok
}
