package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// blockedSendWait is a SendWait of record sent+1 waiting behind a queue of
// records 1..sent that a stalled peer does not read.
type blockedSendWait struct {
	a       *Node
	fake    *fakePeer
	s       *session
	sent    int
	release func()     // the peer reads again
	done    chan error // SendWait's result
}

func startBlockedSendWait(t *testing.T, qb queueBound) blockedSendWait {
	t.Helper()
	a, fake, release := stalledLink(t, qb)
	w := blockedSendWait{a: a, fake: fake, release: release, done: make(chan error, 1)}
	w.sent = fillQueue(t, a, fake.rid, qb.size)
	var err error
	if w.s, err = a.session(fake.rid, anyRun); err != nil {
		t.Fatal(err)
	}
	// fillQueue's "stalled" is a heuristic: on a loaded machine the writer
	// can still be moving records into the socket's kernel buffers, and a
	// SendWait then finds room at once. That is SendWait working: count the
	// record as queued and try the next, until one has to wait (the kernel
	// buffers are finite).
	deadline := time.Now().Add(10 * time.Second)
	for {
		go func(seq uint64) {
			w.done <- a.SendWait(context.Background(), fake.rid, seqSend(fake.rid, seq, make([]byte, qb.size)))
		}(uint64(w.sent + 1))
		for answered := false; !answered; {
			if w.s.pc.waiters.Load() == 1 {
				return w
			}
			select {
			case err := <-w.done:
				if err != nil {
					t.Fatalf("SendWait of record %d: %v", w.sent+1, err)
				}
				w.sent++ // it found room: queued; try the next
				answered = true
			case <-time.After(time.Millisecond):
				if time.Now().After(deadline) {
					t.Fatal("timed out after 10s waiting for SendWait to wait for room")
				}
			}
		}
	}
}

