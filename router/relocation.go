package router

import (
	"encoding/binary"
	"hash"
	"hash/crc32"
)

// SessionRelocationRoute (command 44) is the one-way route commit or abort
// sent to a bound Session's owner (spec §9.2, §9.4). Commit comes from the
// target or the coordinator, abort from the source or the coordinator.
type SessionRelocationRoute struct {
	Relocation                  RelocationID
	Coordinator                 RelocationCoordinatorFence
	SenderRole                  RelocationRole
	Actor                       ActorRef
	SessionOwnerNodeRID         []byte
	SessionOwnerNodeGeneration  uint64 // nonzero
	SessionOwnerID              string
	SessionOwnerLeaseGeneration uint64 // nonzero
	SessionRID                  []byte
	BindingGeneration           uint64 // nonzero
	Route                       SessionRouteUpdate
}

// SessionRouteUpdate (session-relocation-route-update): action u8, u16
// length, then the commit or abort case.
type SessionRouteUpdate struct {
	Action RouteAction
	Commit *SessionRouteCommit // set iff Action == RouteCommit
	Abort  *SessionRouteAbort  // set iff Action == RouteAbort
}

// SessionRouteCommit switches the session's route to the target.
type SessionRouteCommit struct {
	PreviousAuthorityOwnerGeneration uint64 // nonzero
	TargetAuthorityOwnerGeneration   uint64 // nonzero
	TargetNodeRID                    []byte
	TargetNodeGeneration             uint64 // nonzero
	ReplayedHighWater                uint64 // ordinal-or-zero
}

// SessionRouteAbort keeps the session's route on the source.
type SessionRouteAbort struct {
	CurrentAuthorityOwnerGeneration uint64 // nonzero
}

// Command implements Body.
func (*SessionRelocationRoute) Command() Command { return CmdSessionRelocationRoute }

func (b *SessionRelocationRoute) code(c *codec) {
	b.Relocation.code(c, "relocation")
	b.Coordinator.code(c, "coordinator")
	enum8(c, "senderRole", &b.SenderRole)
	b.Actor.code(c, "actor")
	c.rid("sessionOwnerNodeRid", &b.SessionOwnerNodeRID)
	c.nz64("sessionOwnerNodeGeneration", &b.SessionOwnerNodeGeneration)
	c.text8("sessionOwnerId", &b.SessionOwnerID)
	c.nz64("sessionOwnerLeaseGeneration", &b.SessionOwnerLeaseGeneration)
	c.rid("sessionRid", &b.SessionRID)
	c.nz64("bindingGeneration", &b.BindingGeneration)
	u := &b.Route
	c.obj("route", func() {
		enum8(c, "action", &u.Action)
		c.delimited("length", 2, 65535, func() {
			switch u.Action {
			case RouteCommit:
				c.unionOthers("abort", u.Abort != nil)
				c.constraint("action", b.SenderRole == RoleSource, "commit is sent by the target or the coordinator")
				if p := unionCase(c, "commit", &u.Commit); p != nil {
					c.obj("commit", func() {
						c.nz64("previousAuthorityOwnerGeneration", &p.PreviousAuthorityOwnerGeneration)
						c.nz64("targetAuthorityOwnerGeneration", &p.TargetAuthorityOwnerGeneration)
						c.rid("targetNodeRid", &p.TargetNodeRID)
						c.nz64("targetNodeGeneration", &p.TargetNodeGeneration)
						c.ord64("replayedHighWater", &p.ReplayedHighWater)
					})
				}
			case RouteAbort:
				c.unionOthers("commit", u.Commit != nil)
				c.constraint("action", b.SenderRole == RoleTarget, "abort is sent by the source or the coordinator")
				if p := unionCase(c, "abort", &u.Abort); p != nil {
					c.obj("abort", func() {
						c.nz64("currentAuthorityOwnerGeneration", &p.CurrentAuthorityOwnerGeneration)
					})
				}
			}
		})
	})
}

