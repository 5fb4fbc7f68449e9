package activation

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func sample() Record {
	return Record{SpotID: "room-7", StableType: "Room", MeshName: "objects", TargetRID: []byte{2, 2}, TargetGen: 3,
		SourceRID: []byte{1, 1}, SourceGen: 9, SourceSpotID: "entry:x", Operation: [16]byte{1, 2, 3}, Request: true,
		ReplyRouteID: 77, DeadlineUnixMs: 1_800_000_000_000, Metadata: []byte{0, 1}, Body: []byte("hello")}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{sample(), func() Record {
		r := sample()
		r.Request, r.ReplyRouteID, r.Metadata, r.SourceSpotID, r.Body = false, 0, nil, "", nil
		return r
	}()} {
		b, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if got.SpotID != r.SpotID || got.ReplyRouteID != r.ReplyRouteID || !bytes.Equal(got.Body, r.Body) ||
			got.Operation != r.Operation || !bytes.Equal(got.TargetRID, r.TargetRID) || got.SourceGen != r.SourceGen ||
			!bytes.Equal(got.Metadata, r.Metadata) || got.DeadlineUnixMs != r.DeadlineUnixMs {
			t.Fatalf("round trip: got %+v, want %+v", got, r)
		}
		again, _ := got.Encode()
		if !bytes.Equal(again, b) {
			t.Fatal("re-encoding a decoded record changed its bytes (the checksum would differ)")
		}
	}
}

func TestRecordRefusals(t *testing.T) {
	good, _ := sample().Encode()
	big := sample()
	big.Body = make([]byte, MaxRecordBytes)
	sendWithRoute := sample()
	sendWithRoute.Request = false
	noOp := sample()
	noOp.Operation = [16]byte{}
	for _, tc := range []struct {
		name string
		enc  *Record
		dec  []byte
		want error
	}{
		{name: "encode too large", enc: &big, want: ErrTooLarge},
		{name: "encode send with reply route", enc: &sendWithRoute, want: ErrMalformed},
		{name: "encode zero operation", enc: &noOp, want: ErrMalformed},
		{name: "decode empty", dec: nil, want: ErrMalformed},
		{name: "decode other version", dec: []byte(strings.Replace(string(good), "-v1\n", "-v9\n", 1)), want: ErrMalformed},
		{name: "decode truncated", dec: good[:len(magic)+2], want: ErrMalformed},
		{name: "decode header length past end", dec: append([]byte(magic), 0xff, 0xff, 0xff, 0xff), want: ErrMalformed},
		{name: "decode flipped header byte", dec: func() []byte {
			b := append([]byte(nil), good...)
			b[len(magic)+4] = '['
			return b
		}(), want: ErrMalformed},
		{name: "decode too large", dec: make([]byte, MaxRecordBytes+1), want: ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.enc != nil {
				_, err = tc.enc.Encode()
			} else {
				_, err = Decode(tc.dec)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestReferenceIsFixedPerOperation(t *testing.T) {
	a := Reference("room-7", []byte{1}, 2, [16]byte{3})
	if a != Reference("room-7", []byte{1}, 2, [16]byte{3}) {
		t.Fatal("the same activation must get the same reference")
	}
	for _, other := range []string{
		Reference("room-8", []byte{1}, 2, [16]byte{3}),
		Reference("room-7", []byte{9}, 2, [16]byte{3}),
		Reference("room-7", []byte{1}, 3, [16]byte{3}),
		Reference("room-7", []byte{1}, 2, [16]byte{4}),
	} {
		if other == a {
			t.Fatalf("two activations share reference %s", a)
		}
	}
	if len(a) > 4096 {
		t.Fatalf("reference is %d bytes, the Relocation Store takes 4096", len(a))
	}
}

// §7.1 second table, "Type omitted" row, and "Even if multiple nodes
// register the same type, it's treated as one type".
func TestChooseType(t *testing.T) {
	for _, tc := range []struct {
		name      string
		offered   []string
		requested string
		want      string
		err       error
	}{
		{"named is used as given", []string{"A", "B"}, "B", "B", nil},
		{"named even if nobody offers it", nil, "C", "C", nil},
		{"omitted, none offered", nil, "", "", ErrNoInstanceType},
		{"omitted, one offered", []string{"Room"}, "", "Room", nil},
		{"omitted, one type on several nodes", []string{"Room", "Room", "Room"}, "", "Room", nil},
		{"omitted, two offered", []string{"Room", "Lobby"}, "", "", ErrAmbiguousType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChooseType(tc.offered, tc.requested)
			if !errors.Is(err, tc.err) || got != tc.want {
				t.Fatalf("ChooseType = %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// §7.1's restart table, plus §10's DataLost rule.
func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		s    Situation
		want Action
	}{
		{Situation{Row: RowCreating, OwnerEnded: false}, Leave},
		{Situation{Row: RowCreating, OwnerEnded: true, Payload: PayloadIntact}, Cancel},
		{Situation{Row: RowCreating, OwnerEnded: true, Payload: PayloadMissing}, Cancel},
		{Situation{Row: RowReadyPending, OwnerEnded: false, Payload: PayloadIntact}, Leave},
		{Situation{Row: RowReadyPending, OwnerEnded: true, Payload: PayloadIntact}, Restore},
		{Situation{Row: RowReadyPending, OwnerEnded: true, Payload: PayloadMissing}, DataLost},
		{Situation{Row: RowReadyPending, OwnerEnded: true, Payload: PayloadCorrupt}, DataLost},
		{Situation{Row: RowReady, OwnerEnded: true}, Leave},
		{Situation{Row: RowMissing, OwnerEnded: true}, Leave},
	} {
		if got := Decide(tc.s); got != tc.want {
			t.Errorf("Decide(%v, ended=%v, %v) = %v, want %v", tc.s.Row, tc.s.OwnerEnded, tc.s.Payload, got, tc.want)
		}
	}
}
