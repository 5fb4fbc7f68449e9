package chunk

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/spot"
)

// goldenPayload and goldenHex pin the byte layout documented in
// docs/RESTORE-PAYLOAD.md §2. The hex is assembled by hand from the
// document, field by field, not produced by Encode.
func goldenPayload() *Payload {
	return &Payload{
		Object: Object{Kind: spot.KindActor, ID: "a1", Generation: 5, StableType: "T"},
		Policy: spot.PolicyPreserveState,
		State:  []byte("st"),
		Captured: spot.Captured{
			Queue: []spot.Envelope{
				{Kind: spot.Send, Body: []byte("hi"), Meta: []byte("m")},
				{Kind: spot.Request, ReplyRoute: []byte("r")},
				{Kind: spot.Timer, Timer: "t"},
			},
			Timers: []spot.TimerState{{Name: "t", Remaining: 1500 * time.Millisecond}},
		},
	}
}

var goldenHex = strings.Join([]string{
	"4d4e5250",         // magic "MNRP"
	"01",               // version 1
	"00",               // codec raw
	"01",               // kind actor
	"02",               // policy preserve-state
	"0000000000000005", // objectGeneration 5
	"02" + "6131",      // objectId "a1"
	"01" + "54",        // stableType "T"
	"0000000000000057", // bodyLength 87
	// body
	"0000000000000002" + "7374", // state "st"
	"00000003",                  // queue count
	"01" + "00000002" + "6869" + "0000" + "00000000" + "00000001" + "6d", // send "hi", meta "m"
	"02" + "00000000" + "0000" + "00000001" + "72" + "00000000",          // request, route "r"
	"03" + "00000000" + "0001" + "74" + "00000000" + "00000000",          // timer "t"
	"00000001", // timer count
	"0001" + "74" + "0000000059682f00" + "0000000000000000", // "t", 1.5 s, one-shot
}, "")

func TestGolden(t *testing.T) { checkGolden(t, goldenPayload, goldenHex) }

