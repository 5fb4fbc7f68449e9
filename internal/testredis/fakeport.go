package testredis

import (
	"net"
	"sync"
	"testing"
	"time"
)

// ZMTPGreeting is the greeting a meshnode mesh port sends first (zmq4, NULL
// mechanism: signature, version 3.0, mechanism name, padding to 64 bytes;
// RFC 23/ZMTP).
var ZMTPGreeting = append([]byte{0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 3, 0, 'N', 'U', 'L', 'L'}, make([]byte, 48)...)

// FakePort listens on loopback and, on every connection, sends greeting
// (nothing when nil) and then reads until the client goes: what a store
// client meets when its address is not a Redis server (a node's mesh port
// with ZMTPGreeting).
func FakePort(t testing.TB, greeting []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if greeting != nil {
					_, _ = c.Write(greeting)
				}
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				buf := make([]byte, 512)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// SilentPort listens on loopback, accepts every connection and never
// answers nor closes one before the test ends: what a store client meets at
// a server that stopped responding (paused, overloaded), so that its
// operation timeout, not an error from the server, must end each call.
func SilentPort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}
