package transport

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/meshnode/meshnode/router"
)

// A connection's ZMTP identity is the remote's own choice until its hello is
// admitted. Strangers — a record before any hello, a hello for another mesh,
// a hello never sent — must not get rows in the bounded per-peer table
// (maxPeerStats), or a stream of fresh identities would leave the node's
// real peers uncounted. They still count in the node totals.
func TestStrangersGetNoPerPeerStats(t *testing.T) {
	b := startNode(t, testConfig("b", 1))
	dial := func(ident string) *zconn {
		t.Helper()
		c, err := net.Dial("tcp", b.rt.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		zc, err := openZMTP(c, zmq4.Dealer, []byte(ident), false, frameLimits{1 << 20, 1 << 20, 16, 1 << 16}, 4096, 5*time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = zc.close() })
		return zc
	}
	send := func(zc *zconn, frames [][]byte) {
		t.Helper()
		if err := zc.write(frames); err != nil {
			t.Fatal(err)
		}
		if _, err := flushWithin(zc, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	other := b.currentAdmission()
	rm := *other.RouteMesh
	rm.MeshName = "another-mesh"
	other.RouteMesh = &rm
	badHello, _ := encodeInfra(&router.Hello{Admission: other})
	record, _ := router.Encode(seqSend(b.RID(), 1, nil))
	strangers := []struct {
		name  string
		first [][]byte // nil: connects and sends nothing
	}{
		{"record before hello", record},
		{"hello for another mesh", badHello},
		{"silent", nil},
	}
	var idents []string
	for _, s := range strangers {
		for i := 0; i < 5; i++ {
			ident := fmt.Sprintf("stranger-%s-%d", s.name, i)
			idents = append(idents, ident)
			zc := dial(ident)
			if s.first != nil {
				send(zc, s.first)
			}
		}
	}
	// An admitted peer does get its row.
	_, pinger := admittedPinger(t, b)
	probe, _ := encodeInfra(&router.LivenessProbe{ProbeID: 1})
	send(pinger, probe)
	waitFor(t, 5*time.Second, "the strangers counted in the totals", func() bool {
		st := b.Stats()
		return st.NotAdmitted >= 5 && st.Rejected >= 5 && st.Peers[RID("pinger").String()].RecordsIn >= 1
	})
	st := b.Stats()
	for _, ident := range idents {
		if ps, ok := st.Peers[RID(ident).String()]; ok {
			t.Errorf("stranger %q has a per-peer row: %+v", ident, ps)
		}
	}
}