// ---- Relocation handoff: the project's own layout (docs/PROTOCOL.md) ----
//
// Service wire v1 predates the spec's Restore conversation (spec §1.3 steps
// 4–5, §9.1). These records keep the v1 head prefix and field types but their
// bodies are defined here. All of them travel source→target on the source's
// DEALER (one ordered connection) except RelocationReady, the target's
// answer on its ROUTER.

// Bounds of the handoff records.
const (
	// RelocationChunkBytes bounds one state chunk (schema relocationChunkBytes).
	RelocationChunkBytes = 67108864
	// RelocationChunkCount bounds the chunk count (schema relocationChunkCount).
	RelocationChunkCount = 4096
	// RelocationLogicalBytes bounds the whole payload (schema relocationLogicalBytes).
	RelocationLogicalBytes = 274877906944
)

// RelocationObject identifies the moving Actor/Spot; the target reads the
// current location by object id and the expected AuthorityOwnerGeneration
// (spec §9.1) and starts nothing if they do not match.
type RelocationObject struct {
	Kind                             StatefulObjectKind
	ObjectID                         string // text8
	StableType                       string // text8
	ObjectGeneration                 uint64 // nonzero
	ExpectedAuthorityOwnerGeneration uint64 // nonzero
}

func (o *RelocationObject) code(c *codec, name string) {
	c.obj(name, func() {
		enum8(c, "objectKind", &o.Kind)
		c.text8("objectId", &o.ObjectID)
		c.text8("stableType", &o.StableType)
		c.nz64("objectGeneration", &o.ObjectGeneration)
		c.nz64("expectedAuthorityOwnerGeneration", &o.ExpectedAuthorityOwnerGeneration)
	})
}

// RelocationBinding is what binds a Restore request, each of its chunks, the
// cutover and the target's owner CAS to one move attempt (spec §9.1). The
// target only compares it for equality.
type RelocationBinding struct {
	Relocation    RelocationID // nonzero
	TargetAttempt uint64       // nonzero, equality only, not derived from the target's lifecycle generation
	Source        SourceFence
}

func (b *RelocationBinding) code(c *codec, name string) {
	c.obj(name, func() {
		b.Relocation.code(c, "relocation")
		c.nz64("targetAttempt", &b.TargetAttempt)
		b.Source.code(c, "source")
	})
}

// RelocationPrepare (command 40, project layout) is the Restore request: it
// declares the handoff payload's total length, chunk count and CRC-32C
// (Castagnoli) so the target can verify the assembled chunks before
// restoring. Answered by RelocationReady with the same correlation.
type RelocationPrepare struct {
	Correlation          uint64 // nonzero
	Binding              RelocationBinding
	Object               RelocationObject
	TargetNodeRID        []byte
	TargetNodeGeneration uint64 // nonzero
	TotalLength          uint64 // 0..RelocationLogicalBytes
	ChunkCount           uint32 // 0..RelocationChunkCount; 0 iff TotalLength is 0
	CRC32C               uint32 // over the whole payload
	DeadlineUnixMs       uint64 // nonzero
}

// Command implements Body.
func (*RelocationPrepare) Command() Command { return CmdRelocationPrepare }

func (b *RelocationPrepare) code(c *codec) {
	c.nz64("correlation", &b.Correlation)
	b.Binding.code(c, "binding")
	b.Object.code(c, "object")
	c.rid("targetNodeRid", &b.TargetNodeRID)
	c.nz64("targetNodeGeneration", &b.TargetNodeGeneration)
	c.u64("totalLength", &b.TotalLength, 0, RelocationLogicalBytes)
	c.u32("chunkCount", &b.ChunkCount, 0, RelocationChunkCount)
	c.u32("crc32c", &b.CRC32C, 0, 1<<32-1)
	c.nz64("deadlineUnixMs", &b.DeadlineUnixMs)
	if c.err != nil {
		return
	}
	n, total := uint64(b.ChunkCount), b.TotalLength
	c.constraint("chunkCount", (n == 0) != (total == 0), "chunk count is zero exactly when the total length is zero")
	c.constraint("chunkCount", n > total, "every chunk carries at least one byte")
	c.constraint("totalLength", total > n*RelocationChunkBytes, "total length exceeds chunk count × 64 MiB")
}

