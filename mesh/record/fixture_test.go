package record_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/meshnode/meshnode/mesh/record"
)

// The golden fixture testdata/store-records-v1.json is the project's
// cross-language contract for spec §3.4 (format: docs/RECORDS.md). The
// conformance test below consumes it in both directions; the fixture is
// read with encoding/json, an implementation independent of the package's
// own parser. Regenerate it only on purpose:
//
//	go test ./mesh/record -run TestGoldenFixture -update
const fixturePath = "testdata/store-records-v1.json"

type fixtureFile struct {
	Format             string           `json:"format"`
	Description        []string         `json:"description"`
	RedisNamespace     string           `json:"redisNamespace"`
	Keys               []keyCase        `json:"keys"`
	Records            []recordCase     `json:"records"`
	RejectedKeys       []rejectedKey    `json:"rejectedKeys"`
	RejectedValues     []rejectedValue  `json:"rejectedValues"`
	NonCanonicalValues []nonCanonical   `json:"nonCanonicalValues"`
	Extra              *json.RawMessage `json:"extra,omitempty"`
}

// keyInputs are the inputs of a logical key preimage; which members are
// used depends on the kind.
type keyInputs struct {
	MeshName     string `json:"meshName,omitempty"`
	ChannelName  string `json:"channelName,omitempty"`
	RoutingIDHex string `json:"routingIdHex,omitempty"`
	OwnerID      string `json:"ownerId,omitempty"`
	Kind         string `json:"kind,omitempty"` // authority: actor | spot
	ID           string `json:"id,omitempty"`
	Counter      string `json:"counter,omitempty"`
}

type keyCase struct {
	Name        string    `json:"name"`
	Kind        string    `json:"kind"`
	Inputs      keyInputs `json:"inputs"`
	PreimageHex string    `json:"preimageHex"`
	Key         string    `json:"key"`
	RedisKey    string    `json:"redisKey"`
}

type recordCase struct {
	Name        string          `json:"name"`
	Kind        string          `json:"kind"`
	Fields      json.RawMessage `json:"fields"`
	PreimageHex string          `json:"preimageHex"`
	Key         string          `json:"key"`
	RedisKey    string          `json:"redisKey"`
	Value       string          `json:"value"`
}

type rejectedKey struct {
	Name   string    `json:"name"`
	Kind   string    `json:"kind"`
	Inputs keyInputs `json:"inputs"`
	Error  string    `json:"error"`
}

type rejectedValue struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	Value       string `json:"value,omitempty"`
	ValueBase64 string `json:"valueBase64,omitempty"`
	Error       string `json:"error"`
}

type nonCanonical struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Value string `json:"value"`
}

// --- fields: the logical values of a record, language-neutral -----------
//
// Generations, revisions, timestamps and applicationVersion are decimal
// strings (64-bit); every other integer is a JSON number, in every record
// (the value decides how each is written); bytes are lowercase hex.

type ownerLeaseFields struct {
	OwnerID           string `json:"ownerId"`
	LeaseGeneration   string `json:"leaseGeneration"`
	AcquiredAtEpochMs string `json:"acquiredAtEpochMs"`
	UpdatedAtEpochMs  string `json:"updatedAtEpochMs"`
}

type slotFields struct {
	Active   int `json:"active"`
	Reserved int `json:"reserved"`
	Limit    int `json:"limit"`
}

type spotTypeFields struct {
	ObjectKind string `json:"objectKind"`
	StableType string `json:"stableType"`
	Active     int    `json:"active"`
	Reserved   int    `json:"reserved"`
	Limit      int    `json:"limit"`
}

type capabilityFields struct {
	ObjectKind         string `json:"objectKind"`
	StableType         string `json:"stableType"`
	Policy             string `json:"policy"`
	HasSnapshotAdapter bool   `json:"hasSnapshotAdapter"`
	Limit              int    `json:"limit"`
}

