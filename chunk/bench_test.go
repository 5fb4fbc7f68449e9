package chunk

import (
	"testing"

	"github.com/meshnode/meshnode/router"
)

// BenchmarkCodec compares storing the body raw with zstd on realistic
// payloads: each iteration is what the handoff pays in CPU (Encode on the
// source, Decode on the target). It reports the bytes that would travel
// (wire-B/op) next to the raw body size (body-B/op), so the trade-off
// against link bandwidth can be computed (docs/RESTORE-PAYLOAD.md §6).
func BenchmarkCodec(b *testing.B) {
	for _, np := range realisticPayloads() {
		for _, c := range []struct {
			name string
			comp Compression
		}{{"raw", CompressNone}, {"s2", CompressS2}, {"zstd", CompressZstd}} {
			b.Run(np.name+"/"+c.name, func(b *testing.B) {
				raw, err := Encode(np.p, EncodeOptions{Compression: CompressNone})
				if err != nil {
					b.Fatal(err)
				}
				var wire int
				b.SetBytes(int64(len(raw)))
				b.ResetTimer()
				for b.Loop() {
					enc, err := Encode(np.p, EncodeOptions{Compression: c.comp, force: true})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := Decode(enc, Limits{}); err != nil {
						b.Fatal(err)
					}
					wire = len(enc)
				}
				b.ReportMetric(float64(wire), "wire-B/op")
				b.ReportMetric(float64(len(raw)), "body-B/op")
			})
		}
	}
}

// handoff runs the whole core once on a node's long-lived registry:
// Encode, Split, Begin, Add every chunk, Complete (length + CRC-32C
// verification) and Decode. id makes each run's binding new.
func handoff(b *testing.B, reg *Registry, id uint64, p *Payload, comp Compression, chunkSize int) {
	payload, err := Encode(p, EncodeOptions{Compression: comp})
	if err != nil {
		b.Fatal(err)
	}
	tr, err := Split(payload, chunkSize)
	if err != nil {
		b.Fatal(err)
	}
	bd := testBinding(id, 1)
	if _, err := reg.Begin(bd, tr.Declaration); err != nil {
		b.Fatal(err)
	}
	for i, c := range tr.Chunks {
		if _, err := reg.Add(bd, uint32(i), c); err != nil {
			b.Fatal(err)
		}
	}
	out, err := reg.Complete(bd)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := Decode(out, Limits{}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkHandoff measures encode+split+assemble+verify(+decode)
// throughput against a same-run physical baseline: one CRC-32C pass plus
// one copy of the same bytes (what any verified transfer of them costs at
// least). Compare the ns/op of the pipeline with baseline's; MB/s is over
// the raw payload size in both.
func BenchmarkHandoff(b *testing.B) {
	for _, np := range realisticPayloads() {
		raw, err := Encode(np.p, EncodeOptions{Compression: CompressNone})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(np.name+"/baseline-crc+copy", func(b *testing.B) {
			dst := make([]byte, len(raw))
			b.SetBytes(int64(len(raw)))
			var sink uint32
			for b.Loop() {
				sink += router.CRC32C(raw)
				copy(dst, raw)
			}
			_ = sink
		})
		for _, c := range []struct {
			name string
			comp Compression
		}{{"raw", CompressNone}, {"s2", CompressS2}, {"zstd", CompressZstd}} {
			b.Run(np.name+"/pipeline-"+c.name, func(b *testing.B) {
				reg, err := NewRegistry(Limits{})
				if err != nil {
					b.Fatal(err)
				}
				var id uint64
				b.SetBytes(int64(len(raw)))
				for b.Loop() {
					id++
					handoff(b, reg, id, np.p, c.comp, DefaultChunkSize)
				}
			})
		}
	}
}
