package chunk

import (
	"fmt"
	"unicode/utf8"

	"github.com/meshnode/meshnode/router"
)

// RelocationID is the nonzero 128-bit random identity of one move (§8.1):
// the wire's type, so one vocabulary serves the codec, the registry and the
// coordinator.
type RelocationID = router.RelocationID

// SourceFence identifies the exact source owner and process run that sends
// a Restore: the wire's request-source-fence (docs/PROTOCOL.md), which every
// record 40, 52, 54 and 55 carries. OwnerId and LeaseGeneration are the
// host-run combination of §3.1; the node RID and lifecycle generation pin
// the sending process and connection. The object's AuthorityOwnerGeneration
// is deliberately not part of it: chunks do not carry it, and the target
// checks it against the location record before it begins (§9.1, last
// paragraph), not per chunk.
type SourceFence struct {
	OwnerID         string // 1..255 bytes UTF-8, no NUL
	LeaseGeneration uint64 // nonzero
	// NodeRID holds the source node's routing id (1..255 raw bytes) in a
	// string so that Binding is comparable and can key a map.
	NodeRID        string
	NodeGeneration uint64 // nonzero
}

// Binding is what ties a Restore request, each of its chunks, the cutover
// and the target's owner CAS to one move attempt (§1.3, §9.1). Bindings are
// compared for equality only; in particular TargetAttempt is never ordered
// (§8.1). Binding is comparable and is the registry's key.
type Binding struct {
	Relocation    RelocationID // nonzero
	TargetAttempt uint64       // nonzero; equality only
	Source        SourceFence
}

// Validate checks the binding's nonzero and text rules; it wraps ErrInvalid.
func (b Binding) Validate() error {
	bad := func(field, detail string) error {
		return fmt.Errorf("%w: binding.%s: %s", ErrInvalid, field, detail)
	}
	switch {
	case b.Relocation.IsZero():
		return bad("relocation", "relocation id must be nonzero")
	case b.TargetAttempt == 0:
		return bad("targetAttempt", "target attempt must be nonzero")
	case b.Source.LeaseGeneration == 0:
		return bad("source.leaseGeneration", "must be nonzero")
	case b.Source.NodeGeneration == 0:
		return bad("source.nodeGeneration", "must be nonzero")
	case len(b.Source.NodeRID) == 0 || len(b.Source.NodeRID) > 255:
		return bad("source.nodeRid", fmt.Sprintf("length %d outside 1..255", len(b.Source.NodeRID)))
	}
	if err := checkText8(b.Source.OwnerID); err != "" {
		return bad("source.ownerId", err)
	}
	return nil
}

// String renders the binding for logs.
func (b Binding) String() string {
	return fmt.Sprintf("relocation=%v attempt=%d source=%s/%d rid=%x/%d", b.Relocation, b.TargetAttempt,
		b.Source.OwnerID, b.Source.LeaseGeneration, b.Source.NodeRID, b.Source.NodeGeneration)
}

// checkText8 returns "" when s is 1..255 bytes of UTF-8 without NUL (the
// wire's text8), else why not.
func checkText8(s string) string {
	switch {
	case len(s) == 0 || len(s) > 255:
		return fmt.Sprintf("length %d outside 1..255", len(s))
	case !utf8.ValidString(s):
		return "not valid UTF-8"
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return "contains NUL"
		}
	}
	return ""
}

// BindingOf converts the wire's binding (records 40, 52, 54, 55) to the
// registry's comparable key.
func BindingOf(w router.RelocationBinding) Binding {
	return Binding{Relocation: w.Relocation, TargetAttempt: w.TargetAttempt, Source: SourceFence{
		OwnerID: w.Source.SourceOwnerID, LeaseGeneration: w.Source.SourceOwnerLeaseGeneration,
		NodeRID: string(w.Source.SourceNodeRID), NodeGeneration: w.Source.SourceNodeGeneration}}
}

// Wire converts the binding to the wire's form.
func (b Binding) Wire() router.RelocationBinding {
	return router.RelocationBinding{Relocation: b.Relocation, TargetAttempt: b.TargetAttempt, Source: router.SourceFence{
		SourceOwnerID: b.Source.OwnerID, SourceOwnerLeaseGeneration: b.Source.LeaseGeneration,
		SourceNodeRID: []byte(b.Source.NodeRID), SourceNodeGeneration: b.Source.NodeGeneration}}
}