// checkGolden: payload() encodes to exactly the hand-assembled hexBytes,
// which decode back to payload().
func checkGolden(t *testing.T, payload func() *Payload, hexBytes string) {
	t.Helper()
	want, _ := hex.DecodeString(hexBytes)
	got, err := Encode(payload(), EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encode:\n got %x\nwant %x", got, want)
	}
	p, err := Decode(want, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	equalPayload(t, payload(), p)
}

func TestRoundTripTable(t *testing.T) {
	big := bytes.Repeat([]byte("state-bytes "), 100000)
	cases := []struct {
		name string
		p    *Payload
	}{
		{"recreate empty queue", &Payload{Object: Object{Kind: spot.KindActor, ID: "x", Generation: 1, StableType: "T"}, Policy: spot.PolicyRecreate}},
		{"preserve zero-length state", &Payload{Object: Object{Kind: spot.KindUserSpot, ID: "x", Generation: maxGeneration, StableType: "T"}, Policy: spot.PolicyPreserveState, State: []byte{}}},
		{"preserve nil state", &Payload{Object: Object{Kind: spot.KindInstanceSpot, ID: "x", Generation: 2, StableType: "T"}, Policy: spot.PolicyPreserveState}},
		{"large compressible state", &Payload{Object: Object{Kind: spot.KindActor, ID: "x", Generation: 3, StableType: "T"}, Policy: spot.PolicyPreserveState, State: big}},
		{"golden", goldenPayload()},
		{"recreate with queue and timers", &Payload{Object: Object{Kind: spot.KindActor, ID: "ü/1", Generation: 9, StableType: "T"}, Policy: spot.PolicyRecreate,
			Captured: spot.Captured{Queue: messageQueue(newRand(1), 50), Timers: []spot.TimerState{{Name: "", Remaining: 0, Period: time.Hour}, {Name: "b", Remaining: math.MaxInt64, Period: math.MaxInt64}}}}},
	}
	for _, c := range cases {
		for _, o := range allEncodings {
			b, err := Encode(c.p, o)
			if err != nil {
				t.Fatalf("%s/%v: %v", c.name, o.Compression, err)
			}
			if o.force && codecByte(b) != codecOf[o.Compression] {
				t.Fatalf("%s/%v: codec %v", c.name, o.Compression, codecByte(b))
			}
			comp := o.Compression
			got, err := Decode(b, Limits{})
			if err != nil {
				t.Fatalf("%s/%d: decode: %v", c.name, comp, err)
			}
			equalPayload(t, c.p, got)
		}
	}
}

func TestRoundTripRandom(t *testing.T) {
	rng := newRand(7)
	n := 400
	if testing.Short() {
		n = 100
	}
	for i := 0; i < n; i++ {
		p := randPayload(rng)
		b, err := Encode(p, allEncodings[rng.IntN(len(allEncodings))])
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		got, err := Decode(b, Limits{})
		if err != nil {
			t.Fatalf("case %d: decode: %v", i, err)
		}
		equalPayload(t, p, got)
	}
}

// allEncodings are the encode options round trips try: every codec, kept
// by choice and forced.
var allEncodings = []EncodeOptions{
	{Compression: CompressNone},
	{Compression: CompressS2}, {Compression: CompressS2, force: true},
	{Compression: CompressZstd}, {Compression: CompressZstd, force: true},
}

var codecOf = map[Compression]Codec{CompressNone: CodecRaw, CompressS2: CodecS2, CompressZstd: CodecZstd}

func TestCompressionChoice(t *testing.T) {
	rng := newRand(3)
	obj := Object{Kind: spot.KindActor, ID: "x", Generation: 1, StableType: "T"}
	compressible := bytes.Repeat([]byte("abcdefgh"), 4096)
	for _, comp := range []Compression{CompressS2, CompressZstd} {
		cases := []struct {
			name  string
			state []byte
			force bool
			want  Codec
		}{
			{"compressible", compressible, false, codecOf[comp]},
			{"incompressible", randBytes(rng, 64<<10), false, CodecRaw},
			{"below AutoMinBody", bytes.Repeat([]byte("a"), AutoMinBody-100), false, CodecRaw},
			{"forced incompressible", randBytes(rng, 8<<10), true, codecOf[comp]},
		}
		for _, c := range cases {
			b, err := Encode(&Payload{Object: obj, Policy: spot.PolicyPreserveState, State: c.state}, EncodeOptions{Compression: comp, force: c.force})
			if err != nil {
				t.Fatalf("%v %s: %v", comp, c.name, err)
			}
			if got := codecByte(b); got != c.want {
				t.Errorf("%v %s: codec %v, want %v", comp, c.name, got, c.want)
			}
		}
		// A saving below 1/8 is not kept, unless it is what makes the
		// payload fit MaxPayload.
		state := append(randBytes(rng, 32<<10), make([]byte, 3<<10)...)
		pl := &Payload{Object: obj, Policy: spot.PolicyPreserveState, State: state}
		if b, err := Encode(pl, EncodeOptions{Compression: comp}); err != nil || codecByte(b) != CodecRaw {
			t.Fatalf("%v: small saving: codec %v err %v", comp, codecByte(b), err)
		}
		lim := Limits{MaxPayload: 34 << 10, MaxBody: 1 << 20}
		if b, err := Encode(pl, EncodeOptions{Compression: comp, Limits: lim}); err != nil || codecByte(b) != codecOf[comp] {
			t.Fatalf("%v: fit by compression: err %v", comp, err)
		}
	}
	if b, err := Encode(&Payload{Object: obj, Policy: spot.PolicyPreserveState, State: compressible}, EncodeOptions{}); err != nil || codecByte(b) != CodecRaw {
		t.Fatalf("default: codec %v err %v", codecByte(b), err)
	}
	if _, err := Encode(&Payload{Object: obj, Policy: spot.PolicyPreserveState, State: compressible}, EncodeOptions{Limits: Limits{MaxPayload: 16 << 10, MaxBody: 1 << 20}}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("raw above MaxPayload: %v", err)
	}
	if _, err := Encode(goldenPayload(), EncodeOptions{Compression: 9}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("undefined compression: %v", err)
	}
}

func TestEncodeInvalid(t *testing.T) {
	ok := func() *Payload { return goldenPayload() }
	cases := []struct {
		name   string
		mutate func(p *Payload)
		want   error
	}{
		{"kind zero", func(p *Payload) { p.Object.Kind = 0 }, ErrInvalid},
		{"policy disabled", func(p *Payload) { p.Policy = spot.PolicyDisabled }, ErrInvalid},
		{"policy undefined", func(p *Payload) { p.Policy = 9 }, ErrInvalid},
		{"generation zero", func(p *Payload) { p.Object.Generation = 0 }, ErrInvalid},
		{"generation sentinel+1", func(p *Payload) { p.Object.Generation = 1 << 63 }, ErrInvalid},
		{"id empty", func(p *Payload) { p.Object.ID = "" }, ErrInvalid},
		{"id 256 bytes", func(p *Payload) { p.Object.ID = strings.Repeat("a", 256) }, ErrInvalid},
		{"id bad utf8", func(p *Payload) { p.Object.ID = "\xff" }, ErrInvalid},
		{"type NUL", func(p *Payload) { p.Object.StableType = "a\x00" }, ErrInvalid},
		{"recreate with state", func(p *Payload) { p.Policy = spot.PolicyRecreate }, ErrInvalid},
		{"envelope kind zero", func(p *Payload) { p.Captured.Queue[0].Kind = 0 }, ErrInvalid},
		{"timer name on send", func(p *Payload) { p.Captured.Queue[0].Timer = "x" }, ErrInvalid},
		{"reply route on send", func(p *Payload) { p.Captured.Queue[0].ReplyRoute = []byte("x") }, ErrInvalid},
		{"reply route on timer", func(p *Payload) { p.Captured.Queue[2].ReplyRoute = []byte("x") }, ErrInvalid},
		{"timer name too long", func(p *Payload) { p.Captured.Queue[2].Timer = strings.Repeat("x", 65536) }, ErrTooLarge},
		{"duplicate timer", func(p *Payload) {
			p.Captured.Timers = append(p.Captured.Timers, p.Captured.Timers[0])
		}, ErrInvalid},
		{"negative remaining", func(p *Payload) { p.Captured.Timers[0].Remaining = -1 }, ErrInvalid},
		{"negative period", func(p *Payload) { p.Captured.Timers[0].Period = -time.Second }, ErrInvalid},
		{"body above MaxBody", func(p *Payload) { p.State = make([]byte, DefaultMaxPayload) }, ErrTooLarge},
	}
	for _, c := range cases {
		p := ok()
		c.mutate(p)
		_, err := Encode(p, EncodeOptions{})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := Encode(nil, EncodeOptions{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil payload: %v", err)
	}
	if _, err := Encode(ok(), EncodeOptions{Limits: Limits{MaxPayload: MaxPayloadBound + 1}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad limits: %v", err)
	}
}

// golden returns a fresh copy of the golden bytes for mutation.
func golden(t *testing.T) []byte {
	t.Helper()
	b, err := hex.DecodeString(goldenHex)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Offsets into the golden payload.
const (
	gHeaderLen = 16 + 3 + 2 + 8 // fixed + id + type + bodyLength = 29
	gBody      = gHeaderLen
	gQueue     = gBody + 10 // queue count
	gEnv0      = gQueue + 4
	gEnv1      = gEnv0 + 18
	gEnv2      = gEnv1 + 16
	gTimers    = gEnv2 + 16
	gTimer0    = gTimers + 4
)

// Mutations of a valid payload for decode error tables.
func put64(off int, v uint64) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint64(b[off:], v); return b }
}

func put32(off int, v uint32) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], v); return b }
}