type meshNodeFields struct {
	MeshName            string             `json:"meshName"`
	RoutingIDHex        string             `json:"routingIdHex"`
	LifecycleGeneration string             `json:"lifecycleGeneration"`
	DescriptorRevision  string             `json:"descriptorRevision"`
	Endpoint            string             `json:"endpoint"`
	EntrySpotID         *string            `json:"entrySpotId"`
	ChannelWeights      map[string]int     `json:"channelWeights"`
	ApplicationVersion  string             `json:"applicationVersion"`
	ObjectCapabilities  []capabilityFields `json:"objectCapabilities"`
	ObjectRole          string             `json:"objectRole"`
	PlacementWeight     int                `json:"placementWeight"`
	Capacity            struct {
		Actors    slotFields       `json:"actors"`
		Spots     slotFields       `json:"spots"`
		SpotTypes []spotTypeFields `json:"spotTypes"`
	} `json:"capacity"`
	ActivationConcurrency struct {
		Active int `json:"active"`
		Limit  int `json:"limit"`
	} `json:"activationConcurrency"`
	MaintenanceWave  *string `json:"maintenanceWave"`
	State            string  `json:"state"`
	SecurityIdentity string  `json:"securityIdentity"`
	OwnerID          string  `json:"ownerId"`
	LeaseGeneration  string  `json:"leaseGeneration"`
	UpdatedAtEpochMs string  `json:"updatedAtEpochMs"`
}

type channelFields struct {
	ChannelName           string `json:"channelName"`
	ServerRoutingIDHex    string `json:"serverRoutingIdHex,omitempty"`
	PublisherRoutingIDHex string `json:"publisherRoutingIdHex,omitempty"`
	LifecycleGeneration   string `json:"lifecycleGeneration"`
	DescriptorRevision    string `json:"descriptorRevision"`
	Endpoint              string `json:"endpoint"`
	Weight                *int   `json:"weight,omitempty"`
	State                 string `json:"state"`
	SecurityIdentity      string `json:"securityIdentity"`
	OwnerID               string `json:"ownerId"`
	LeaseGeneration       string `json:"leaseGeneration"`
	UpdatedAtEpochMs      string `json:"updatedAtEpochMs"`
}

type authorityFields struct {
	ID                       string `json:"id"` // the key's Id; not in the value
	PayloadHex               string `json:"payloadHex"`
	ObjectGeneration         string `json:"objectGeneration"`
	AuthorityOwnerGeneration string `json:"authorityOwnerGeneration"`
	OwnerID                  string `json:"ownerId"`
	OwnerLeaseGeneration     string `json:"ownerLeaseGeneration"`
	Allocation               struct {
		State      string `json:"state"`
		ObjectKind string `json:"objectKind"`
		StableType string `json:"stableType"`
		Descriptor struct {
			MeshName     string `json:"meshName"`
			RoutingIDHex string `json:"routingIdHex"`
		} `json:"descriptor"`
		DescriptorLifecycleGeneration string `json:"descriptorLifecycleGeneration"`
		Capacity                      struct {
			Actors   int `json:"actors"`
			Spots    int `json:"spots"`
			SpotType *struct {
				ObjectKind string `json:"objectKind"`
				StableType string `json:"stableType"`
				Count      int    `json:"count"`
			} `json:"spotType"`
		} `json:"capacity"`
	} `json:"allocation"`
	PendingCreation *struct {
		ReservationID           string `json:"reservationId"`
		RequestContentReference string `json:"requestContentReference"`
		RequestSha256           string `json:"requestSha256"`
		RequestEncodedSize      int    `json:"requestEncodedSize"`
	} `json:"pendingCreation"`
	Relocation *relocationFields `json:"relocation"`
}

// relocationFields are the authority's relocation progress (ids as hex).
type relocationFields struct {
	Stage                            string      `json:"stage"`
	RelocationIDHex                  string      `json:"relocationId"`
	TargetAttempt                    string      `json:"targetAttempt"`
	ReservationIDHex                 string      `json:"reservationId"`
	Source                           partyFields `json:"source"`
	Target                           partyFields `json:"target"`
	PreviousAuthorityOwnerGeneration *string     `json:"previousAuthorityOwnerGeneration"`
}

type partyFields struct {
	OwnerID              string `json:"ownerId"`
	OwnerLeaseGeneration string `json:"ownerLeaseGeneration"`
	MeshName             string `json:"meshName"`
	RoutingIDHex         string `json:"routingIdHex"`
	LifecycleGeneration  string `json:"lifecycleGeneration"`
}

type counterFields struct {
	Counter string `json:"counter"`
	Value   string `json:"value"`
}

// conv turns fixture text into typed values, failing the test on bad
// fixture data (which would be a broken fixture, not a broken package).
type conv struct{ t testing.TB }

