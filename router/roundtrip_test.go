package router

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func framesEqual(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestRoundTripEveryCommand checks, for random valid values of every spoken
// command: Decode(Encode(r)) == r, Encode(Decode(b)) == b, and that
// DescribeJSON renders valid JSON.
func TestRoundTripEveryCommand(t *testing.T) {
	iterations := 400
	if testing.Short() {
		iterations = 60
	}
	for _, cmd := range Commands() {
		t.Run(cmd.String(), func(t *testing.T) {
			g := newGen(uint64(cmd) * 7919)
			for i := range iterations {
				s := g.record(cmd)
				frames, err := Encode(s.rec)
				if err != nil {
					t.Fatalf("#%d encode %+v: %v", i, s.rec.Body, err)
				}
				got, err := Decode(frames)
				if err != nil {
					t.Fatalf("#%d decode %x: %v", i, frames, err)
				}
				if got.Command == CmdReply {
					if err := got.ResolveReplyTail(s.kind); err != nil {
						t.Fatalf("#%d resolve tail as %s: %v", i, s.kind, err)
					}
				}
				if !reflect.DeepEqual(got, s.rec) {
					t.Fatalf("#%d round trip differs:\n got %#v\nwant %#v", i, got.Body, s.rec.Body)
				}
				again, err := Encode(got)
				if err != nil || !framesEqual(again, frames) {
					t.Fatalf("#%d re-encode: %v\n got %x\nwant %x", i, err, again, frames)
				}
				js, err := DescribeJSON(got)
				if err != nil || !json.Valid(js) {
					t.Fatalf("#%d describe: %v\n%s", i, err, js)
				}
			}
		})
	}
}

// TestDecodedRawTailReencodes checks that an unresolved reply tail survives
// Decode → Encode byte for byte (the relaying path never needs the context).
func TestDecodedRawTailReencodes(t *testing.T) {
	g := newGen(42)
	n := 0
	for n < 50 {
		s := g.record(CmdReply)
		if s.rec.Body.(*Reply).Tail == nil {
			continue
		}
		n++
		frames, err := Encode(s.rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(frames)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got.Body.(*Reply).Tail.(*RawReplyTail); !ok {
			t.Fatalf("decoded tail %T, want *RawReplyTail", got.Body.(*Reply).Tail)
		}
		again, err := Encode(got)
		if err != nil || !framesEqual(again, frames) {
			t.Fatalf("raw tail re-encode: %v", err)
		}
	}
}
