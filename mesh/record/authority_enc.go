package record

import (
	"encoding/base64"
	"encoding/hex"
	"strconv"
)

// appendAuthority writes a's canonical JSON straight into b, members in
// the RFC 8785 order that encodeCanonical gives them (names are ASCII, so
// bytewise order). The authority record is written on every change of an
// object's authority — a move writes it three or four times, a creation
// twice — and building the value tree first made Authority.Encode 8–11
// allocations and ~2 KB per call. The tree encoder stays the reference:
// TestAuthorityEncodeMatchesTree compares the two on the fixtures and on
// generated records.
func appendAuthority(b []byte, a *Authority) []byte {
	al := &a.Allocation
	w := objWriter{b: b}
	w.open()
	w.name("allocation")
	{
		w.open()
		w.name("capacity")
		{
			w.open()
			w.decStr("actors", uint64(al.Capacity.Actors))
			if st := al.Capacity.SpotType; st != nil {
				w.name("spotType")
				w.open()
				w.decStr("count", uint64(st.Count))
				w.str("objectKind", string(st.ObjectKind))
				w.str("stableType", st.StableType)
				w.close()
			} else {
				w.null("spotType")
			}
			w.decStr("spots", uint64(al.Capacity.Spots))
			w.close()
		}
		w.name("descriptor")
		w.open()
		w.str("meshName", al.Descriptor.MeshName)
		w.hex("routingIdHex", al.Descriptor.RoutingID)
		w.close()
		w.decStr("descriptorLifecycleGeneration", uint64(al.DescriptorLifecycleGeneration))
		w.str("objectKind", string(al.ObjectKind))
		w.str("stableType", al.StableType)
		w.str("state", string(al.State))
		w.close()
	}
	w.decStr("authorityOwnerGeneration", uint64(a.AuthorityOwnerGeneration))
	w.decStr("objectGeneration", uint64(a.ObjectGeneration))
	w.str("objectId", a.ObjectID)
	w.str("ownerId", a.OwnerID)
	w.decStr("ownerLeaseGeneration", uint64(a.OwnerLeaseGeneration))
	w.name("payload")
	w.b = append(w.b, '"')
	w.b = base64.StdEncoding.AppendEncode(w.b, a.Payload)
	w.b = append(w.b, '"')
	if pc := a.PendingCreation; pc != nil {
		w.name("pendingCreation")
		w.open()
		w.str("requestContentReference", pc.RequestContentReference)
		w.decStr("requestEncodedSize", uint64(pc.RequestEncodedSize))
		w.hex("requestSha256", pc.RequestSHA256[:])
		w.str("reservationId", pc.ReservationID)
		w.close()
	} else {
		w.null("pendingCreation")
	}
	w.name("recordVersion")
	w.b = strconv.AppendUint(w.b, RecordVersion, 10)
	if r := a.Relocation; r != nil {
		w.name("relocation")
		w.open()
		if r.PreviousAuthorityOwnerGeneration != 0 {
			w.decStr("previousAuthorityOwnerGeneration", uint64(r.PreviousAuthorityOwnerGeneration))
		} else {
			w.null("previousAuthorityOwnerGeneration")
		}
		w.hex("relocationId", r.RelocationID[:])
		w.hex("reservationId", r.ReservationID[:])
		w.party("source", &r.Source)
		w.str("stage", string(r.Stage))
		w.party("target", &r.Target)
		w.decStr("targetAttempt", uint64(r.TargetAttempt))
		w.close()
	} else {
		w.null("relocation")
	}
	w.close()
	return w.b
}

// authorityLen is an upper bound of appendAuthority's length for a, so that
// the value is written into one allocation (strings are counted with their
// escapes).
func authorityLen(a *Authority) int {
	n := 900 + base64.StdEncoding.EncodedLen(len(a.Payload)) + 2*len(a.Allocation.Descriptor.RoutingID) +
		stringLen(a.ObjectID) + stringLen(a.OwnerID) + stringLen(a.Allocation.StableType) + stringLen(a.Allocation.Descriptor.MeshName)
	if st := a.Allocation.Capacity.SpotType; st != nil {
		n += stringLen(st.StableType)
	}
	if pc := a.PendingCreation; pc != nil {
		n += stringLen(pc.RequestContentReference) + stringLen(pc.ReservationID)
	}
	if r := a.Relocation; r != nil {
		for _, p := range []*RelocationParty{&r.Source, &r.Target} {
			n += 200 + stringLen(p.MeshName) + stringLen(p.OwnerID) + 2*len(p.RoutingID)
		}
	}
	return n
}

// objWriter appends one canonical JSON value member by member; callers
// write members in canonical order.
type objWriter struct {
	b     []byte
	first bool // no member written yet in the innermost open object
}

func (w *objWriter) open() { w.b = append(w.b, '{'); w.first = true }

// close ends the innermost object; the object that holds it has at least
// that member, so a following member needs its comma.
func (w *objWriter) close() { w.b = append(w.b, '}'); w.first = false }

func (w *objWriter) name(n string) {
	if !w.first {
		w.b = append(w.b, ',')
	}
	w.first = false
	w.b = appendString(w.b, n)
	w.b = append(w.b, ':')
}

func (w *objWriter) str(n, s string) { w.name(n); w.b = appendString(w.b, s) }
func (w *objWriter) null(n string)   { w.name(n); w.b = append(w.b, "null"...) }

func (w *objWriter) decStr(n string, u uint64) {
	w.name(n)
	w.b = append(w.b, '"')
	w.b = strconv.AppendUint(w.b, u, 10)
	w.b = append(w.b, '"')
}

func (w *objWriter) hex(n string, p []byte) {
	w.name(n)
	w.b = append(w.b, '"')
	w.b = hex.AppendEncode(w.b, p)
	w.b = append(w.b, '"')
}

func (w *objWriter) party(n string, p *RelocationParty) {
	w.name(n)
	w.open()
	w.decStr("lifecycleGeneration", uint64(p.LifecycleGeneration))
	w.str("meshName", p.MeshName)
	w.str("ownerId", p.OwnerID)
	w.decStr("ownerLeaseGeneration", uint64(p.OwnerLeaseGeneration))
	w.hex("routingIdHex", p.RoutingID)
	w.close()
}
