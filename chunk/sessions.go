package chunk

import (
	"fmt"
	"math"

	"github.com/meshnode/meshnode/spot"
)

// SessionBinding is one bound Session of the moving Actor as its host
// recorded it (docs/RELOCATION.md "Bound Sessions"): the target sends each
// Session owner command 44 commit after its owner CAS, so the bindings
// travel with the object. Only an Actor payload carries them (command 44
// names an Actor).
type SessionBinding struct {
	// SessionRID is the Session's RoutingId, 1..255 bytes, unique in the
	// payload.
	SessionRID []byte
	// OwnerNodeRID and OwnerNodeGeneration are the node run that owns the
	// Session (the messages' origin); RID 1..255 bytes, generation nonzero.
	OwnerNodeRID        []byte
	OwnerNodeGeneration uint64
	// OwnerID and OwnerLeaseGeneration are that node run's host run, from
	// its descriptor. OwnerID is "" (and the lease generation 0) when the
	// host did not know it; otherwise 1..255 bytes UTF-8 without NUL and a
	// nonzero generation.
	OwnerID              string
	OwnerLeaseGeneration uint64
	// BindingGeneration is the Session's binding generation (nonzero).
	BindingGeneration uint64
	// HighestSequence is the highest SourceSessionSequence the host saw
	// from the Session (0: none).
	HighestSequence uint64
}

// Session section constants (docs/RESTORE-PAYLOAD.md §2).
const (
	// versionNoSessions is the format version written when a payload has
	// no sessions: byte for byte what builds without the section write.
	versionNoSessions = 1
	// minSession is a session entry with 1-byte RIDs and no owner id.
	minSession = 1 + 1 + 1 + 1 + 8 + 1 + 8 + 8 + 8
)

// version is the format version p is written in.
func (p *Payload) version() byte {
	if len(p.Sessions) == 0 {
		return versionNoSessions
	}
	return FormatVersion
}

// validateSessions checks the session section (encode side).
func (p *Payload) validateSessions() error {
	if len(p.Sessions) == 0 {
		return nil
	}
	if p.Object.Kind != spot.KindActor {
		return invalid("sessions", "only an Actor has bound sessions (the object is a %v)", p.Object.Kind)
	}
	if uint64(len(p.Sessions)) > math.MaxUint32 {
		return fmt.Errorf("%w: session count above 2^32-1", ErrTooLarge)
	}
	seen := make(map[string]struct{}, len(p.Sessions))
	for i := range p.Sessions {
		if e := checkSession(&p.Sessions[i]); e != "" {
			return invalid(fmt.Sprintf("sessions[%d]", i), "%s", e)
		}
		if _, dup := seen[string(p.Sessions[i].SessionRID)]; dup {
			return invalid(fmt.Sprintf("sessions[%d].sessionRid", i), "duplicate session %x", p.Sessions[i].SessionRID)
		}
		seen[string(p.Sessions[i].SessionRID)] = struct{}{}
	}
	return nil
}

// checkSession returns "" when one entry keeps the section's rules, else
// why not. Encode and Decode share it.
func checkSession(s *SessionBinding) string {
	switch {
	case len(s.SessionRID) == 0 || len(s.SessionRID) > 255:
		return fmt.Sprintf("sessionRid of %d bytes outside 1..255", len(s.SessionRID))
	case len(s.OwnerNodeRID) == 0 || len(s.OwnerNodeRID) > 255:
		return fmt.Sprintf("ownerNodeRid of %d bytes outside 1..255", len(s.OwnerNodeRID))
	case s.OwnerNodeGeneration == 0:
		return "ownerNodeGeneration is 0"
	case s.BindingGeneration == 0:
		return "bindingGeneration is 0"
	case (s.OwnerID == "") != (s.OwnerLeaseGeneration == 0):
		return fmt.Sprintf("ownerId %q with ownerLeaseGeneration %d (both or neither)", s.OwnerID, s.OwnerLeaseGeneration)
	}
	if s.OwnerID != "" {
		if e := checkText8(s.OwnerID); e != "" {
			return "ownerId: " + e
		}
	}
	return ""
}

// sessionsLen is the size of the session section (0 in version 1).
func (p *Payload) sessionsLen() uint64 {
	if len(p.Sessions) == 0 {
		return 0
	}
	n := uint64(4)
	for _, s := range p.Sessions {
		n += minSession - 2 + uint64(len(s.SessionRID)+len(s.OwnerNodeRID)+len(s.OwnerID))
	}
	return n
}

func (p *Payload) putSessions(w *writer) {
	if len(p.Sessions) == 0 {
		return
	}
	w.u32(len(p.Sessions))
	for _, s := range p.Sessions {
		w.u8(byte(len(s.SessionRID)))
		w.raw(s.SessionRID)
		w.u8(byte(len(s.OwnerNodeRID)))
		w.raw(s.OwnerNodeRID)
		w.u64(s.OwnerNodeGeneration)
		w.u8(byte(len(s.OwnerID)))
		w.str(s.OwnerID)
		w.u64(s.OwnerLeaseGeneration)
		w.u64(s.BindingGeneration)
		w.u64(s.HighestSequence)
	}
}

// decodeSessions reads the version 2 session section: at least one entry,
// each keeping checkSession, session RIDs unique, only in an Actor payload.
func (r *reader) decodeSessions(p *Payload) {
	at := r.off
	n := r.count(named("sessions.count"), minSession)
	if r.err != nil {
		return
	}
	switch {
	case n == 0:
		r.fail(ErrInvalid, named("sessions.count"), at, "version 2 carries at least one session (version 1 has none)")
		return
	case p.Object.Kind != spot.KindActor:
		r.fail(ErrInvalid, named("sessions"), at, fmt.Sprintf("only an Actor has bound sessions (the object is a %v)", p.Object.Kind))
		return
	}
	p.Sessions = make([]SessionBinding, n)
	seen := make(map[string]struct{}, n)
	for i := 0; i < n && r.err == nil; i++ {
		s := &p.Sessions[i]
		at := r.off
		item := func(name string) field { return field{list: "sessions", index: i, name: name} }
		s.SessionRID = r.take(item("sessionRid"), uint64(r.u8(item("sessionRid"))))
		s.OwnerNodeRID = r.take(item("ownerNodeRid"), uint64(r.u8(item("ownerNodeRid"))))
		s.OwnerNodeGeneration = r.u64(item("ownerNodeGeneration"))
		s.OwnerID = string(r.take(item("ownerId"), uint64(r.u8(item("ownerId")))))
		s.OwnerLeaseGeneration = r.u64(item("ownerLeaseGeneration"))
		s.BindingGeneration = r.u64(item("bindingGeneration"))
		s.HighestSequence = r.u64(item("highestSequence"))
		if r.err != nil {
			return
		}
		if e := checkSession(s); e != "" {
			r.fail(ErrInvalid, item(""), at, e)
			return
		}
		if _, dup := seen[string(s.SessionRID)]; dup {
			r.fail(ErrInvalid, item("sessionRid"), at, fmt.Sprintf("duplicate session %x", s.SessionRID))
			return
		}
		seen[string(s.SessionRID)] = struct{}{}
	}
}