// RelocationState (command 52, project layout) carries one chunk of the
// handoff payload, bound to the Restore request by the same binding.
// Chunks are sent in index order on the same connection as the request.
type RelocationState struct {
	Binding    RelocationBinding
	ChunkIndex uint32 // 0..RelocationChunkCount-1
	Data       []byte // 1..RelocationChunkBytes; aliases the decoded frame
}

// Command implements Body.
func (*RelocationState) Command() Command { return CmdRelocationState }

func (b *RelocationState) code(c *codec) {
	b.Binding.code(c, "binding")
	c.u32("chunkIndex", &b.ChunkIndex, 0, RelocationChunkCount-1)
	c.bytesField("data", &b.Data, 4, 1, RelocationChunkBytes)
}

// RelocationOutcome is RelocationReady's verdict.
type RelocationOutcome uint8

// Relocation outcomes.
const (
	// RelocationRelayReady: payload verified and restored; the target holds a
	// relocation temporary queue and accepts relay.
	RelocationRelayReady RelocationOutcome = 1
	// RelocationFailed: explicit failure; the source keeps ownership and
	// restores its queue (spec §9.1, §9.4).
	RelocationFailed RelocationOutcome = 2
)

var relocationOutcomeNames = map[RelocationOutcome]string{1: "relayReady", 2: "failed"}

func (v RelocationOutcome) String() string { return enumName(relocationOutcomeNames, v, "outcome") }
func (v RelocationOutcome) valid() bool    { return enumValid(relocationOutcomeNames, v) }

// RelocationFailure says why the target refused or failed a Restore.
type RelocationFailure uint8

// Relocation failure reasons.
const (
	RelocationFailureNone              RelocationFailure = 0
	RelocationFailureChecksumMismatch  RelocationFailure = 1 // assembled payload CRC-32C differs from the declared one; after relay-ready: the relay differs from the cutover (relay mismatch)
	RelocationFailureLengthMismatch    RelocationFailure = 2 // assembled length or chunk count differs from the declaration
	RelocationFailureConflict          RelocationFailure = 3 // same binding retransmitted with a different length or checksum
	RelocationFailureAuthorityMismatch RelocationFailure = 4 // location record missing or generation/list checksum differs
	RelocationFailureRestoreFailed     RelocationFailure = 5 // factory or restore callback failed
	RelocationFailureCapacity          RelocationFailure = 6 // no capacity / type not offered on the target
	RelocationFailureDeadlineExceeded  RelocationFailure = 7
	RelocationFailureCancelled         RelocationFailure = 8 // source cancelled (RelocationCancel) before relay-ready
	RelocationFailureNotServing        RelocationFailure = 9 // target not serving / stale target node generation
)

var relocationFailureNames = map[RelocationFailure]string{
	0: "none", 1: "checksumMismatch", 2: "lengthMismatch", 3: "conflict", 4: "authorityMismatch",
	5: "restoreFailed", 6: "capacity", 7: "deadlineExceeded", 8: "cancelled", 9: "notServing",
}

func (v RelocationFailure) String() string { return enumName(relocationFailureNames, v, "failure") }
func (v RelocationFailure) valid() bool    { return enumValid(relocationFailureNames, v) }

// RelocationReady (command 53, project layout) is the target's answer to a
// RelocationPrepare: relay-ready, or an explicit failure. Sent on the
// target's ROUTER back to the requester, with the request's correlation.
type RelocationReady struct {
	Correlation   uint64 // nonzero
	Relocation    RelocationID
	TargetAttempt uint64 // nonzero
	Outcome       RelocationOutcome
	Failure       RelocationFailure // none iff Outcome is relay-ready
	Detail        string            // optional-text8 diagnostic, "" = absent
}

