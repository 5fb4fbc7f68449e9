package listen

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

func TestTCPFailureSaysItOnce(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	tests := []struct {
		name, addr, what, want string
		is                     error
	}{
		{"port taken", taken.Addr().String(), "tcp://" + taken.Addr().String(),
			"cannot listen on tcp://" + taken.Addr().String() + ": bind: address already in use", syscall.EADDRINUSE},
		// 192.0.2.0/24 is TEST-NET-1 (RFC 5737): no interface has it.
		{"address not here", "192.0.2.1:0", "192.0.2.1:0",
			"cannot listen on 192.0.2.1:0: bind: cannot assign requested address", syscall.EADDRNOTAVAIL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := TCP(tt.addr, tt.what)
			if err == nil {
				ln.Close()
				t.Fatal("listen succeeded")
			}
			if err.Error() != tt.want {
				t.Fatalf("err = %q, want %q", err, tt.want)
			}
			if !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want it to match %v", err, tt.is)
			}
		})
	}
}

func TestTCPListens(t *testing.T) {
	ln, err := TCP("127.0.0.1:0", "tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
}