func (c conv) gen(s string) record.Generation {
	c.t.Helper()
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		c.t.Fatalf("fixture: generation %q: %v", s, err)
	}
	return record.Generation(u)
}

func (c conv) u64(s string) uint64 { return uint64(c.gen(s)) }

func (c conv) ms(s string) record.EpochMillis {
	c.t.Helper()
	i, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		c.t.Fatalf("fixture: timestamp %q: %v", s, err)
	}
	return record.EpochMillis(i)
}

func (c conv) hex(s string) []byte {
	c.t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		c.t.Fatalf("fixture: hex %q: %v", s, err)
	}
	if len(b) == 0 {
		return nil
	}
	return b
}

func (c conv) id128(s string) [16]byte {
	c.t.Helper()
	var id [16]byte
	if n := copy(id[:], c.hex(s)); n != 16 || len(s) != 32 {
		c.t.Fatalf("fixture: %q is not 16 bytes of hex", s)
	}
	return id
}

func (c conv) party(p partyFields) record.RelocationParty {
	return record.RelocationParty{OwnerID: p.OwnerID, OwnerLeaseGeneration: c.gen(p.OwnerLeaseGeneration),
		MeshName: p.MeshName, RoutingID: c.hex(p.RoutingIDHex), LifecycleGeneration: c.gen(p.LifecycleGeneration)}
}

func (c conv) relocation(f relocationFields) *record.RelocationProgress {
	r := &record.RelocationProgress{Stage: record.RelocationStage(f.Stage), RelocationID: c.id128(f.RelocationIDHex),
		TargetAttempt: c.gen(f.TargetAttempt), ReservationID: c.id128(f.ReservationIDHex), Source: c.party(f.Source), Target: c.party(f.Target)}
	if f.PreviousAuthorityOwnerGeneration != nil {
		r.PreviousAuthorityOwnerGeneration = c.gen(*f.PreviousAuthorityOwnerGeneration)
	}
	return r
}

func strict(t testing.TB, raw []byte, v any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatalf("fixture fields: %v", err)
	}
}

// caseRecord is a record built from fixture fields, with its preimage.
type caseRecord struct {
	rec      any // one of the record types (value, not pointer)
	preimage []byte
	encode   func() ([]byte, error)
	decode   func([]byte) (any, error)
}

