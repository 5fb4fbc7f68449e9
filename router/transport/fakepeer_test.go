package transport

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// fakePeer is a scripted ROUTER built from the link layer: the test decides
// what to answer. It lets tests withhold acks, replies or admits.
type fakePeer struct {
	t    testing.TB
	rid  RID
	gen  uint64
	rt   *routerSock
	recs chan fakeRec
	// autoAdmit answers hello with admit.
	autoAdmit bool
	// done, once closed (stopReading), lets the reader drop what the test
	// no longer takes: a reader that waits for the test must not hold a
	// node's Close or the peer's own.
	done     chan struct{}
	stopOnce sync.Once
}

// stopReading makes the peer drop the records the test does not take.
func (f *fakePeer) stopReading() { f.stopOnce.Do(func() { close(f.done) }) }

type fakeRec struct {
	ic  *inConn
	rec *router.Record
}

func newFakePeer(t testing.TB, rid string, gen uint64) *fakePeer {
	t.Helper()
	return newFakePeerReading(t, rid, gen, 1024)
}

// newFakePeerReading is newFakePeer whose reader reads at most ahead
// records past the last one the test took (next, none, recs): with 0 it
// reads a record only when the test takes it, a reader as slow as the test.
func newFakePeerReading(t testing.TB, rid string, gen uint64, ahead int) *fakePeer {
	t.Helper()
	cfg := testConfig(rid, gen)
	c, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := listenRouter("tcp://127.0.0.1:0", c.linkParams(), testLogger())
	if err != nil {
		t.Fatal(err)
	}
	f := &fakePeer{t: t, rid: c.RID, gen: gen, rt: rt, recs: make(chan fakeRec, ahead), autoAdmit: true, done: make(chan struct{})}
	rt.onOpen = func(*inConn) {}
	rt.onClose = func(*inConn, error) {}
	rt.onBad = func(string, string, error) {}
	rt.onFrames = func(ic *inConn, frames [][]byte) {
		rec, err := router.Decode(frames)
		if err != nil {
			t.Errorf("fake peer got malformed record: %v", err)
			return
		}
		if rec.Command == router.CmdHello && f.autoAdmit {
			// Lift the pre-hello frame limit and hello deadline as the
			// node's admission does.
			// A connection this one replaces is read to its end and its
			// records still come first (ic.after), as the node's admission
			// does for a peer run that reconnects: its last records were
			// sent before any of this one's.
			old, err := rt.claim(ic)
			if err != nil {
				t.Errorf("fake peer claim: %v", err)
			}
			supersede(old, ic, 0, c.PeerTimeout)
			f.send(ic, &router.Admit{Admission: f.admission()})
			return
		}
		if ic.after != nil {
			<-ic.after
			ic.after = nil
		}
		select {
		case f.recs <- fakeRec{ic, rec}:
		case <-f.done:
		}
	}
	rt.start()
	t.Cleanup(func() {
		f.stopReading()
		rt.close()
	})
	return f
}

func (f *fakePeer) endpoint() string { return "tcp://" + f.rt.ln.Addr().String() }

func (f *fakePeer) admission() router.ServiceAdmission {
	cfg := testConfig(string(f.rid), f.gen)
	c, _ := cfg.withDefaults()
	a := defaultAdmission(&c, f.endpoint())
	// A fake peer reads the records as they are written and delivers
	// nothing once: it does not take the link's message numbers
	// (router.LinkSequence), so a link sends none.
	a.Extension.ProtocolCapabilities = slices.DeleteFunc(slices.Clone(a.Extension.ProtocolCapabilities),
		func(c string) bool { return c == router.CapabilityLinkSequence })
	return router.ServiceAdmission{Topology: router.TopologyRouteMesh, RouteMesh: &a}
}

func (f *fakePeer) send(ic *inConn, body router.Body) {
	frames, err := router.Encode(router.NewRecord(body, nil, nil))
	if err != nil {
		f.t.Errorf("fake peer encode: %v", err)
		return
	}
	if err := ic.pc.enqueue(outItem{frames: frames, size: framesSize(frames)}); err != nil {
		f.t.Errorf("fake peer send: %v", err)
	}
}

// next returns the next received record of command cmd (others are
// skipped) within d.
func (f *fakePeer) next(cmd router.Command, d time.Duration) fakeRec {
	f.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case r := <-f.recs:
			if r.rec.Command == cmd {
				return r
			}
		case <-deadline:
			f.t.Fatalf("fake peer: no %s within %s", cmd, d)
			return fakeRec{}
		}
	}
}

// none asserts that no record of cmd arrives within d (used after a
// manual-clock step: the effect, if any, is already in flight).
func (f *fakePeer) none(cmd router.Command, d time.Duration) {
	f.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case r := <-f.recs:
			if r.rec.Command == cmd {
				f.t.Fatalf("fake peer: unexpected %s %+v", cmd, r.rec.Body)
			}
		case <-deadline:
			return
		}
	}
}
