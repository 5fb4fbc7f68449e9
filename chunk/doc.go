// Package chunk is the Restore payload core of a cross-node Actor/Spot move
// (spec §1.3 steps 3–8, §9.1, §9.4): it turns one captured object into a
// versioned byte payload, splits the payload into chunks declared by
// length, count and CRC-32C (Castagnoli), and on the target reassembles and
// verifies those chunks under the binding (RelocationId, target attempt,
// source fence) that ties a Restore request to its chunks.
//
// The package is pure: no sockets, no store, no clock, no goroutines. The
// relocation coordinator in mesh/ moves the bytes (records 40 and 52,
// docs/PROTOCOL.md), owns deadlines, and maps the typed errors here to the
// explicit failure it sends back (record 53). The byte layout, binding and
// assembly rules are documented in docs/RESTORE-PAYLOAD.md.
//
// Source side:
//
//	payload, err := chunk.Encode(&chunk.Payload{...}, chunk.EncodeOptions{})
//	t, err := chunk.Split(payload, chunkSize)
//	// send 40 declaring t.Declaration, then 52 for each t.Chunks[i] in order
//
// Target side:
//
//	reg, _ := chunk.NewRegistry(chunk.Limits{})
//	begun, err := reg.Begin(binding, declaration) // on 40
//	progress, err := reg.Add(binding, index, data) // on each 52
//	if progress.Ready { payload, err := reg.Complete(binding) }
//	p, err := chunk.Decode(payload, chunk.Limits{})
//	reg.Abort(binding) // on 55, deadline or failure (§9.4 step 4)
package chunk