func buildRecord(t testing.TB, kind string, raw []byte) caseRecord {
	t.Helper()
	c := conv{t}
	var (
		out caseRecord
		err error
	)
	switch record.Kind(kind) {
	case record.KindOwnerLease:
		var f ownerLeaseFields
		strict(t, raw, &f)
		r := record.OwnerLease{OwnerID: f.OwnerID, LeaseGeneration: c.gen(f.LeaseGeneration), AcquiredAt: c.ms(f.AcquiredAtEpochMs), UpdatedAt: c.ms(f.UpdatedAtEpochMs)}
		out = caseRecord{rec: r, encode: r.Encode, decode: func(b []byte) (any, error) { return record.DecodeOwnerLease(b) }}
		out.preimage, err = r.Preimage()
	case record.KindMeshNode:
		var f meshNodeFields
		strict(t, raw, &f)
		r := record.MeshNodeDescriptor{
			MeshName: f.MeshName, RoutingID: c.hex(f.RoutingIDHex), LifecycleGeneration: c.gen(f.LifecycleGeneration),
			DescriptorRevision: c.gen(f.DescriptorRevision), Endpoint: f.Endpoint, EntrySpotID: f.EntrySpotID,
			ApplicationVersion: c.u64(f.ApplicationVersion), ObjectRole: record.ObjectRole(f.ObjectRole),
			PlacementWeight: f.PlacementWeight, MaintenanceWave: f.MaintenanceWave, State: record.State(f.State),
			SecurityIdentity: f.SecurityIdentity, OwnerID: f.OwnerID, LeaseGeneration: c.gen(f.LeaseGeneration),
			UpdatedAt: c.ms(f.UpdatedAtEpochMs),
		}
		if len(f.ChannelWeights) > 0 {
			r.ChannelWeights = f.ChannelWeights
		}
		for _, cf := range f.ObjectCapabilities {
			r.ObjectCapabilities = append(r.ObjectCapabilities, record.ObjectCapability{
				ObjectKind: record.ObjectKind(cf.ObjectKind), StableType: cf.StableType,
				Policy: record.RelocationPolicy(cf.Policy), HasSnapshotAdapter: cf.HasSnapshotAdapter, Limit: cf.Limit,
			})
		}
		r.Capacity.Actors = record.SlotUsage(f.Capacity.Actors)
		r.Capacity.Spots = record.SlotUsage(f.Capacity.Spots)
		for _, s := range f.Capacity.SpotTypes {
			r.Capacity.SpotTypes = append(r.Capacity.SpotTypes, record.SpotTypeUsage{
				ObjectKind: record.ObjectKind(s.ObjectKind), StableType: s.StableType, Active: s.Active, Reserved: s.Reserved, Limit: s.Limit,
			})
		}
		r.ActivationConcurrency = record.ActivationConcurrency(f.ActivationConcurrency)
		out = caseRecord{rec: r, encode: r.Encode, decode: func(b []byte) (any, error) { return record.DecodeMeshNode(b) }}
		out.preimage, err = r.Preimage()
	case record.KindClientServer:
		var f channelFields
		strict(t, raw, &f)
		if f.Weight == nil || f.PublisherRoutingIDHex != "" {
			t.Fatalf("fixture: client-server fields need weight and serverRoutingIdHex")
		}
		r := record.ClientServerDescriptor{
			ChannelName: f.ChannelName, ServerRoutingID: c.hex(f.ServerRoutingIDHex), LifecycleGeneration: c.gen(f.LifecycleGeneration),
			DescriptorRevision: c.gen(f.DescriptorRevision), Endpoint: f.Endpoint, Weight: *f.Weight, State: record.State(f.State),
			SecurityIdentity: f.SecurityIdentity, OwnerID: f.OwnerID, LeaseGeneration: c.gen(f.LeaseGeneration), UpdatedAt: c.ms(f.UpdatedAtEpochMs),
		}
		out = caseRecord{rec: r, encode: r.Encode, decode: func(b []byte) (any, error) { return record.DecodeClientServer(b) }}
		out.preimage, err = r.Preimage()
	case record.KindFanoutPublisher:
		var f channelFields
		strict(t, raw, &f)
		if f.Weight != nil || f.ServerRoutingIDHex != "" {
			t.Fatalf("fixture: fanout-publisher fields have no weight and use publisherRoutingIdHex")
		}
		r := record.FanoutPublisherDescriptor{
			ChannelName: f.ChannelName, PublisherRoutingID: c.hex(f.PublisherRoutingIDHex), LifecycleGeneration: c.gen(f.LifecycleGeneration),
			DescriptorRevision: c.gen(f.DescriptorRevision), Endpoint: f.Endpoint, State: record.State(f.State),
			SecurityIdentity: f.SecurityIdentity, OwnerID: f.OwnerID, LeaseGeneration: c.gen(f.LeaseGeneration), UpdatedAt: c.ms(f.UpdatedAtEpochMs),
		}
		out = caseRecord{rec: r, encode: r.Encode, decode: func(b []byte) (any, error) { return record.DecodeFanoutPublisher(b) }}
		out.preimage, err = r.Preimage()
	case record.KindAuthority:
		var f authorityFields
		strict(t, raw, &f)
		al := f.Allocation
		r := record.Authority{
			ObjectID: f.ID,
			Payload:  c.hex(f.PayloadHex), ObjectGeneration: c.gen(f.ObjectGeneration),
			AuthorityOwnerGeneration: c.gen(f.AuthorityOwnerGeneration), OwnerID: f.OwnerID,
			OwnerLeaseGeneration: c.gen(f.OwnerLeaseGeneration),
			Allocation: record.Allocation{
				State: record.AllocationState(al.State), ObjectKind: record.ObjectKind(al.ObjectKind), StableType: al.StableType,
				Descriptor:                    record.DescriptorRef{MeshName: al.Descriptor.MeshName, RoutingID: c.hex(al.Descriptor.RoutingIDHex)},
				DescriptorLifecycleGeneration: c.gen(al.DescriptorLifecycleGeneration),
				Capacity:                      record.AllocationCapacity{Actors: al.Capacity.Actors, Spots: al.Capacity.Spots},
			},
		}
		if st := al.Capacity.SpotType; st != nil {
			r.Allocation.Capacity.SpotType = &record.SpotTypeSlots{ObjectKind: record.ObjectKind(st.ObjectKind), StableType: st.StableType, Count: st.Count}
		}
		if pc := f.PendingCreation; pc != nil {
			p := &record.PendingCreation{ReservationID: pc.ReservationID, RequestContentReference: pc.RequestContentReference, RequestEncodedSize: pc.RequestEncodedSize}
			if n := copy(p.RequestSHA256[:], c.hex(pc.RequestSha256)); n != 32 {
				t.Fatalf("fixture: requestSha256 %q is not 32 bytes", pc.RequestSha256)
			}
			r.PendingCreation = p
		}
		if rl := f.Relocation; rl != nil {
			r.Relocation = c.relocation(*rl)
		}
		out = caseRecord{rec: r, encode: r.Encode, decode: func(b []byte) (any, error) { return record.DecodeAuthority(b) }}
		out.preimage, err = r.Preimage(f.ID)
	case record.KindCounter:
		var f counterFields
		strict(t, raw, &f)
		r := record.Counter{Value: c.gen(f.Value)}
		out = caseRecord{rec: r, encode: r.Encode, decode: func(b []byte) (any, error) { return record.DecodeCounter(b) }}
		out.preimage, err = record.CounterPreimage(record.CounterName(f.Counter))
	default:
		t.Fatalf("fixture: unknown kind %q", kind)
	}
	if err != nil {
		t.Fatalf("preimage: %v", err)
	}
	return out
}