// TestSendWait: with the peer's queue full, SendWait waits — woken by the
// writer, not polling — and its record goes out behind the queued ones once
// the peer reads again; it gives up when its context ends (ErrBackpressure
// and the context error) or the connection goes down (ErrPeerDown). Each
// queue bound is exercised, including records larger than the whole byte
// budget, which must pass one at a time instead of waiting forever.
func TestSendWait(t *testing.T) {
	for _, qb := range queueBounds {
		t.Run(qb.name+"/waits for room, in order", func(t *testing.T) {
			w := startBlockedSendWait(t, qb)
			a, fake, s, sent, done := w.a, w.fake, w.s, w.sent, w.done
			// The peer does not read, so the writer takes a record out at
			// most as often as it writes one; a polling waiter would retry
			// far more often than that.
			counters := a.stats.known(string(fake.rid))
			retries0, out0 := s.pc.retries.Load(), counters.recordsOut.Load()
			select {
			case err := <-done:
				t.Fatalf("SendWait returned %v while the queue was full", err)
			case <-time.After(100 * time.Millisecond):
			}
			if retries, out := s.pc.retries.Load()-retries0, counters.recordsOut.Load()-out0; retries > out+1 {
				t.Fatalf("waiter retried %d times while %d records went out: it spins", retries, out)
			}
			w.release()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("SendWait: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("SendWait still waiting after the peer read again")
			}
			for want := uint64(1); want <= uint64(sent+1); want++ {
				if got := seqOf(fake.next(router.CmdSpotSend, 10*time.Second).rec); got != want {
					t.Fatalf("record %d arrived in place of %d", got, want)
				}
			}
			if st := a.Stats(); st.SendWaits != 1 {
				t.Fatalf("SendWaits = %d, want 1", st.SendWaits)
			}
		})
		t.Run(qb.name+"/context ends", func(t *testing.T) {
			a, fake, _ := stalledLink(t, qb)
			sent := fillQueue(t, a, fake.rid, qb.size)
			// fillQueue's "stalled" is a heuristic: on a loaded machine the
			// writer can still be moving records into the socket's kernel
			// buffers, and a wait then finds room. That is SendWait working;
			// wait again until the buffers are full too (they are finite).
			var err error
			var before, waitsBefore uint64
			waits := 0
			for ; waits < 50; waits++ {
				before, waitsBefore = a.Stats().Backpressure, a.Stats().SendWaits
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				err = a.SendWait(ctx, fake.rid, seqSend(fake.rid, uint64(sent+1), make([]byte, qb.size)))
				cancel()
				if err != nil {
					break
				}
				sent++
			}
			if !errIs(err, ErrBackpressure, context.DeadlineExceeded) {
				t.Fatalf("SendWait = %v after %d waits that found room, want ErrBackpressure and context.DeadlineExceeded", err, waits)
			}
			st := a.Stats()
			if st.Backpressure != before+1 || st.SendWaits != waitsBefore+1 {
				t.Fatalf("the last wait: backpressure %d → %d, send waits %d → %d", before, st.Backpressure, waitsBefore, st.SendWaits)
			}
			if s, err := a.session(fake.rid, anyRun); err != nil || s.pc.waiters.Load() != 0 {
				t.Fatalf("waiter not gone (session err %v)", err)
			}
		})
	}
	t.Run("peer down while waiting", func(t *testing.T) {
		w := startBlockedSendWait(t, queueBounds[0])
		if err := w.a.Disconnect(w.fake.rid); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-w.done:
			if !errors.Is(err, ErrPeerDown) {
				t.Fatalf("SendWait = %v, want ErrPeerDown", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("SendWait still waiting after Disconnect")
		}
	})
	t.Run("not usable peers fail at once", func(t *testing.T) {
		a := startNode(t, testConfig("a", 1))
		rid := RID("nobody")
		if err := a.SendWait(context.Background(), rid, seqSend(rid, 1, nil)); !errors.Is(err, ErrUnknownPeer) {
			t.Fatalf("SendWait to an unknown peer = %v, want ErrUnknownPeer", err)
		}
		if err := a.Connect(rid, "tcp://127.0.0.1:1"); err != nil {
			t.Fatal(err)
		}
		if err := a.SendWait(context.Background(), rid, seqSend(rid, 1, nil)); !errors.Is(err, ErrNotAdmitted) {
			t.Fatalf("SendWait to an unadmitted peer = %v, want ErrNotAdmitted", err)
		}
	})
}

// TestRelocationChunkStream: the relocation source's use of the transport
// end to end with the default queue bounds — Start a relocationPrepare
// (40), stream full-size chunks (52, 64 MiB of data each, larger than the
// whole 64 MiB send-queue budget) with SendWait on the same ordered
// connection, then Wait for the target's relocationReady (53), which the
// target sends only after it has seen the request and every chunk in order
// with the declared checksum.
func TestRelocationChunkStream(t *testing.T) {
	const chunks = 2
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	data := make([]byte, router.RelocationChunkBytes)
	// A non-repeating prefix doubled up to the chunk size (a byte loop over
	// 64 MiB is slow under -race); chunk order shows in the checksum anyway.
	for i := range 1 << 16 {
		data[i] = byte(i*7 + i>>8)
	}
	for n := 1 << 16; n < len(data); n *= 2 {
		copy(data[n:], data[:n])
	}
	var sum uint32
	for range chunks {
		sum = crc32.Update(sum, castagnoli, data)
	}
	binding := router.RelocationBinding{
		Relocation:    router.RelocationID{High: 1, Low: 2},
		TargetAttempt: 1,
		Source:        router.SourceFence{SourceOwnerID: "owner-a", SourceOwnerLeaseGeneration: 1, SourceNodeRID: []byte("node-a"), SourceNodeGeneration: 1},
	}

	targetErr := make(chan error, 1)
	var (
		prep      *router.RelocationPrepare
		replyPrep func(*router.Record) error
		next      uint32
		got       uint32
	)
	cfgB := testConfig("b", 1)
	// The target's Handler runs on the connection goroutine, one record at
	// a time in arrival order, so its state needs no lock.
	cfgB.Handler = func(_ context.Context, _ PeerInfo, rec *router.Record, reply func(*router.Record) error) {
		fail := func(format string, args ...any) {
			select {
			case targetErr <- fmt.Errorf(format, args...):
			default:
			}
		}
		switch b := rec.Body.(type) {
		case *router.RelocationPrepare:
			prep, replyPrep = b, reply
		case *router.RelocationState:
			switch {
			case prep == nil:
				fail("chunk %d before the request", b.ChunkIndex)
				return
			case b.Binding.Relocation != binding.Relocation || b.ChunkIndex != next:
				fail("chunk %d of %v, want chunk %d", b.ChunkIndex, b.Binding.Relocation, next)
				return
			case !bytes.Equal(b.Data, data):
				fail("chunk %d: data differs", b.ChunkIndex)
				return
			}
			got = crc32.Update(got, castagnoli, b.Data)
			next++
			if next < prep.ChunkCount {
				return
			}
			out := &router.RelocationReady{Correlation: prep.Correlation, Relocation: binding.Relocation,
				TargetAttempt: binding.TargetAttempt, Outcome: router.RelocationRelayReady}
			if got != prep.CRC32C {
				out.Outcome, out.Failure = router.RelocationFailed, router.RelocationFailureChecksumMismatch
			}
			if err := replyPrep(router.NewRecord(out, nil, nil)); err != nil {
				fail("reply: %v", err)
			}
		default:
			fail("unexpected %s", rec.Command)
		}
	}
	b := startNode(t, cfgB)
	a := startNode(t, testConfig("a", 1))
	connectAndWait(t, a, b)

	chunk := func(i uint32) *router.Record {
		return router.NewRecord(&router.RelocationState{Binding: binding, ChunkIndex: i, Data: data}, nil, nil)
	}
	frames, err := router.Encode(chunk(0))
	if err != nil {
		t.Fatal(err)
	}
	if size := framesSize(frames); size <= a.cfg.SendQueueBytes {
		t.Fatalf("a chunk record is %d bytes, not above the %d-byte queue budget this test is about", size, a.cfg.SendQueueBytes)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	call, err := a.Start(ctx, b.RID(), router.NewRecord(&router.RelocationPrepare{
		Binding:              binding,
		Object:               router.RelocationObject{Kind: router.StatefulActor, ObjectID: "actor-1", StableType: "T", ObjectGeneration: 1, ExpectedAuthorityOwnerGeneration: 1},
		TargetNodeRID:        b.RID(),
		TargetNodeGeneration: 1,
		TotalLength:          chunks * router.RelocationChunkBytes,
		ChunkCount:           chunks,
		CRC32C:               sum,
		DeadlineUnixMs:       uint64(time.Now().Add(time.Minute).UnixMilli()),
	}, nil, nil))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	for i := range uint32(chunks) {
		if err := a.SendWait(ctx, b.RID(), chunk(i)); err != nil {
			t.Fatalf("SendWait chunk %d: %v", i, err)
		}
	}
	rep, err := call.Wait(ctx)
	if err != nil {
		select {
		case terr := <-targetErr:
			t.Fatalf("Wait: %v (target: %v)", err, terr)
		default:
		}
		t.Fatalf("Wait: %v", err)
	}
	ready, ok := rep.Body.(*router.RelocationReady)
	if !ok || ready.Outcome != router.RelocationRelayReady || ready.Correlation != call.Correlation() {
		t.Fatalf("answer %s %+v, want relayReady for correlation %d", rep.Command, rep.Body, call.Correlation())
	}
	select {
	case err := <-targetErr:
		t.Fatal(err)
	default:
	}
}
