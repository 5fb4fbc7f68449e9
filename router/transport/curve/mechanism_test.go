package curve

import (
	"errors"
	"net"
	"testing"

	"github.com/go-zeromq/zmq4"
)

// openPair runs zmq4.Open with a CURVE Mechanism on both ends of a TCP
// loopback connection (net.Pipe would deadlock: both greetings are
// written before either is read).
func openPair(t *testing.T, srv, cli Config) (sc, cc *zmq4.Conn, sm, cm *Mechanism, serr, cerr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   *zmq4.Conn
		err error
	}
	done := make(chan res, 1)
	sm = NewMechanism(srv)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			done <- res{nil, err}
			return
		}
		c, err := zmq4.Open(raw, sm, zmq4.Router, zmq4.SocketIdentity("srv"), true, nil)
		if err != nil {
			raw.Close()
		}
		done <- res{c, err}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	cm = NewMechanism(cli)
	cc, cerr = zmq4.Open(raw, cm, zmq4.Dealer, zmq4.SocketIdentity("cli"), false, nil)
	if cerr != nil {
		raw.Close()
	}
	r := <-done
	if r.c != nil {
		t.Cleanup(func() { r.c.Close() })
	}
	return r.c, cc, sm, cm, r.err, cerr
}

func TestMechanismOverZMQ4(t *testing.T) {
	server, client := mustPair(t)
	sc, cc, sm, cm, serr, cerr := openPair(t,
		Config{KeyPair: server, Authorize: allowOnly(client.Public)},
		Config{KeyPair: client, ServerKey: server.Public})
	if serr != nil || cerr != nil {
		t.Fatalf("server %v, client %v", serr, cerr)
	}
	if sm.PeerKey() != client.Public || cm.PeerKey() != server.Public {
		t.Fatal("peer keys")
	}
	if sc.Peer.Meta["Identity"] != "cli" || cc.Peer.Meta["Identity"] != "srv" || sc.Peer.Meta["Socket-Type"] != "DEALER" {
		t.Fatalf("metadata %v / %v", sc.Peer.Meta, cc.Peer.Meta)
	}
	if sm.Session() == nil || cm.Session() == nil {
		t.Fatal("no session")
	}
	// zmq4's own framing is refused after the handshake.
	if err := cc.SendMsg(zmq4.NewMsgString("clear")); !errors.Is(err, ErrDataPhase) {
		t.Fatalf("zmq4 framing after the handshake: %v", err)
	}
}

// TestMechanismRefusals: a proven but unknown client key gets ERROR "400";
// a client using another server key fails the server's HELLO check.
func TestMechanismRefusals(t *testing.T) {
	server, client := mustPair(t)
	other, _ := mustPair(t)
	for _, tc := range []struct {
		name      string
		allowed   Key
		serverKey Key
		check     func(serr, cerr error) bool
	}{
		{"unknown client key", other.Public, server.Public, func(serr, cerr error) bool {
			var rej *RejectedError
			return errors.Is(serr, ErrUnauthorized) && errors.As(cerr, &rej) && rej.Reason == "400"
		}},
		{"wrong server key", client.Public, other.Public, func(serr, cerr error) bool {
			return errors.Is(serr, ErrCrypto) && cerr != nil
		}},
	} {
		_, _, _, _, serr, cerr := openPair(t,
			Config{KeyPair: server, Authorize: allowOnly(tc.allowed)},
			Config{KeyPair: client, ServerKey: tc.serverKey})
		if !tc.check(serr, cerr) {
			t.Errorf("%s: server %v, client %v", tc.name, serr, cerr)
		}
	}
}
