package record

import (
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

// The decoder's canonical-base64 check replaced "strict decode, then
// re-encode and compare" with "no line breaks, then strict decode". This
// file pins that the two agree, on hand-picked and on random inputs, and
// measures the parser alone.

// reencodeCanonical is the check decodeCanonicalBase64 replaced.
func reencodeCanonical(s string) ([]byte, bool) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || base64.StdEncoding.EncodeToString(b) != s {
		return nil, false
	}
	return b, true
}

func TestDecodeCanonicalBase64MatchesReencoding(t *testing.T) {
	inputs := []string{
		"", "AQID", "AQI=", "AQ==", "AQ=", "AQ", "AR==", "AQJ=", "AQID\n", "\nAQID", "AQ\r\nID",
		"AQ==\n", "AQ==AQ==", "AQ=\n=", "A===", "====", "AQID ", " AQID", "AQ-_", "AQ+/", "////",
		"AQIDBA==", "AQIDBAU=", "AQIDBAUG", "\r", "\n", "=", "AQ==\r",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "AQgw+/=\r\n -_Zz09"
	for range 20000 {
		n := rng.IntN(13)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		inputs = append(inputs, string(b))
	}
	for range 2000 {
		raw := make([]byte, rng.IntN(10))
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		inputs = append(inputs, base64.StdEncoding.EncodeToString(raw))
	}
	for _, s := range inputs {
		got, gotOK := decodeCanonicalBase64(s)
		want, wantOK := reencodeCanonical(s)
		if gotOK != wantOK || string(got) != string(want) {
			t.Fatalf("%q: decodeCanonicalBase64 = %x, %v; re-encoding check = %x, %v", s, got, gotOK, want, wantOK)
		}
	}
}

func BenchmarkParseJSON(b *testing.B) {
	in := []byte(`{"allocation":{"capacity":{"actors":"0","spots":"1","spotType":{"count":"1","objectKind":"userSpot","stableType":"Room"}},` +
		`"descriptor":{"meshName":"game","routingIdHex":"ab01"},"descriptorLifecycleGeneration":"3","objectKind":"userSpot",` +
		`"stableType":"Room","state":"active"},"authorityOwnerGeneration":"2","objectGeneration":"10","objectId":"room:1",` +
		`"ownerId":"owner-1","ownerLeaseGeneration":"2","payload":"AQID","pendingCreation":null,"recordVersion":1}`)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseJSON(KindAuthority, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKey: one store key (SHA-256 of an authority preimage, hex) —
// every operation computes several.
func BenchmarkKey(b *testing.B) {
	pre := join(string(KindAuthority), "actor", "player:42")
	b.ReportAllocs()
	for b.Loop() {
		_ = Key(pre)
	}
}
