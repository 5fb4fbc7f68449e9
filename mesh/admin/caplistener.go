package admin

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/meshnode/meshnode/internal/logbudget"
)

// capLogEvery is how often a listener at its cap logs (one WARN with the
// number refused since the last one), so that a flood is not a log flood.
const capLogEvery = 10 * time.Second

// capListener closes the connections accepted beyond max open ones right
// away, as the mesh port does beyond transport.max_unadmitted: the kernel's
// backlog, not the process's descriptors, absorbs a flood, and the node's
// other sockets (peers, Redis) keep theirs.
type capListener struct {
	net.Listener
	slots chan struct{}
	log   *slog.Logger
	now   func() time.Time

	warn logbudget.Budget // one WARN per capLogEvery
}

func newCapListener(ln net.Listener, max int, log *slog.Logger) *capListener {
	return &capListener{Listener: ln, slots: make(chan struct{}, max), log: log, now: time.Now}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &capConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			_ = c.Close()
			l.noteRefused(c.RemoteAddr())
		}
	}
}

func (l *capListener) noteRefused(from net.Addr) {
	ok, suppressed := l.warn.Allow(logbudget.At(l.now()), 1, capLogEvery)
	if !ok {
		return
	}
	l.log.Warn("admin: connection closed at accept: the listener holds its maximum of open connections",
		"max_conns", cap(l.slots), "refused", suppressed+1, "last_remote", from.String())
}

// capConn gives its slot back on the first Close.
type capConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
