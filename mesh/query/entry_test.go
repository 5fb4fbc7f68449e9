package query

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/meshnode/meshnode/mesh/record"
)

// TestMaxEntryBytes: no entry encodes larger than the bound List budgets
// with, whatever its text holds (random bytes, escapes, non-ASCII).
func TestMaxEntryBytes(t *testing.T) {
	if maxEntryBytes < 4*6*record.MaxNameBytes {
		t.Fatalf("maxEntryBytes %d is below four fully escaped names", maxEntryBytes)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"\x01", "\x1f", "<", ">", "&", "\"", "\\", "\u2028", "é", "😀", "a", "\x7f"}
	text := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			s := alphabet[rng.IntN(len(alphabet))]
			if b.Len()+len(s) > n {
				break
			}
			b.WriteString(s)
		}
		return b.String()
	}
	for range 2000 {
		e := Entry{
			ID: text(record.MaxIDBytes), Key: "authority:" + strings.Repeat("a", 64),
			Kind: record.ObjectUserSpot, ObjectGeneration: record.Generation(rng.Uint64() >> 1),
			MeshName: text(record.MaxNameBytes), NodeRID: bytes.Repeat([]byte{0xab}, record.MaxRoutingIDBytes),
			State: StateCreating, StableType: text(record.MaxNameBytes),
			AuthorityOwnerGeneration: record.MaxGeneration, OwnerID: text(record.MaxNameBytes), OwnerLeaseGeneration: 1,
		}
		if n := e.EncodedSize(); n > maxEntryBytes {
			t.Fatalf("entry of %d bytes > maxEntryBytes %d", n, maxEntryBytes)
		}
	}
	// The budget leaves room for the largest envelope.
	p := Page{Next: strings.Repeat("A", MaxContinuationBytes), SnapshotAt: time.Now(), Undecodable: 1 << 40, Number: 1 << 31}
	if entryBudget+p.EncodedSize() > MaxPageBytes {
		t.Fatalf("budget %d + envelope %d > %d", entryBudget, p.EncodedSize(), MaxPageBytes)
	}
}

func TestEntryJSON(t *testing.T) {
	e := Entry{
		ID: "user:42", Key: "authority:644f", Kind: record.ObjectActor, ObjectGeneration: 101,
		MeshName: "game", NodeRID: []byte{0x00, 0xa1}, State: StateReady, StableType: "Player",
		AuthorityOwnerGeneration: 2, OwnerID: "node-7", OwnerLeaseGeneration: 5,
	}
	b, err := json.Marshal(Page{Entries: []Entry{e}, Next: "tok", SnapshotAt: time.UnixMilli(1752000000000), Number: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"entries":[{"id":"user:42","key":"authority:644f","kind":"actor","objectGeneration":"101","meshName":"game","nodeRid":"00a1","state":"ready","stableType":"Player","authorityOwnerGeneration":"2","ownerId":"node-7","ownerLeaseGeneration":"5"}],"next":"tok","snapshotAtEpochMs":"1752000000000","undecodable":0,"page":1}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	if n := (Page{}).EncodedSize(); n != len(`{"entries":[],"next":"","snapshotAtEpochMs":"-62135596800000","undecodable":0,"page":0}`) {
		t.Fatalf("empty page size %d", n)
	}
}

func TestTokenRoundTrip(t *testing.T) {
	req := ListRequest{Kind: record.ObjectUserSpot, StableType: "Room", MeshName: "east", Limit: 5}
	fp := fingerprint(req)
	at := time.UnixMilli(1752000000123).UTC()
	digest := sha256.Sum256([]byte("kept"))
	tokens := []token{
		{format: tokenKeptCursor, digest: digest},
		{format: tokenKeptRows, digest: digest, next: 1<<32 - 1},
	}
	for _, cursor := range []string{"c", "AQID_-", strings.Repeat("z", maxInlineCursor)} {
		tokens = append(tokens, token{format: tokenCursor, cursor: cursor})
	}
	for _, in := range tokens {
		in.fingerprint, in.snapshotAt, in.page = fp, at, 7
		s := in.encode()
		if len(s) > MaxContinuationBytes {
			t.Fatalf("token of %d bytes > %d", len(s), MaxContinuationBytes)
		}
		out, err := parseToken(s, fp)
		if err != nil || out != in {
			t.Fatalf("round trip: %+v %v, want %+v", out, err, in)
		}
	}
	// The longest inline cursor fills the bound exactly; one byte more
	// would cross it (List keeps such a cursor in the store instead).
	if n := base64.RawURLEncoding.EncodedLen(tokenHeaderBytes + maxInlineCursor + checksumBytes); n != MaxContinuationBytes {
		t.Fatalf("longest inline token %d bytes, want %d", n, MaxContinuationBytes)
	}
	if n := base64.RawURLEncoding.EncodedLen(tokenHeaderBytes + maxInlineCursor + 1 + checksumBytes); n <= MaxContinuationBytes {
		t.Fatalf("maxInlineCursor is not the longest: %d more fits", n)
	}
	// Filters are told apart, including which one an empty string is.
	a := fingerprint(ListRequest{Kind: record.ObjectActor, StableType: "x"})
	b := fingerprint(ListRequest{Kind: record.ObjectActor, MeshName: "x"})
	if a == b {
		t.Fatal("type x and mesh x share a fingerprint")
	}
}

func TestRenderTable(t *testing.T) {
	entries := []Entry{
		{ID: "user:42", Key: "authority:aa", Kind: record.ObjectActor, ObjectGeneration: 101, MeshName: "game",
			NodeRID: []byte{0x0a, 0x01}, State: StateReady, StableType: "Player", AuthorityOwnerGeneration: 2,
			OwnerID: "node-7", OwnerLeaseGeneration: 5},
		{ID: "방\tx", Key: "authority:bb", Kind: record.ObjectUserSpot, ObjectGeneration: 7, MeshName: "m",
			NodeRID: []byte{0xff}, State: StateUnavailable, StableType: "Room", AuthorityOwnerGeneration: 1,
			OwnerID: "o", OwnerLeaseGeneration: 9},
	}
	var b bytes.Buffer
	if err := RenderTable(&b, entries); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"ID       KIND      GEN  STATE        TYPE    MESH  NODE RID  OWNER     OWNER GEN  KEY\n" +
		"user:42  actor     101  ready        Player  game  0a01      node-7@5  2          authority:aa\n" +
		"방\\tx     userSpot  7    unavailable  Room    m     ff        o@9       1          authority:bb\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if strings.HasSuffix(line, " ") || !utf8.ValidString(line) {
			t.Fatalf("bad line %q", line)
		}
	}
	b.Reset()
	if err := RenderTable(&b, nil); err != nil || strings.Count(b.String(), "\n") != 1 {
		t.Fatalf("empty table: %q %v", b.String(), err)
	}
}