// normalize sorts the order-free lists the way the canonical encoding does,
// so a decoded record compares equal to fixture fields given in any order.
func normalize(rec any) any {
	d, ok := rec.(record.MeshNodeDescriptor)
	if !ok {
		return rec
	}
	d.ObjectCapabilities = append([]record.ObjectCapability(nil), d.ObjectCapabilities...)
	sort.Slice(d.ObjectCapabilities, func(i, j int) bool {
		a, b := d.ObjectCapabilities[i], d.ObjectCapabilities[j]
		return lessUTF16(string(a.ObjectKind), a.StableType, string(b.ObjectKind), b.StableType)
	})
	d.Capacity.SpotTypes = append([]record.SpotTypeUsage(nil), d.Capacity.SpotTypes...)
	sort.Slice(d.Capacity.SpotTypes, func(i, j int) bool {
		a, b := d.Capacity.SpotTypes[i], d.Capacity.SpotTypes[j]
		return lessUTF16(string(a.ObjectKind), a.StableType, string(b.ObjectKind), b.StableType)
	})
	if len(d.ObjectCapabilities) == 0 {
		d.ObjectCapabilities = nil
	}
	if len(d.Capacity.SpotTypes) == 0 {
		d.Capacity.SpotTypes = nil
	}
	return d
}

// lessUTF16 orders (kind, stableType) pairs by UTF-16 code units, the
// canonical list order of docs/RECORDS.md, written independently of the
// package's comparison.
func lessUTF16(ka, ta, kb, tb string) bool {
	if ka != kb {
		return slices.Compare(utf16.Encode([]rune(ka)), utf16.Encode([]rune(kb))) < 0
	}
	return slices.Compare(utf16.Encode([]rune(ta)), utf16.Encode([]rune(tb))) < 0
}

func keyPreimage(t testing.TB, kind string, in keyInputs) ([]byte, error) {
	t.Helper()
	rid := func() []byte {
		b, err := hex.DecodeString(in.RoutingIDHex)
		if err != nil {
			t.Fatalf("fixture: routingIdHex %q: %v", in.RoutingIDHex, err)
		}
		return b
	}
	switch record.Kind(kind) {
	case record.KindMeshNode:
		return record.MeshNodePreimage(in.MeshName, rid())
	case record.KindOwnerLease:
		return record.OwnerLeasePreimage(in.OwnerID)
	case record.KindClientServer:
		return record.ClientServerPreimage(in.ChannelName, rid())
	case record.KindFanoutPublisher:
		return record.FanoutPublisherPreimage(in.ChannelName, rid())
	case record.KindAuthority:
		return record.AuthorityPreimage(record.IdentityKind(in.Kind), in.ID)
	case record.KindCounter:
		return record.CounterPreimage(record.CounterName(in.Counter))
	}
	t.Fatalf("fixture: unknown kind %q", kind)
	return nil, nil
}

