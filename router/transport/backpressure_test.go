package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// TestBackpressure: a peer that stops reading makes Send fail fast with
// ErrBackpressure once the bounded queue (records or bytes) is full; the
// queue never grows past its bound, and sending resumes when the peer reads
// again.
func TestBackpressure(t *testing.T) {
	tests := []struct {
		name    string
		records int
		bytes   int64
		size    int
	}{
		{"record bound", 8, 1 << 40, 64 << 10},
		{"byte bound", 1 << 20, 1 << 20, 300 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFakePeer(t, "slow", 1)
			release := make(chan struct{})
			inner := fake.rt.onFrames
			fake.rt.onFrames = func(ic *inConn, frames [][]byte) {
				inner(ic, frames)
				rec, _ := router.Decode(frames)
				if rec != nil && rec.Command == router.CmdSpotSend {
					<-release // stop reading: TCP buffers fill up behind us
				}
			}
			cfg := testConfig("a", 1)
			cfg.SendQueueRecords, cfg.SendQueueBytes = tt.records, tt.bytes
			cfg.PeerTimeout, cfg.WriteTimeout = 30*time.Second, 30*time.Second
			a := startNode(t, cfg)
			if err := a.Connect(fake.rid, fake.endpoint()); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := a.WaitAdmitted(ctx, fake.rid); err != nil {
				t.Fatal(err)
			}
			data := make([]byte, tt.size)
			sent, refused := 0, 0
			for i := 0; i < 100_000 && refused == 0; i++ {
				err := a.Send(ctx, fake.rid, seqSend(fake.rid, uint64(i+1), data))
				switch {
				case err == nil:
					sent++
				case errors.Is(err, ErrBackpressure):
					refused++
				default:
					t.Fatalf("send %d: %v", i, err)
				}
				// Let the writer move what the socket accepts; whatever it
				// cannot move stays in the bounded queue.
				if i%16 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			if refused == 0 {
				t.Fatalf("no backpressure after %d sends to a peer that does not read", sent)
			}
			s, err := a.session(fake.rid)
			if err != nil {
				t.Fatal(err)
			}
			if q := len(s.pc.q); q > tt.records {
				t.Fatalf("queue holds %d records, bound %d", q, tt.records)
			}
			if qb := s.pc.qBytes.Load(); qb > tt.bytes+int64(tt.size)+1024 {
				t.Fatalf("queue holds %d bytes, bound %d", qb, tt.bytes)
			}
			st := a.Stats()
			if st.Backpressure == 0 || st.Peers[fake.rid.String()].Backpressure == 0 {
				t.Fatalf("backpressure not counted: %+v", st)
			}
			close(release)
			waitFor(t, 10*time.Second, "queue to drain", func() bool {
				return a.Send(ctx, fake.rid, seqSend(fake.rid, 1, data)) == nil
			})
			t.Logf("sent %d before the first refusal", sent)
		})
	}
}

// TestReplyBackpressure: replies to a requester that does not read its
// DEALER are refused with ErrBackpressure by the reply function, instead of
// blocking the handler (and with it the requester's whole connection).
func TestReplyBackpressure(t *testing.T) {
	replyErr := make(chan error, 1)
	cfgB := testConfig("b", 1)
	cfgB.SendQueueRecords = 4
	cfgB.PeerTimeout, cfgB.WriteTimeout = 30*time.Second, 30*time.Second
	cfgB.Handler = func(_ context.Context, _ PeerInfo, rec *router.Record, reply func(*router.Record) error) {
		big := make([]byte, 256<<10)
		for i := 0; i < 10_000; i++ {
			if err := reply(okReply(rec, big)); err != nil {
				replyErr <- err
				return
			}
			if i%16 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		replyErr <- nil
	}
	b := startNode(t, cfgB)
	// The requester is a raw DEALER that never reads.
	c := rawDealer(t, b.rt.ln.Addr().String(), "deaf")
	hello, _ := encodeInfra(&router.Hello{Admission: b.currentAdmission()})
	req := spotRequest(b.RID(), 1, nil)
	req.Body.(*router.SpotRequest).Correlation = 1
	reqFrames, _ := router.Encode(req)
	var raw []byte
	for _, m := range [][][]byte{hello, reqFrames} {
		for i, f := range m {
			raw = append(raw, rawFrame(i < len(m)-1, f)...)
		}
	}
	if _, err := c.Write(raw); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-replyErr:
		if !errors.Is(err, ErrBackpressure) {
			t.Fatalf("reply err = %v, want ErrBackpressure", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("handler blocked replying to a peer that does not read")
	}
}
