package chunk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/spot"
)

// newRand returns a deterministic generator so that failures reproduce.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	i := 0
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	for ; i < n; i++ {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// randPayload builds an arbitrary valid payload; sizes stay small so that
// many can be tried.
func randPayload(rng *rand.Rand) *Payload {
	p := &Payload{Object: Object{
		Kind:       []spot.ObjectKind{spot.KindActor, spot.KindUserSpot, spot.KindInstanceSpot}[rng.IntN(3)],
		ID:         fmt.Sprintf("obj-%d-é", rng.Uint64()),
		Generation: 1 + rng.Uint64N(maxGeneration),
		StableType: strings.Repeat("t", 1+rng.IntN(255)),
	}}
	if rng.IntN(2) == 0 {
		p.Policy = spot.PolicyRecreate
	} else {
		p.Policy = spot.PolicyPreserveState
		p.State = randBytes(rng, rng.IntN(3)*rng.IntN(5000)) // often 0
	}
	nq := rng.IntN(3) * rng.IntN(40)
	for i := 0; i < nq; i++ {
		env := spot.Envelope{Kind: []spot.EnvelopeKind{spot.Send, spot.Request, spot.Timer}[rng.IntN(3)]}
		env.Body = randBytes(rng, rng.IntN(300))
		env.Meta = randBytes(rng, rng.IntN(40))
		switch env.Kind {
		case spot.Request:
			env.ReplyRoute = randBytes(rng, rng.IntN(30))
		case spot.Timer:
			env.Timer = fmt.Sprintf("tick%d", rng.IntN(5))
		}
		p.Captured.Queue = append(p.Captured.Queue, env)
	}
	nt := rng.IntN(6)
	for i := 0; i < nt; i++ {
		p.Captured.Timers = append(p.Captured.Timers, spot.TimerState{
			Name:      fmt.Sprintf("timer-%d", i),
			Remaining: time.Duration(rng.Int64N(int64(time.Hour))),
			Period:    time.Duration(rng.Int64N(2)) * time.Duration(rng.Int64N(int64(time.Minute))),
		})
	}
	if p.Object.Kind == spot.KindActor {
		p.Sessions = randSessions(rng, rng.IntN(2)*rng.IntN(4)) // often none
	}
	return p
}

// randSessions returns n session bindings with distinct session RIDs.
func randSessions(rng *rand.Rand, n int) []SessionBinding {
	var out []SessionBinding
	for i := 0; i < n; i++ {
		s := SessionBinding{SessionRID: append([]byte{byte(i)}, randBytes(rng, rng.IntN(20))...),
			OwnerNodeRID: randBytes(rng, 1+rng.IntN(40)), OwnerNodeGeneration: 1 + rng.Uint64(),
			BindingGeneration: 1 + rng.Uint64N(9), HighestSequence: rng.Uint64N(3) * rng.Uint64()}
		if rng.IntN(3) != 0 {
			s.OwnerID, s.OwnerLeaseGeneration = fmt.Sprintf("owner-%d", rng.IntN(100)), 1+rng.Uint64N(50)
		}
		out = append(out, s)
	}
	return out
}

// canonical is what Decode gives back for p: empty byte fields are nil.
func canonical(p *Payload) *Payload {
	q := *p
	q.State = nilIfEmpty(p.State)
	q.Captured.Queue = nil
	for _, env := range p.Captured.Queue {
		env.Body, env.ReplyRoute, env.Meta = nilIfEmpty(env.Body), nilIfEmpty(env.ReplyRoute), nilIfEmpty(env.Meta)
		q.Captured.Queue = append(q.Captured.Queue, env)
	}
	q.Captured.Timers = append([]spot.TimerState(nil), p.Captured.Timers...)
	if len(p.Sessions) == 0 {
		q.Sessions = nil
	}
	return &q
}

func equalPayload(t *testing.T, want, got *Payload) {
	t.Helper()
	w, g := canonical(want), got
	if w.Object != g.Object || w.Policy != g.Policy || !bytes.Equal(w.State, g.State) || (w.State == nil) != (g.State == nil) {
		t.Fatalf("payload header/state differ:\nwant %+v state %d bytes\n got %+v state %d bytes", w.Object, len(w.State), g.Object, len(g.State))
	}
	if len(w.Captured.Queue) != len(g.Captured.Queue) {
		t.Fatalf("queue length %d, want %d", len(g.Captured.Queue), len(w.Captured.Queue))
	}
	for i := range w.Captured.Queue {
		a, b := w.Captured.Queue[i], g.Captured.Queue[i]
		if a.Kind != b.Kind || a.Timer != b.Timer || !bytes.Equal(a.Body, b.Body) || !bytes.Equal(a.ReplyRoute, b.ReplyRoute) || !bytes.Equal(a.Meta, b.Meta) ||
			(a.Body == nil) != (b.Body == nil) || (a.Meta == nil) != (b.Meta == nil) || (a.ReplyRoute == nil) != (b.ReplyRoute == nil) {
			t.Fatalf("queue[%d] differs:\nwant %+v\n got %+v", i, a, b)
		}
	}
	if len(w.Captured.Timers) != len(g.Captured.Timers) {
		t.Fatalf("timers %d, want %d", len(g.Captured.Timers), len(w.Captured.Timers))
	}
	for i := range w.Captured.Timers {
		if w.Captured.Timers[i] != g.Captured.Timers[i] {
			t.Fatalf("timers[%d] = %+v, want %+v", i, g.Captured.Timers[i], w.Captured.Timers[i])
		}
	}
	if len(w.Sessions) != len(g.Sessions) || (w.Sessions == nil) != (g.Sessions == nil) {
		t.Fatalf("sessions %d (nil %v), want %d (nil %v)", len(g.Sessions), g.Sessions == nil, len(w.Sessions), w.Sessions == nil)
	}
	for i := range w.Sessions {
		a, b := w.Sessions[i], g.Sessions[i]
		if !bytes.Equal(a.SessionRID, b.SessionRID) || !bytes.Equal(a.OwnerNodeRID, b.OwnerNodeRID) || a.OwnerNodeGeneration != b.OwnerNodeGeneration ||
			a.OwnerID != b.OwnerID || a.OwnerLeaseGeneration != b.OwnerLeaseGeneration || a.BindingGeneration != b.BindingGeneration ||
			a.HighestSequence != b.HighestSequence {
			t.Fatalf("sessions[%d] differs:\nwant %+v\n got %+v", i, a, b)
		}
	}
}

// ---- realistic payloads for benchmarks and compression decisions ----

var (
	words  = strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu")
	status = []string{"active", "idle", "away", "checkout", "banned"}
)

// jsonState renders n application records as JSON, the way a typical
// PreserveStateWith adapter snapshots a map of sessions or a game room.
func jsonState(rng *rand.Rand, n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"version":7,"sessions":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"user":"user-%06d","token":"%016x","status":%q,"score":%d,"updated":"2026-%02d-%02dT%02d:%02d:%02dZ","cart":[`,
			rng.IntN(1_000_000), rng.Uint64(), status[rng.IntN(len(status))], rng.IntN(100000),
			1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60))
		for j, items := 0, rng.IntN(4); j < items; j++ {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"sku":"SKU-%05d","qty":%d,"price":%d,"note":"%s %s"}`, rng.IntN(20000), 1+rng.IntN(5), rng.IntN(50000),
				words[rng.IntN(len(words))], words[rng.IntN(len(words))])
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// messageQueue is n queued application messages: JSON bodies, a 16-byte
// random operation id plus sender in Meta, reply routes on requests.
func messageQueue(rng *rand.Rand, n int) []spot.Envelope {
	q := make([]spot.Envelope, 0, n)
	for i := 0; i < n; i++ {
		env := spot.Envelope{Kind: spot.Send}
		body := fmt.Sprintf(`{"type":"chat.message","room":"room-%04d","from":"user-%06d","seq":%d,"text":"%s %s %s %s","ts":%d}`,
			rng.IntN(500), rng.IntN(1_000_000), i, words[rng.IntN(len(words))], words[rng.IntN(len(words))],
			words[rng.IntN(len(words))], words[rng.IntN(len(words))], 1_770_000_000_000+rng.Int64N(1_000_000_000))
		env.Body = []byte(body)
		env.Meta = append(randBytes(rng, 16), []byte(fmt.Sprintf("node-%02d", rng.IntN(16)))...)
		if i%4 == 0 {
			env.Kind = spot.Request
			env.ReplyRoute = append([]byte("route:"), randBytes(rng, 18)...)
		}
		q = append(q, env)
	}
	return q
}

type namedPayload struct {
	name string
	p    *Payload
}

// realisticPayloads are the shapes the compression decision is measured
// on: a small actor (the common case), a 1 MiB and a 16 MiB JSON state
// with a queue, a chat room that is mostly queue, and an incompressible
// 4 MiB binary state (e.g. an already compressed or encrypted blob).
func realisticPayloads() []namedPayload {
	rng := newRand(42)
	mk := func(state []byte, queue []spot.Envelope) *Payload {
		return &Payload{
			Object:   Object{Kind: spot.KindActor, ID: "room/eu-west/4711", Generation: 17, StableType: "demo.ChatRoom"},
			Policy:   spot.PolicyPreserveState,
			State:    state,
			Captured: spot.Captured{Queue: queue, Timers: []spot.TimerState{{Name: "flush", Remaining: 250 * time.Millisecond, Period: time.Second}}},
		}
	}
	return []namedPayload{
		{"small-actor", mk(jsonState(rng, 2), messageQueue(rng, 3))},
		{"session-1MiB", mk(jsonState(rng, 4200), messageQueue(rng, 200))},
		{"chat-queue-4MiB", mk(jsonState(rng, 100), messageQueue(rng, 20000))},
		{"session-16MiB", mk(jsonState(rng, 68000), messageQueue(rng, 2000))},
		{"binary-4MiB", mk(randBytes(rng, 4<<20), messageQueue(rng, 100))},
	}
}

// testBinding is a valid binding for relocation rel, target attempt att,
// from a fixed source.
func testBinding(rel, att uint64) Binding {
	return Binding{
		Relocation:    RelocationID{High: 0xa5a5, Low: rel},
		TargetAttempt: att,
		Source:        SourceFence{OwnerID: "owner-src", LeaseGeneration: 3, NodeRID: "\x01rid-src", NodeGeneration: 11},
	}
}

// codecByte reads the codec of an encoded payload (255 when too short).
func codecByte(b []byte) Codec {
	if len(b) < 6 {
		return 255
	}
	return Codec(b[5])
}
