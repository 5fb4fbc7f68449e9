package transport

import "net"

// ackCount reads how many bytes of what this process wrote on a connection
// its peer's kernel has acknowledged, counted like guardConn's offsets:
// from the connection's first data byte.
//
// Why a base: Linux's tcpi_bytes_acked counts sequence space the peer
// acknowledged, and on the side that dialled, that includes the SYN — one
// byte more than the data acknowledged (measured: 1 right after connect,
// 1001 once 1,000 bytes are acknowledged; 0 and 1,000 on the accepting
// side). Taken as is, a one-way record whose last byte alone was not
// acknowledged counted as delivered, and was lost when the peer reset the
// connection (TestPausedSenderLosesNothing lost one record now and then
// under load). So the count is read once before anything is written, and
// subtracted.
type ackCount struct {
	c    net.Conn
	base int64
}

// newAckCount must be called before anything is written on c.
func newAckCount(c net.Conn) ackCount {
	base, _ := tcpBytesAcked(c)
	return ackCount{c: c, base: base}
}

// acked returns the data bytes acknowledged, false when they cannot be read.
func (a ackCount) acked() (int64, bool) {
	n, ok := tcpBytesAcked(a.c)
	return n - a.base, ok
}