// Command implements Body.
func (*RelocationReady) Command() Command { return CmdRelocationReady }

func (b *RelocationReady) code(c *codec) {
	c.nz64("correlation", &b.Correlation)
	b.Relocation.code(c, "relocation")
	c.nz64("targetAttempt", &b.TargetAttempt)
	enum8(c, "outcome", &b.Outcome)
	enum8(c, "failure", &b.Failure)
	c.optText8("detail", &b.Detail)
	if c.err != nil {
		return
	}
	c.constraint("failure", (b.Outcome == RelocationRelayReady) != (b.Failure == RelocationFailureNone),
		"failure is none exactly when the outcome is relay-ready")
}

// RelocationCutover (command 54, project layout) is the one-way boundary the
// source sends after relaying its ingress hold: the count of relayed records
// and their RelayDigest. No reply is expected (spec §1.3 step 5, 8).
type RelocationCutover struct {
	Binding       RelocationBinding
	RelayedCount  uint64 // ordinal-or-zero
	RelayedCRC32C uint32 // RelayDigest.Sum32 over the relayed records, 0 when none
}

// Command implements Body.
func (*RelocationCutover) Command() Command { return CmdRelocationCutover }

func (b *RelocationCutover) code(c *codec) {
	b.Binding.code(c, "binding")
	c.ord64("relayedCount", &b.RelayedCount)
	c.u32("relayedCrc32c", &b.RelayedCRC32C, 0, 1<<32-1)
	if c.err == nil {
		c.constraint("relayedCrc32c", b.RelayedCount == 0 && b.RelayedCRC32C != 0, "no relayed records means checksum 0")
	}
}

// RelocationCancel (command 55, project layout) is the source's one-way
// cancellation of a move attempt before it accepted relay-ready (spec §9.4
// step 4): the target discards the temporary queue without running it and
// drops its chunk-assembly staging for exactly this binding.
type RelocationCancel struct {
	Binding RelocationBinding
}

// Command implements Body.
func (*RelocationCancel) Command() Command { return CmdRelocationCancel }

func (b *RelocationCancel) code(c *codec) { b.Binding.code(c, "binding") }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC-32C (Castagnoli) of b, the checksum a
// RelocationPrepare declares for the whole handoff payload.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// UpdateCRC32C extends a running CRC-32C with p (CRC32C(a+b) ==
// UpdateCRC32C(CRC32C(a), b)), for checksums computed chunk by chunk.
func UpdateCRC32C(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

// RelayDigest accumulates the relayed-record checksum of a RelocationCutover:
// CRC-32C over, for each relayed record in send order, its frame count (u32
// big-endian) then each frame as u32 big-endian length followed by its
// bytes. Both sides feed it the records exactly as sent / received.
type RelayDigest struct {
	h     hash.Hash32
	count uint64
}

// Add feeds one relayed record's frames.
func (d *RelayDigest) Add(frames [][]byte) {
	if d.h == nil {
		d.h = crc32.New(castagnoli)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(frames)))
	d.h.Write(n[:])
	for _, f := range frames {
		binary.BigEndian.PutUint32(n[:], uint32(len(f)))
		d.h.Write(n[:])
		d.h.Write(f)
	}
	d.count++
}

// Count is the number of records added.
func (d *RelayDigest) Count() uint64 { return d.count }

// Sum32 is the checksum so far (0 before any record).
func (d *RelayDigest) Sum32() uint32 {
	if d.h == nil {
		return 0
	}
	return d.h.Sum32()
}

// Matches reports whether a cutover's declared count and checksum equal what
// the digest accumulated.
func (d *RelayDigest) Matches(c *RelocationCutover) bool {
	return c.RelayedCount == d.count && c.RelayedCRC32C == d.Sum32()
}
