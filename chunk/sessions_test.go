package chunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/spot"
)

// sessionsPayload and sessionsHex pin the version 2 layout (the session
// section, docs/RESTORE-PAYLOAD.md §2), assembled by hand from the document.
func sessionsPayload() *Payload {
	return &Payload{
		Object: Object{Kind: spot.KindActor, ID: "a1", Generation: 5, StableType: "T"},
		Policy: spot.PolicyRecreate,
		Sessions: []SessionBinding{{SessionRID: []byte("s1"), OwnerNodeRID: []byte{1, 1}, OwnerNodeGeneration: 7,
			OwnerID: "o", OwnerLeaseGeneration: 3, BindingGeneration: 1, HighestSequence: 9}},
	}
}

var sessionsHex = strings.Join([]string{
	"4d4e5250", "02", "00", "01", "01", "0000000000000005", "02" + "6131", "01" + "54",
	"0000000000000034", // bodyLength 52
	"00000000",         // queue count
	"00000000",         // timer count
	"00000001",         // session count
	"02" + "7331",      // sessionRid "s1"
	"02" + "0101",      // ownerNodeRid
	"0000000000000007", // ownerNodeGeneration
	"01" + "6f",        // ownerId "o"
	"0000000000000003", // ownerLeaseGeneration
	"0000000000000001", // bindingGeneration
	"0000000000000009", // highestSequence
}, "")

// Offsets into sessionsHex.
const (
	sCount = 37
	sEntry = sCount + 4
	sOwner = sEntry + 3 + 3 + 8 // ownerId length
	sLease = sOwner + 2
	sBind  = sLease + 8
)

func TestSessionsGolden(t *testing.T) { checkGolden(t, sessionsPayload, sessionsHex) }

// A payload without sessions is written as version 1, byte for byte what a
// build without the section writes (TestGolden pins those bytes), and one
// with sessions as version 2; both round-trip under every codec.
func TestSessionsVersionAndRoundTrip(t *testing.T) {
	none := sessionsPayload()
	none.Sessions = nil
	unknownOwner := sessionsPayload()
	unknownOwner.Sessions[0].OwnerID, unknownOwner.Sessions[0].OwnerLeaseGeneration = "", 0
	many := goldenPayload()
	many.State = bytes.Repeat([]byte("compressible "), 1000)
	many.Sessions = randSessions(newRand(3), 40)
	cases := []struct {
		name    string
		p       *Payload
		version byte
	}{
		{"no sessions", none, 1},
		{"one session", sessionsPayload(), 2},
		{"owner unknown", unknownOwner, 2},
		{"queue, timers, state and 40 sessions", many, 2},
	}
	for _, c := range cases {
		for _, o := range allEncodings {
			b, err := Encode(c.p, o)
			if err != nil {
				t.Fatalf("%s/%v: %v", c.name, o.Compression, err)
			}
			if b[4] != c.version {
				t.Fatalf("%s: version %d, want %d", c.name, b[4], c.version)
			}
			got, err := Decode(b, Limits{})
			if err != nil {
				t.Fatalf("%s/%v: decode: %v", c.name, o.Compression, err)
			}
			equalPayload(t, c.p, got)
		}
	}
}

func TestSessionsEncodeInvalid(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(p *Payload)
	}{
		{"spot with sessions", func(p *Payload) { p.Object.Kind = spot.KindUserSpot }},
		{"empty session rid", func(p *Payload) { p.Sessions[0].SessionRID = nil }},
		{"session rid 256 bytes", func(p *Payload) { p.Sessions[0].SessionRID = make([]byte, 256) }},
		{"empty owner node rid", func(p *Payload) { p.Sessions[0].OwnerNodeRID = nil }},
		{"owner node generation 0", func(p *Payload) { p.Sessions[0].OwnerNodeGeneration = 0 }},
		{"binding generation 0", func(p *Payload) { p.Sessions[0].BindingGeneration = 0 }},
		{"owner id without lease generation", func(p *Payload) { p.Sessions[0].OwnerLeaseGeneration = 0 }},
		{"lease generation without owner id", func(p *Payload) { p.Sessions[0].OwnerID = "" }},
		{"owner id bad utf8", func(p *Payload) { p.Sessions[0].OwnerID = "\xff" }},
		{"owner id 256 bytes", func(p *Payload) { p.Sessions[0].OwnerID = strings.Repeat("o", 256) }},
		{"duplicate session", func(p *Payload) { p.Sessions = append(p.Sessions, p.Sessions[0]) }},
	}
	for _, c := range cases {
		p := sessionsPayload()
		c.mutate(p)
		if _, err := Encode(p, EncodeOptions{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", c.name, err)
		}
	}
}

func TestSessionsDecodeErrors(t *testing.T) {
	checkDecodeErrors(t, sessionsHex, []decodeCase{
		{"version 1 with a session section", set(4, 1), ErrTrailing, "body"},
		{"version 3", set(4, 3), ErrVersion, "version"},
		{"session count 0", put32(sCount, 0), ErrInvalid, "sessions.count"},
		{"session count past end", put32(sCount, 1000), ErrTruncated, "sessions.count"},
		{"sessions on a spot", set(6, 2), ErrInvalid, "sessions"},
		{"session rid length 0", func(b []byte) []byte {
			b = append(b[:sEntry+1], b[sEntry+3:]...)
			b[sEntry] = 0
			binary.BigEndian.PutUint64(b[21:], 52-2)
			return b
		}, ErrInvalid, "sessions[0]"},
		{"session rid past end", set(sEntry, 200), ErrTruncated, "sessions[0].sessionRid"},
		{"owner node generation 0", put64(sEntry+6, 0), ErrInvalid, "sessions[0]"},
		{"owner id NUL", set(sOwner+1, 0), ErrInvalid, "sessions[0]"},
		{"owner id without lease generation", put64(sLease, 0), ErrInvalid, "sessions[0]"},
		{"binding generation 0", put64(sBind, 0), ErrInvalid, "sessions[0]"},
		{"duplicate session", func(b []byte) []byte {
			b = append(b, b[sEntry:]...)
			binary.BigEndian.PutUint32(b[sCount:], 2)
			binary.BigEndian.PutUint64(b[21:], 52+40)
			return b
		}, ErrInvalid, "sessions[1].sessionRid"},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, ErrTrailing, "body"},
	})
}
