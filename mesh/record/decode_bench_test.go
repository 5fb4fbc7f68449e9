package record_test

import (
	"testing"

	"github.com/meshnode/meshnode/mesh/record"
)

// Benchmarks of the record codec on the golden fixture's values, so that
// what is measured is exactly what the conformance test pins. The authority
// cases are the rows a creation reads and writes (a plain Spot row of
// ~480 bytes and a Reserved row with pending creation); the MeshNode case is
// a serving node's descriptor.

// fixtureValue returns the value of the fixture record named name.
func fixtureValue(b *testing.B, name string) []byte {
	b.Helper()
	for _, r := range loadFixture(b).Records {
		if r.Name == name {
			return []byte(r.Value)
		}
	}
	b.Fatalf("fixture has no record %q", name)
	return nil
}

var benchAuthorities = []struct{ bench, fixture string }{
	{"spot", "spot user:42 (same Id, different key)"},
	{"pending", "reserved instance spot with pending creation"},
}

func BenchmarkDecodeAuthority(b *testing.B) {
	for _, c := range benchAuthorities {
		b.Run(c.bench, func(b *testing.B) {
			v := fixtureValue(b, c.fixture)
			b.SetBytes(int64(len(v)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := record.DecodeAuthority(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncodeAuthority(b *testing.B) {
	for _, c := range benchAuthorities {
		b.Run(c.bench, func(b *testing.B) {
			v := fixtureValue(b, c.fixture)
			a, err := record.DecodeAuthority(v)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(v)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Encode(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeMeshNode(b *testing.B) {
	v := fixtureValue(b, "server")
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := record.DecodeMeshNode(v); err != nil {
			b.Fatal(err)
		}
	}
}
