package query

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
)

// State is an object's location state as §7.4 reports it.
type State string

// States. There is deliberately no "missing" state: a missing record is the
// absence of an entry (§7.4: "does not build a Missing entry").
const (
	// StateCreating: the authority row is Reserved (creation in progress).
	StateCreating State = "creating"
	// StateReady: the row is Active and its owner's lease is valid.
	StateReady State = "ready"
	// StateUnavailable: the row is Active but its owner's lease is gone
	// (missing, expired, unreadable or of another generation).
	StateUnavailable State = "unavailable"
)

// Entry is one object's location as read from its authority row (§7.4:
// global ID, ObjectGeneration, MeshName, Node RID, state, stable type; plus
// the owner fields operators need to judge the state).
type Entry struct {
	// ID is the global ActorId or SpotId (the record's objectId, checked
	// against the key).
	ID string
	// Key is the authority row's store key ("authority:<sha256hex>"); it is
	// what "meshnode ctl record" reads.
	Key string
	// Kind is the allocation's object kind: actor, userSpot or
	// instanceSpot.
	Kind                     record.ObjectKind
	ObjectGeneration         record.Generation
	MeshName                 string
	NodeRID                  []byte
	State                    State
	StableType               string
	AuthorityOwnerGeneration record.Generation
	OwnerID                  string
	OwnerLeaseGeneration     record.Generation
}

// entryJSON is the encoded form of an Entry: the form whose size the 4 MiB
// page bound counts. 64-bit values are decimal strings (as in the stored
// records), the RID is lowercase hex.
type entryJSON struct {
	ID                       string `json:"id"`
	Key                      string `json:"key"`
	Kind                     string `json:"kind"`
	ObjectGeneration         string `json:"objectGeneration"`
	MeshName                 string `json:"meshName"`
	NodeRID                  string `json:"nodeRid"`
	State                    string `json:"state"`
	StableType               string `json:"stableType"`
	AuthorityOwnerGeneration string `json:"authorityOwnerGeneration"`
	OwnerID                  string `json:"ownerId"`
	OwnerLeaseGeneration     string `json:"ownerLeaseGeneration"`
}

// MarshalJSON encodes the entry (see entryJSON).
func (e Entry) MarshalJSON() ([]byte, error) {
	return json.Marshal(entryJSON{
		ID:                       e.ID,
		Key:                      e.Key,
		Kind:                     string(e.Kind),
		ObjectGeneration:         e.ObjectGeneration.String(),
		MeshName:                 e.MeshName,
		NodeRID:                  hex.EncodeToString(e.NodeRID),
		State:                    string(e.State),
		StableType:               e.StableType,
		AuthorityOwnerGeneration: e.AuthorityOwnerGeneration.String(),
		OwnerID:                  e.OwnerID,
		OwnerLeaseGeneration:     e.OwnerLeaseGeneration.String(),
	})
}

// EncodedSize is the length of the entry's JSON encoding.
func (e Entry) EncodedSize() int {
	b, _ := e.MarshalJSON() // cannot fail: only strings are encoded
	return len(b)
}

// Page is one page of a List cycle.
type Page struct {
	// Entries are in store key order (the digest order, which is not
	// meaningful to people). At most ListRequest.Limit, and the encoded page
	// is at most MaxPageBytes.
	Entries []Entry
	// Next is the continuation token for the next page; empty when this was
	// the last page of the cycle. Opaque: pass it back unchanged.
	Next string
	// SnapshotAt is the store time (StoreNow) of the cycle's first scan
	// page: every page of the cycle shows the rows as they were then. Owner
	// leases, however, are read when each page is built.
	SnapshotAt time.Time
	// Undecodable counts authority rows skipped in this page's part of the
	// scan because they do not decode or are not stored under their own
	// key (each is logged).
	Undecodable int
	// Number is the page's position in its cycle, from 1.
	Number int
}

type pageJSON struct {
	Entries           []Entry `json:"entries"`
	Next              string  `json:"next"`
	SnapshotAtEpochMs string  `json:"snapshotAtEpochMs"`
	Undecodable       int     `json:"undecodable"`
	Number            int     `json:"page"`
}

// MarshalJSON encodes the page; this is the encoding MaxPageBytes bounds.
func (p Page) MarshalJSON() ([]byte, error) {
	entries := p.Entries
	if entries == nil {
		entries = []Entry{}
	}
	return json.Marshal(pageJSON{
		Entries:           entries,
		Next:              p.Next,
		SnapshotAtEpochMs: strconv.FormatInt(p.SnapshotAt.UnixMilli(), 10),
		Undecodable:       p.Undecodable,
		Number:            p.Number,
	})
}

// EncodedSize is the length of the page's JSON encoding.
func (p Page) EncodedSize() int {
	b, _ := p.MarshalJSON() // cannot fail: strings and integers only
	return len(b)
}

// MaxPageBytes bounds one encoded page (§7.4: "One encoded page is at most
// 4 MiB").
const MaxPageBytes = 4 << 20

// maxEntryBytes is the largest encoding any entry can have, and
// entryBudget the bytes a page's entries may take: MaxPageBytes minus the
// largest possible page envelope (longest token, largest counters).
// List asks the store for only as many rows as surely fit, so it never has
// to push a row it already consumed from the scan back (see fill).
var (
	maxEntryBytes = worstEntry().EncodedSize()
	entryBudget   = MaxPageBytes - worstEnvelope()
)

// worstEntry is the entry with the longest possible encoding: every text
// field at its byte limit, made of a byte encoding/json writes as a
// six-byte \u00XX escape (nothing expands more: control characters, <, >, &
// and invalid UTF-8 all take six bytes per input byte), the longest kind
// and state, and 19-digit generations.
func worstEntry() Entry {
	long := strings.Repeat("\x01", record.MaxIDBytes)
	name := strings.Repeat("\x01", record.MaxNameBytes)
	return Entry{
		ID:                       long,
		Key:                      record.KindPrefix(record.KindAuthority) + strings.Repeat("f", 64),
		Kind:                     record.ObjectInstanceSpot,
		ObjectGeneration:         record.MaxGeneration,
		MeshName:                 name,
		NodeRID:                  make([]byte, record.MaxRoutingIDBytes),
		State:                    StateUnavailable,
		StableType:               name,
		AuthorityOwnerGeneration: record.MaxGeneration,
		OwnerID:                  name,
		OwnerLeaseGeneration:     record.MaxGeneration,
	}
}

// worstEnvelope is the size of an empty page with the longest token and
// the largest counters.
func worstEnvelope() int {
	p := Page{
		Next:        strings.Repeat("A", MaxContinuationBytes),
		SnapshotAt:  time.UnixMilli(-1 << 62),
		Undecodable: math.MaxInt,
		Number:      math.MaxUint32,
	}
	return p.EncodedSize()
}