func set(off int, v byte) func([]byte) []byte {
	return func(b []byte) []byte { b[off] = v; return b }
}

// decodeCase is one mutation of a valid payload and the typed error (and
// failing field) Decode must answer.
type decodeCase struct {
	name   string
	mutate func([]byte) []byte
	want   error
	field  string
}

// checkDecodeErrors runs the cases on fresh copies of the payload hexBytes.
func checkDecodeErrors(t *testing.T, hexBytes string, cases []decodeCase) {
	t.Helper()
	for _, c := range cases {
		b, err := hex.DecodeString(hexBytes)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Decode(c.mutate(b), Limits{})
		var fe *FormatError
		if !errors.Is(err, c.want) || !errors.Is(err, ErrMalformed) || !errors.As(err, &fe) {
			t.Errorf("%s: err %v, want %v (and ErrMalformed)", c.name, err, c.want)
			continue
		}
		if fe.Field != c.field {
			t.Errorf("%s: field %q, want %q (%v)", c.name, fe.Field, c.field, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	checkDecodeErrors(t, goldenHex, []decodeCase{
		{"empty", func(b []byte) []byte { return nil }, ErrTruncated, "magic"},
		{"bad magic", set(0, 'X'), ErrMagic, "magic"},
		{"version 3", set(4, 3), ErrVersion, "version"},
		{"version 0", set(4, 0), ErrVersion, "version"},
		{"codec 3", set(5, 3), ErrInvalid, "codec"},
		{"codec s2 on a raw body", set(5, 1), ErrCorrupt, "body"},
		{"codec zstd on a raw body", set(5, 2), ErrCorrupt, "body"},
		{"kind 0", set(6, 0), ErrInvalid, "object.kind"},
		{"kind 4", set(6, 4), ErrInvalid, "object.kind"},
		{"policy 0 (disabled)", set(7, 0), ErrInvalid, "policy"},
		{"policy 3", set(7, 3), ErrInvalid, "policy"},
		{"generation 0", put64(8, 0), ErrInvalid, "object.generation"},
		{"generation 2^63", put64(8, 1<<63), ErrInvalid, "object.generation"},
		{"id length 0", set(16, 0), ErrInvalid, "object.id"},
		{"id bad utf8", set(17, 0xff), ErrInvalid, "object.id"},
		{"id NUL", set(17, 0), ErrInvalid, "object.id"},
		{"type length past end", set(19, 200), ErrTruncated, "object.stableType"},
		{"body length short", put64(21, 86), ErrTrailing, "body"},
		{"body length long", put64(21, 88), ErrTruncated, "body"},
		{"body length above MaxBody", put64(21, DefaultMaxPayload+1), ErrTooLarge, "bodyLength"},
		{"state length past end", put64(gBody, 1<<40), ErrTruncated, "state"},
		{"queue count past end", put32(gQueue, math.MaxUint32), ErrTruncated, "queue.count"},
		{"queue count low", put32(gQueue, 2), ErrTruncated, "timers.count"}, // the 3rd envelope's bytes read as a timer count
		{"envelope kind 0", set(gEnv0, 0), ErrInvalid, "queue[0].kind"},
		{"envelope kind 4", set(gEnv0, 4), ErrInvalid, "queue[0].kind"},
		{"send with timer name", set(gEnv2, 1), ErrInvalid, "queue[2]"},
		{"timer with reply route", set(gEnv1, 3), ErrInvalid, "queue[1]"},
		{"body length past end", put32(gEnv0+1, 1<<31), ErrTruncated, "queue[0].body"},
		{"timer count past end", put32(gTimers, 1000), ErrTruncated, "timers.count"},
		{"remaining above int64", put64(gTimer0+3, 1<<63), ErrInvalid, "timers[0].remaining"},
		{"period above int64", put64(gTimer0+11, math.MaxUint64), ErrInvalid, "timers[0].period"},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, ErrTrailing, "body"},
		{"trailing byte inside body", func(b []byte) []byte {
			b = append(b, 0)
			binary.BigEndian.PutUint64(b[21:], 88)
			return b
		}, ErrTrailing, "body"},
		{"duplicate timer", func(b []byte) []byte {
			b = append(b, b[gTimer0:]...)
			binary.BigEndian.PutUint32(b[gTimers:], 2)
			binary.BigEndian.PutUint64(b[21:], 87+19)
			return b
		}, ErrInvalid, "timers[1].name"},
	})
	if _, err := Decode(golden(t), Limits{MaxPayload: 10, MaxBody: 10, MaxInFlight: 10}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("payload above MaxPayload: %v", err)
	}
}

// TestEnumWireValues pins the wire byte of every object kind and policy
// (docs/RESTORE-PAYLOAD.md §2: the kinds are the wire's
// stateful-object-kind) in both directions, and where Decode reports an
// undefined one: at the byte itself.
func TestEnumWireValues(t *testing.T) {
	for _, k := range []struct {
		kind spot.ObjectKind
		code byte
	}{{spot.KindActor, 1}, {spot.KindUserSpot, 2}, {spot.KindInstanceSpot, 3}} {
		for _, pc := range []struct {
			policy spot.Policy
			code   byte
		}{{spot.PolicyRecreate, 1}, {spot.PolicyPreserveState, 2}} {
			p := &Payload{Object: Object{Kind: k.kind, ID: "x", Generation: 1, StableType: "T"}, Policy: pc.policy}
			b, err := Encode(p, EncodeOptions{})
			if err != nil {
				t.Fatalf("%v/%v: %v", k.kind, pc.policy, err)
			}
			if b[6] != k.code || b[7] != pc.code {
				t.Errorf("%v/%v: kind byte %d, policy byte %d; want %d, %d", k.kind, pc.policy, b[6], b[7], k.code, pc.code)
			}
			got, err := Decode(b, Limits{})
			if err != nil {
				t.Fatalf("%v/%v: decode: %v", k.kind, pc.policy, err)
			}
			equalPayload(t, p, got)
		}
	}
	for _, c := range []struct {
		name   string
		off    int
		v      byte
		at     int // the offset reported: in the body for an envelope
		detail string
	}{
		{"kind", 6, 4, 6, "undefined object kind 4"},
		{"policy", 7, 0, 7, "undefined policy 0"},
		{"envelope kind", gEnv1, 9, gEnv1 - gBody, "undefined envelope kind 9"},
	} {
		b := golden(t)
		b[c.off] = c.v
		_, err := Decode(b, Limits{})
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Offset != c.at || fe.Detail != c.detail {
			t.Errorf("%s %d: %#v, want offset %d, detail %q", c.name, c.v, fe, c.at, c.detail)
		}
	}
}

// Every proper prefix of a valid payload is rejected with a typed error,
// raw or compressed, and nothing panics.
func TestDecodeEveryPrefix(t *testing.T) {
	p := goldenPayload()
	p.State = bytes.Repeat([]byte("compressible "), 1000)
	for _, o := range allEncodings {
		b, err := Encode(p, o)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(b); n++ {
			_, err := Decode(b[:n:n], Limits{})
			if !errors.Is(err, ErrMalformed) || !(errors.Is(err, ErrTruncated) || errors.Is(err, ErrCorrupt)) {
				t.Fatalf("codec %v prefix %d/%d: %v", codecByte(b), n, len(b), err)
			}
		}
	}
}

func TestDecodeCorruptCompressed(t *testing.T) {
	p := goldenPayload()
	p.State = bytes.Repeat([]byte("compressible "), 1000)
	for _, comp := range []Compression{CompressS2, CompressZstd} {
		b, err := Encode(p, EncodeOptions{Compression: comp})
		if err != nil {
			t.Fatal(err)
		}
		hdr := gHeaderLen
		bodyLen := binary.BigEndian.Uint64(b[21:])
		cases := []struct {
			name   string
			mutate func([]byte) []byte
		}{
			{"body length differs from the declared one", func(b []byte) []byte { binary.BigEndian.PutUint64(b[21:], bodyLen+1); return b }},
			{"body length smaller", func(b []byte) []byte { binary.BigEndian.PutUint64(b[21:], bodyLen-1); return b }},
			{"first byte flipped", func(b []byte) []byte { b[hdr] ^= 0xff; return b }},
			{"garbage after", func(b []byte) []byte { return append(b, 1, 2, 3, 4) }},
			{"compressed twice over", func(b []byte) []byte { return append(b, b[hdr:]...) }},
			{"cut", func(b []byte) []byte { return b[:len(b)-3] }},
		}
		for _, c := range cases {
			x := c.mutate(append([]byte(nil), b...))
			if _, err := Decode(x, Limits{}); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%v %s: %v", comp, c.name, err)
			}
		}
	}
}

// A header declaring a huge body (within MaxBody) behind a tiny frame is
// rejected before the body is allocated, and a huge item count behind few
// bytes is rejected before the slice is allocated.
func TestDecodeAllocatesOnlyWhatInputSupports(t *testing.T) {
	lim := Limits{MaxPayload: 1 << 30, MaxBody: 1 << 30}
	huge := uint64(512 << 20)
	// A real small frame whose payload header claims a huge body.
	small, err := Encode(goldenPayload(), EncodeOptions{Compression: CompressZstd, force: true})
	if err != nil {
		t.Fatal(err)
	}
	patched := append([]byte(nil), small...)
	binary.BigEndian.PutUint64(patched[21:], huge)

	// A hand-made frame header declaring the huge size (single segment,
	// 8-byte content size) followed by one empty last raw block.
	forged := append([]byte(nil), small[:gHeaderLen]...)
	binary.BigEndian.PutUint64(forged[21:], huge)
	forged = append(forged, 0x28, 0xb5, 0x2f, 0xfd, 0xe0)
	forged = binary.LittleEndian.AppendUint64(forged, huge)
	forged = append(forged, 0x01, 0x00, 0x00)

	bad := golden(t)
	binary.BigEndian.PutUint32(bad[gQueue:], math.MaxUint32)

	for _, c := range []struct {
		name string
		b    []byte
		want error
	}{{"zstd body length", patched, ErrCorrupt}, {"forged zstd content size", forged, ErrCorrupt}, {"queue count", bad, ErrTruncated}} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Decode(c.b, lim)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: %v", c.name, err)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 8<<20 {
			t.Errorf("%s: decode allocated %d bytes before rejecting", c.name, d)
		}
	}
}

