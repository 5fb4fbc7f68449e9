package transport

import (
	"fmt"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// A connection's ZMTP identity is the remote's own choice until its hello is
// admitted. Strangers — a record before any hello, a hello for another mesh,
// a hello never sent — must not get rows in the bounded per-peer table
// (maxPeerStats), or a stream of fresh identities would leave the node's
// real peers uncounted. They still count in the node totals.
func TestStrangersGetNoPerPeerStats(t *testing.T) {
	b := startNode(t, testConfig("b", 1))
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
			zc := dialAs(t, b, RID(ident))
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

// The per-peer table keeps the rows of the peers a link or an admitted
// connection uses, and at most maxRetiredPeerStats others, the most
// recently given up: every peer run ever admitted kept its row (and its
// /metrics series) for the life of the process.
func TestPerPeerStatsOfGonePeersAreBounded(t *testing.T) {
	var s stats
	s.init()
	live := s.acquire("live")
	live.recordsIn.Add(7)
	back := s.acquire("back")
	back.recordsIn.Add(3)
	s.release("back", back)
	// A link and an inbound connection of one peer: the row stays while
	// either holds it.
	both := s.acquire("both")
	bothIn := s.acquire("both")
	s.release("both", bothIn)
	// "back" reconnects before it is pushed out: its counters continue.
	if again := s.acquire("back"); again != back || again.recordsIn.Load() != 3 {
		t.Fatalf("a peer back within the retired window got %p (in %d), want its row %p (in 3)", again, again.recordsIn.Load(), back)
	}
	for i := 0; i < 10*maxRetiredPeerStats; i++ {
		rid := fmt.Sprintf("gone-%d", i)
		s.release(rid, s.acquire(rid))
	}
	if n := len(s.peers); n != 3+maxRetiredPeerStats {
		t.Fatalf("%d rows after %d peers came and went, want the 3 held plus %d retired", n, 10*maxRetiredPeerStats, maxRetiredPeerStats)
	}
	for rid, c := range map[string]*peerCounters{"live": live, "back": back, "both": both} {
		if s.peers[rid] != c {
			t.Errorf("held row %q was removed", rid)
		}
	}
	if s.peers["gone-0"] != nil || s.peers[fmt.Sprintf("gone-%d", 10*maxRetiredPeerStats-1)] == nil {
		t.Error("the oldest retired rows must go first")
	}
}

// End to end: peers admitted one after another with fresh identities,
// each closing, leave at most maxRetiredPeerStats rows in Stats.Peers.
func TestStatsOfClosedInboundPeersAreBounded(t *testing.T) {
	b := startNode(t, testConfig("b", 1))
	const peers = maxRetiredPeerStats + 40
	for i := 0; i < peers; i++ {
		c, zc := admittedPeer(t, b, fmt.Sprintf("short-lived-%d", i))
		_ = zc.close()
		_ = c.Close()
	}
	waitFor(t, 10*time.Second, "every short-lived connection closed on b", func() bool { return b.Stats().InboundConns == 0 })
	st := b.Stats()
	if n := len(st.Peers); n != maxRetiredPeerStats {
		t.Fatalf("%d per-peer rows after %d peers came and went, want %d", n, peers, maxRetiredPeerStats)
	}
	if _, ok := st.Peers[RID(fmt.Sprintf("short-lived-%d", peers-1)).String()]; !ok {
		t.Fatal("the most recent peer's row is gone")
	}
}
