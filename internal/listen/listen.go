// Package listen opens the node's TCP listeners (the transport's ROUTER
// endpoint, the admin endpoint) with one wording for their failures.
package listen

import (
	"errors"
	"fmt"
	"net"
)

// TCP listens on addr. Its error names what the operator configured (what,
// e.g. "tcp://127.0.0.1:7801") and the cause once: net's own error repeats
// the address ("listen tcp 127.0.0.1:7801: bind: address already in use").
// The cause stays matchable (errors.Is(err, syscall.EADDRINUSE)).
func TCP(addr, what string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			err = oe.Err
		}
		return nil, fmt.Errorf("cannot listen on %s: %w", what, err)
	}
	return ln, nil
}