func TestLimitsNormalize(t *testing.T) {
	l, err := Limits{}.Normalize()
	if err != nil || l.MaxPayload != DefaultMaxPayload || l.MaxBody != DefaultMaxPayload || l.MaxInFlight != DefaultMaxInFlight ||
		l.MaxOpen != DefaultMaxOpen || l.Remember != DefaultRemember {
		t.Fatalf("defaults: %+v %v", l, err)
	}
	l, err = Limits{MaxPayload: 4 << 30}.Normalize()
	if err != nil || l.MaxInFlight != 4<<30 {
		t.Fatalf("MaxInFlight follows a large MaxPayload: %+v %v", l, err)
	}
	for _, bad := range []Limits{
		{MaxPayload: MaxPayloadBound + 1},
		{MaxBody: MaxPayloadBound + 1},
		{MaxPayload: 2 << 20, MaxInFlight: 1 << 20},
		{MaxOpen: -1},
		{Remember: -1},
	} {
		if _, err := bad.Normalize(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// spot.MaxTimers timers with names of spot.MaxTimerName bytes fit the
// payload format: the name in its bytes16, the count in its u32, and the
// whole timer table (as bodyLen sizes it) in a quarter of the default
// payload, leaving the rest to the state and the queue. A full table of
// short names round-trips.
func TestSpotTimerLimitsFitThePayload(t *testing.T) {
	if spot.MaxTimerName > math.MaxUint16 || spot.MaxTimers > math.MaxUint32 {
		t.Fatalf("spot.MaxTimerName %d / spot.MaxTimers %d above the format's bytes16 / u32", spot.MaxTimerName, spot.MaxTimers)
	}
	long := strings.Repeat("n", spot.MaxTimerName)
	p := &Payload{Object: Object{Kind: spot.KindActor, ID: "a", Generation: 1, StableType: "s"}, Policy: spot.PolicyRecreate}
	for i := 0; i < spot.MaxTimers; i++ {
		p.Captured.Timers = append(p.Captured.Timers, spot.TimerState{Name: long, Remaining: time.Second})
	}
	n, err := p.bodyLen(math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	if n > DefaultMaxPayload/4 {
		t.Fatalf("%d timers with %d-byte names take %d bytes, above a quarter of the default payload (%d)",
			spot.MaxTimers, spot.MaxTimerName, n, DefaultMaxPayload/4)
	}
	for i := range p.Captured.Timers {
		p.Captured.Timers[i].Name = "t" + strconv.Itoa(i)
	}
	b, err := Encode(p, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := Decode(b, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Captured.Timers) != spot.MaxTimers {
		t.Fatalf("decoded %d timers, want %d", len(q.Captured.Timers), spot.MaxTimers)
	}
}
