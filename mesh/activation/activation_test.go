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

// The reference names one attempt: the operation (SpotId, source run,
// OperationId) and the target node run it was handed to — nothing else of
// the record (a retried store of the attempt lands on it again).
func TestReferenceIsFixedPerAttempt(t *testing.T) {
	base := Record{SpotID: "room-7", SourceRID: []byte{1}, SourceGen: 2, Operation: [16]byte{3}, TargetRID: []byte{5}, TargetGen: 6}
	a := Reference(base)
	same := base
	same.StableType, same.MeshName, same.Body, same.Request, same.ReplyRouteID, same.DeadlineUnixMs = "t", "m", []byte("x"), true, 9, 10
	if a != Reference(same) {
		t.Fatal("the same attempt must get the same reference")
	}
	for _, change := range []func(*Record){
		func(r *Record) { r.SpotID = "room-8" },
		func(r *Record) { r.SourceRID = []byte{9} },
		func(r *Record) { r.SourceGen = 3 },
		func(r *Record) { r.Operation = [16]byte{4} },
		// Another node, or another run of the same node: the sender's
		// retry after a refusal (which may have left a tombstone).
		func(r *Record) { r.TargetRID = []byte{7} },
		func(r *Record) { r.TargetGen = 7 },
	} {
		other := base
		change(&other)
		if Reference(other) == a {
			t.Fatalf("two attempts share reference %s", a)
		}
	}
	big := base
	big.SourceRID, big.TargetRID = make([]byte, 64), make([]byte, 64)
	if n := len(Reference(big)); n > 4096 {
		t.Fatalf("reference is %d bytes, the Relocation Store takes 4096", n)
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