func decodeAny(kind string, value []byte) (any, error) {
	switch record.Kind(kind) {
	case record.KindOwnerLease:
		return record.DecodeOwnerLease(value)
	case record.KindMeshNode:
		return record.DecodeMeshNode(value)
	case record.KindClientServer:
		return record.DecodeClientServer(value)
	case record.KindFanoutPublisher:
		return record.DecodeFanoutPublisher(value)
	case record.KindAuthority:
		return record.DecodeAuthority(value)
	case record.KindCounter:
		return record.DecodeCounter(value)
	}
	return nil, fmt.Errorf("unknown kind %q", kind)
}

// allKinds are the record kinds the fixture covers.
var allKinds = []record.Kind{record.KindMeshNode, record.KindOwnerLease, record.KindClientServer, record.KindFanoutPublisher, record.KindAuthority, record.KindCounter}

// errorClasses maps the fixture's error names to the package's sentinels.
var errorClasses = map[string]error{
	"invalidField":   record.ErrInvalidField,
	"malformed":      record.ErrMalformed,
	"unknownVersion": record.ErrUnknownVersion,
	"mismatch":       record.ErrMismatch,
	"limit":          record.ErrLimit,
}

func (r rejectedValue) bytes(t testing.TB) []byte {
	t.Helper()
	if r.ValueBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(r.ValueBase64)
		if err != nil {
			t.Fatalf("fixture: valueBase64: %v", err)
		}
		return b
	}
	return []byte(r.Value)
}

func loadFixture(t testing.TB) fixtureFile {
	t.Helper()
	raw, err := os.ReadFile(fixturePath)
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	var f fixtureFile
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		t.Fatalf("parse fixture: %v", err)
	}
	if f.Format != "meshnode-store-records-v1" {
		t.Fatalf("fixture format %q", f.Format)
	}
	if len(f.Keys) == 0 || len(f.Records) == 0 || len(f.RejectedKeys) == 0 || len(f.RejectedValues) == 0 || len(f.NonCanonicalValues) == 0 {
		t.Fatalf("fixture has an empty section")
	}
	return f
}

// TestGoldenFixture is the conformance test of spec §12: key derivation and
// value bytes, both ways, plus the rejections.
func TestGoldenFixture(t *testing.T) {
	if *update {
		writeFixture(t)
	}
	f := loadFixture(t)

	t.Run("keys", func(t *testing.T) {
		for _, kc := range f.Keys {
			t.Run(kc.Name, func(t *testing.T) {
				pre, err := keyPreimage(t, kc.Kind, kc.Inputs)
				if err != nil {
					t.Fatalf("preimage: %v", err)
				}
				checkKey(t, f.RedisNamespace, pre, kc.PreimageHex, kc.Key, kc.RedisKey)
			})
		}
	})

	t.Run("records", func(t *testing.T) {
		kinds := map[string]int{}
		for _, rc := range f.Records {
			kinds[rc.Kind]++
			t.Run(rc.Kind+"/"+rc.Name, func(t *testing.T) {
				cr := buildRecord(t, rc.Kind, rc.Fields)
				checkKey(t, f.RedisNamespace, cr.preimage, rc.PreimageHex, rc.Key, rc.RedisKey)

				// Encode direction: fields -> exact bytes.
				got, err := cr.encode()
				if err != nil {
					t.Fatalf("encode: %v", err)
				}
				if string(got) != rc.Value {
					t.Fatalf("encode mismatch\n got: %s\nwant: %s", got, rc.Value)
				}
				// Decode direction: exact bytes -> fields.
				dec, err := cr.decode([]byte(rc.Value))
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if want := normalize(cr.rec); !reflect.DeepEqual(dec, want) {
					t.Fatalf("decode mismatch\n got: %#v\nwant: %#v", dec, want)
				}
				if err := record.CheckCanonical(record.Kind(rc.Kind), []byte(rc.Value)); err != nil {
					t.Fatalf("CheckCanonical: %v", err)
				}
			})
		}
		for _, k := range allKinds {
			if kinds[string(k)] < 2 {
				t.Errorf("fixture has %d %s records, want several", kinds[string(k)], k)
			}
		}
	})

	t.Run("rejectedKeys", func(t *testing.T) {
		for _, rk := range f.RejectedKeys {
			t.Run(rk.Name, func(t *testing.T) {
				_, err := keyPreimage(t, rk.Kind, rk.Inputs)
				want := errorClasses[rk.Error]
				if want == nil || !errors.Is(err, want) {
					t.Fatalf("err = %v, want %s", err, rk.Error)
				}
			})
		}
	})

	t.Run("rejectedValues", func(t *testing.T) {
		// §12: each language fails explicitly on an unrecognised
		// recordVersion, for every record kind — so the fixture must carry
		// such a case for each kind, not only for some.
		unknownVersion := map[string]int{}
		for _, rv := range f.RejectedValues {
			if rv.Error == "unknownVersion" {
				unknownVersion[rv.Kind]++
			}
		}
		for _, k := range allKinds {
			if unknownVersion[string(k)] == 0 {
				t.Errorf("fixture has no unknownVersion case for %s", k)
			}
		}
		for _, rv := range f.RejectedValues {
			t.Run(rv.Kind+"/"+rv.Name, func(t *testing.T) {
				_, err := decodeAny(rv.Kind, rv.bytes(t))
				want := errorClasses[rv.Error]
				if want == nil || !errors.Is(err, want) {
					t.Fatalf("err = %v, want %s", err, rv.Error)
				}
				for name, other := range errorClasses {
					if name != rv.Error && errors.Is(err, other) {
						t.Fatalf("err = %v also matches %s", err, name)
					}
				}
			})
		}
	})

	t.Run("nonCanonicalValues", func(t *testing.T) {
		for _, nc := range f.NonCanonicalValues {
			t.Run(nc.Kind+"/"+nc.Name, func(t *testing.T) {
				if _, err := decodeAny(nc.Kind, []byte(nc.Value)); err != nil {
					t.Fatalf("decode: %v (a non-canonical spelling must still decode)", err)
				}
				err := record.CheckCanonical(record.Kind(nc.Kind), []byte(nc.Value))
				if !errors.Is(err, record.ErrNonCanonical) {
					t.Fatalf("CheckCanonical = %v, want ErrNonCanonical", err)
				}
			})
		}
	})
}

