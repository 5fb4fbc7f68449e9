package transport

// Transport throughput and latency with a 1 KiB application payload, each
// next to its baseline measured in the same run: the stock zmq4 DEALER →
// ROUTER carrying the very same encoded frames (no codec, no admission, no
// queue). Compare ns/op of BenchmarkTransport* with BenchmarkRawZmq4*;
// performance is reported, never asserted.
//
//	go test -run '^$' -bench . -count 5 ./router/transport/

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/meshnode/meshnode/router"
)

const benchPayload = 1024

func benchNodes(b *testing.B, handler Handler) (*Node, *Node) {
	b.Helper()
	return benchNodesWith(b, handler, testConfig("bench-a", 1), testConfig("bench-b", 1))
}

// benchCurveNodes is benchNodes with CURVE on both nodes.
func benchCurveNodes(b *testing.B, handler Handler) (*Node, *Node) {
	b.Helper()
	ka, kb := mustKeyPair(b), mustKeyPair(b)
	return benchNodesWith(b, handler,
		curveTestConfig("bench-a", ka, ka.Public, kb.Public), curveTestConfig("bench-b", kb, ka.Public, kb.Public))
}

func benchNodesWith(b *testing.B, handler Handler, cfgA, cfgB Config) (*Node, *Node) {
	b.Helper()
	cfgA.PeerTimeout, cfgB.PeerTimeout = time.Minute, time.Minute
	cfgA.ProbeInterval, cfgB.ProbeInterval = 5*time.Second, 5*time.Second
	cfgB.Handler = handler
	a, nb := startNode(b, cfgA), startNode(b, cfgB)
	connectAndWait(b, a, nb)
	return a, nb
}

// BenchmarkTransportOneWay: records A→B through Node.Send (encode, bounded
// queue, writer, decode, handler); one op = one record delivered.
func BenchmarkTransportOneWay(b *testing.B) { benchOneWay(b, benchNodes, benchPayload) }

// BenchmarkTransportSecurity: the same one-way and request/reply loads with
// the NULL mechanism and with CURVE, side by side in one run, at 1 KiB and
// 64 KiB payloads: the cost of encryption is plain/curve's ns/op ratio.
//
//	go test -run '^$' -bench TransportSecurity -count 5 ./router/transport/
func BenchmarkTransportSecurity(b *testing.B) {
	for _, size := range []int{benchPayload, 64 << 10} {
		for _, mode := range []struct {
			name  string
			nodes func(*testing.B, Handler) (*Node, *Node)
		}{{"plain", benchNodes}, {"curve", benchCurveNodes}} {
			b.Run(fmt.Sprintf("OneWay/%dB/%s", size, mode.name), func(b *testing.B) { benchOneWay(b, mode.nodes, size) })
			b.Run(fmt.Sprintf("RequestReply/%dB/%s", size, mode.name), func(b *testing.B) { benchRequestReply(b, mode.nodes, size) })
		}
	}
}

func benchOneWay(b *testing.B, nodes func(*testing.B, Handler) (*Node, *Node), size int) {
	var got atomic.Int64
	done := make(chan struct{}, 1)
	var want atomic.Int64
	a, nb := nodes(b, func(_ context.Context, _ PeerInfo, _ *router.Record, _ func(*router.Record) error) {
		if got.Add(1) == want.Load() {
			done <- struct{}{}
		}
	})
	data := make([]byte, size)
	ctx := context.Background()
	want.Store(int64(b.N))
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; {
		err := a.Send(ctx, nb.RID(), seqSend(nb.RID(), uint64(i+1), data))
		if err == nil {
			i++
			continue
		}
		if !errors.Is(err, ErrBackpressure) {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Microsecond)
	}
	<-done
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkTransportRequestReply: sequential Node.Request with a 1 KiB
// payload echoed back; one op = one round trip.
func BenchmarkTransportRequestReply(b *testing.B) { benchRequestReply(b, benchNodes, benchPayload) }

func benchRequestReply(b *testing.B, nodes func(*testing.B, Handler) (*Node, *Node), size int) {
	a, nb := nodes(b, echoHandler(nil))
	data := make([]byte, size)
	ctx := context.Background()
	b.SetBytes(2 * int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := a.Request(ctx, nb.RID(), spotRequest(nb.RID(), uint64(i+1), data)); err != nil {
			b.Fatal(err)
		}
	}
}

// rawPair is a stock zmq4 DEALER connected to a stock ROUTER.
func rawPair(b *testing.B) (zmq4.Socket, zmq4.Socket) {
	b.Helper()
	ctx := context.Background()
	r := zmq4.NewRouter(ctx, zmq4.WithLogger(discardLog()))
	if err := r.Listen("tcp://127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	d := zmq4.NewDealer(ctx, zmq4.WithID(zmq4.SocketIdentity("raw-dealer")), zmq4.WithLogger(discardLog()))
	if err := d.Dial("tcp://" + r.Addr().String()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Close(); _ = r.Close() })
	return d, r
}

// benchFrames is a spotSend/spotRequest with a 1 KiB payload, encoded once:
// the raw baseline carries the same bytes.
func benchFrames(b *testing.B, rec *router.Record) [][]byte {
	if c, ok := rec.Body.(*router.SpotRequest); ok {
		c.Correlation = 1
	}
	frames, err := router.Encode(rec)
	if err != nil {
		b.Fatal(err)
	}
	return frames
}

// BenchmarkRawZmq4OneWay: the same frames DEALER → ROUTER on stock zmq4.
func BenchmarkRawZmq4OneWay(b *testing.B) {
	d, r := rawPair(b)
	frames := benchFrames(b, seqSend(RID("x"), 1, make([]byte, benchPayload)))
	done := make(chan error, 1)
	n := b.N
	b.SetBytes(benchPayload)
	b.ResetTimer()
	go func() {
		for i := 0; i < n; i++ {
			if _, err := r.Recv(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := 0; i < n; i++ {
		if err := d.Send(zmq4.NewMsgFrom(frames...)); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkRawZmq4RequestReply: DEALER sends the request frames, the ROUTER
// echoes them back, the DEALER receives; one op = one round trip.
func BenchmarkRawZmq4RequestReply(b *testing.B) {
	d, r := rawPair(b)
	frames := benchFrames(b, spotRequest(RID("x"), 1, make([]byte, benchPayload)))
	go func() {
		for {
			m, err := r.Recv()
			if err != nil {
				return
			}
			if err := r.Send(m); err != nil {
				return
			}
		}
	}()
	b.SetBytes(2 * benchPayload)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := d.Send(zmq4.NewMsgFrom(frames...)); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Recv(); err != nil {
			b.Fatal(err)
		}
	}
}