func checkKey(t *testing.T, ns string, pre []byte, wantHex, wantKey, wantRedis string) {
	t.Helper()
	if got := hex.EncodeToString(pre); got != wantHex {
		t.Fatalf("preimage hex\n got: %s\nwant: %s", got, wantHex)
	}
	if got := record.Key(pre); got != wantKey {
		t.Fatalf("key = %s, want %s", got, wantKey)
	}
	if got := record.RedisKey(ns, pre); got != wantRedis {
		t.Fatalf("redis key = %s, want %s", got, wantRedis)
	}
}

// TestFixtureValuesAreRFC8785 re-serializes every fixture value with
// encoding/json (sorted map keys, HTML escaping off) — an implementation
// independent of the package — and expects the same bytes. encoding/json
// differs from RFC 8785 only in escaping U+2028/U+2029 and in ordering keys
// by bytes rather than UTF-16 units, so values where either can matter are
// compared after undoing the first and skipped for the second.
func TestFixtureValuesAreRFC8785(t *testing.T) {
	f := loadFixture(t)
	checked := 0
	for _, rc := range f.Records {
		if hasAstralKey(rc.Value) {
			continue
		}
		d := json.NewDecoder(strings.NewReader(rc.Value))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%s: %v", rc.Name, err)
		}
		var buf bytes.Buffer
		e := json.NewEncoder(&buf)
		e.SetEscapeHTML(false)
		if err := e.Encode(v); err != nil {
			t.Fatalf("%s: %v", rc.Name, err)
		}
		got := strings.TrimSuffix(buf.String(), "\n")
		got = strings.NewReplacer(`\u2028`, "\u2028", `\u2029`, "\u2029").Replace(got)
		if got != rc.Value {
			t.Errorf("%s: encoding/json gives\n%s\nfixture has\n%s", rc.Name, got, rc.Value)
		}
		checked++
	}
	if checked < len(f.Records)/2 {
		t.Fatalf("only %d of %d records cross-checked", checked, len(f.Records))
	}
}

// hasAstralKey reports a character above U+FFFF anywhere in the value (a
// cheap superset of "in a member name").
func hasAstralKey(s string) bool {
	for _, r := range s {
		if r > 0xFFFF {
			return true
		}
	}
	return false
}
