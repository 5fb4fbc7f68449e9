package record_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
)

func strptr(s string) *string { return &s }

func validMeshNode() record.MeshNodeDescriptor {
	return record.MeshNodeDescriptor{
		MeshName: "game", RoutingID: []byte{0xab, 0x01}, LifecycleGeneration: 3, DescriptorRevision: 9,
		Endpoint: "tcp://127.0.0.1:5555", EntrySpotID: strptr("entry:1"),
		ChannelWeights:     map[string]int{"chat": 100},
		ApplicationVersion: 7,
		ObjectCapabilities: []record.ObjectCapability{
			{ObjectKind: record.ObjectActor, StableType: "Player", Policy: record.PolicyRecreate},
			{ObjectKind: record.ObjectUserSpot, StableType: "Room", Policy: record.PolicySnapshot, HasSnapshotAdapter: true, Limit: 10},
		},
		ObjectRole: record.RoleServer, PlacementWeight: 100,
		Capacity: record.NodeCapacity{
			Actors:    record.SlotUsage{Active: 1, Reserved: 0, Limit: 0},
			Spots:     record.SlotUsage{Active: 1, Reserved: 1, Limit: 50},
			SpotTypes: []record.SpotTypeUsage{{ObjectKind: record.ObjectUserSpot, StableType: "Room", Active: 1, Reserved: 1, Limit: 10}},
		},
		ActivationConcurrency: record.ActivationConcurrency{Active: 0, Limit: 4},
		State:                 record.StateServing, SecurityIdentity: "CN=a", OwnerID: "owner-1", LeaseGeneration: 2, UpdatedAt: 1000,
	}
}

func validAuthority() record.Authority {
	return record.Authority{
		ObjectID: "room:1", Payload: []byte{1, 2, 3}, ObjectGeneration: 10, AuthorityOwnerGeneration: 2, OwnerID: "owner-1", OwnerLeaseGeneration: 2,
		Allocation: record.Allocation{
			State: record.AllocationActive, ObjectKind: record.ObjectUserSpot, StableType: "Room",
			Descriptor:                    record.DescriptorRef{MeshName: "game", RoutingID: []byte{0xab, 0x01}},
			DescriptorLifecycleGeneration: 3,
			Capacity: record.AllocationCapacity{Actors: 0, Spots: 1,
				SpotType: &record.SpotTypeSlots{ObjectKind: record.ObjectUserSpot, StableType: "Room", Count: 1}},
		},
		PendingCreation: &record.PendingCreation{ReservationID: "r1", RequestContentReference: "ref", RequestEncodedSize: 10},
	}
}

// withRelocation gives a (an Active record without creation state) valid
// relocation progress of stage: the owner is the source before committed,
// the target from committed on. It returns the progress for further edits.
func withRelocation(a *record.Authority, stage record.RelocationStage) *record.RelocationProgress {
	a.PendingCreation = nil
	target := record.RelocationParty{OwnerID: "owner-9", OwnerLeaseGeneration: 4, MeshName: "game", RoutingID: []byte{0xcd}, LifecycleGeneration: 8}
	r := &record.RelocationProgress{Stage: stage, RelocationID: [16]byte{1}, TargetAttempt: 1, ReservationID: [16]byte{2},
		Source: a.OwnerParty(), Target: target}
	if stage == record.RelocationCommitted {
		r.PreviousAuthorityOwnerGeneration = a.AuthorityOwnerGeneration
		a.AuthorityOwnerGeneration++
		a.OwnerID, a.OwnerLeaseGeneration = target.OwnerID, target.OwnerLeaseGeneration
		a.Allocation.Descriptor = record.DescriptorRef{MeshName: target.MeshName, RoutingID: target.RoutingID}
		a.Allocation.DescriptorLifecycleGeneration = target.LifecycleGeneration
	}
	r.Source.RoutingID = append([]byte(nil), r.Source.RoutingID...)
	a.Relocation = r
	return r
}

// expectField checks err is a *FieldError on exactly field.
func expectField(t *testing.T, err error, field string) {
	t.Helper()
	var fe *record.FieldError
	if !errors.As(err, &fe) || !errors.Is(err, record.ErrInvalidField) {
		t.Fatalf("err = %v, want *FieldError on %s", err, field)
	}
	if fe.Field != field {
		t.Fatalf("field = %s (%v), want %s", fe.Field, err, field)
	}
}

func expectLimit(t *testing.T, err error, what string) {
	t.Helper()
	var le *record.LimitError
	if !errors.As(err, &le) || !errors.Is(err, record.ErrLimit) || le.What != what {
		t.Fatalf("err = %v, want *LimitError on %s", err, what)
	}
}

func manyCapabilities(n int) []record.ObjectCapability {
	caps := make([]record.ObjectCapability, n)
	for i := range caps {
		caps[i] = record.ObjectCapability{ObjectKind: record.ObjectActor, StableType: fmt.Sprintf("T%04d", i), Policy: record.PolicyDisabled}
	}
	return caps
}

func manySpotTypes(n int) []record.SpotTypeUsage {
	ts := make([]record.SpotTypeUsage, n)
	for i := range ts {
		ts[i] = record.SpotTypeUsage{ObjectKind: record.ObjectInstanceSpot, StableType: fmt.Sprintf("S%04d", i)}
	}
	return ts
}

func TestMeshNodeValidation(t *testing.T) {
	s256 := strings.Repeat("s", 256)
	tests := []struct {
		name   string
		mutate func(*record.MeshNodeDescriptor)
		field  string // FieldError path; "" = valid
		limit  string // LimitError.What instead
	}{
		{"valid", func(*record.MeshNodeDescriptor) {}, "", ""},
		{"mesh name empty", func(d *record.MeshNodeDescriptor) { d.MeshName = "" }, "descriptor.meshName", ""},
		{"mesh name NUL", func(d *record.MeshNodeDescriptor) { d.MeshName = "a\x00" }, "descriptor.meshName", ""},
		{"mesh name 256", func(d *record.MeshNodeDescriptor) { d.MeshName = s256 }, "descriptor.meshName", ""},
		{"routing id empty", func(d *record.MeshNodeDescriptor) { d.RoutingID = nil }, "descriptor.routingIdHex", ""},
		{"routing id 256", func(d *record.MeshNodeDescriptor) { d.RoutingID = make([]byte, 256) }, "descriptor.routingIdHex", ""},
		{"lifecycle 0", func(d *record.MeshNodeDescriptor) { d.LifecycleGeneration = 0 }, "descriptor.lifecycleGeneration", ""},
		{"lifecycle 2^63", func(d *record.MeshNodeDescriptor) { d.LifecycleGeneration = record.MaxGeneration + 1 }, "descriptor.lifecycleGeneration", ""},
		{"lifecycle 2^63-1", func(d *record.MeshNodeDescriptor) { d.LifecycleGeneration = record.MaxGeneration }, "", ""},
		{"revision 0", func(d *record.MeshNodeDescriptor) { d.DescriptorRevision = 0 }, "descriptorRevision", ""},
		{"endpoint empty", func(d *record.MeshNodeDescriptor) { d.Endpoint = "" }, "descriptor.endpoint", ""},
		{"endpoint 1025", func(d *record.MeshNodeDescriptor) { d.Endpoint = strings.Repeat("e", 1025) }, "descriptor.endpoint", ""},
		{"endpoint NUL", func(d *record.MeshNodeDescriptor) { d.Endpoint = "tcp://\x00" }, "descriptor.endpoint", ""},
		{"server without entry spot", func(d *record.MeshNodeDescriptor) { d.EntrySpotID = nil }, "descriptor.entrySpotId", ""},
		{"client with entry spot", func(d *record.MeshNodeDescriptor) { d.ObjectRole = record.RoleClient }, "descriptor.entrySpotId", ""},
		{"none with entry spot", func(d *record.MeshNodeDescriptor) { d.ObjectRole = record.RoleNone }, "descriptor.entrySpotId", ""},
		{"client without entry spot", func(d *record.MeshNodeDescriptor) { d.ObjectRole, d.EntrySpotID = record.RoleClient, nil }, "", ""},
		{"entry spot empty", func(d *record.MeshNodeDescriptor) { d.EntrySpotID = strptr("") }, "descriptor.entrySpotId", ""},
		{"entry spot 256", func(d *record.MeshNodeDescriptor) { d.EntrySpotID = strptr(s256) }, "descriptor.entrySpotId", ""},
		{"role unknown", func(d *record.MeshNodeDescriptor) { d.ObjectRole = "Server" }, "descriptor.objectRole", ""},
		{"channel name empty", func(d *record.MeshNodeDescriptor) { d.ChannelWeights = map[string]int{"": 1} }, `descriptor.channelWeights[""]`, ""},
		{"channel name NUL", func(d *record.MeshNodeDescriptor) { d.ChannelWeights = map[string]int{"a\x00": 1} }, `descriptor.channelWeights["a\x00"]`, ""},
		{"channel weight 10001", func(d *record.MeshNodeDescriptor) { d.ChannelWeights = map[string]int{"c": 10001} }, `descriptor.channelWeights["c"]`, ""},
		{"channel weight -1", func(d *record.MeshNodeDescriptor) { d.ChannelWeights = map[string]int{"c": -1} }, `descriptor.channelWeights["c"]`, ""},
		{"channel weight 0 and 10000", func(d *record.MeshNodeDescriptor) { d.ChannelWeights = map[string]int{"a": 0, "b": 10000} }, "", ""},
		{"application version 2^63", func(d *record.MeshNodeDescriptor) { d.ApplicationVersion = 1 << 63 }, "descriptor.applicationVersion", ""},
		{"application version 0", func(d *record.MeshNodeDescriptor) { d.ApplicationVersion = 0 }, "", ""},
		{"capability kind", func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities[0].ObjectKind = "entrySpot" }, "descriptor.objectCapabilities[0].objectKind", ""},
		{"capability stable type empty", func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities[1].StableType = "" }, "descriptor.objectCapabilities[1].stableType", ""},
		{"capability policy", func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities[0].Policy = "Snapshot" }, "descriptor.objectCapabilities[0].policy", ""},
		{"capability limit -1", func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities[0].Limit = -1 }, "descriptor.objectCapabilities[0].limit", ""},
		{"capability limit 2^31", func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities[0].Limit = 1 << 31 }, "descriptor.objectCapabilities[0].limit", ""},
		{"capability limit 2^31-1", func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities[0].Limit = 1<<31 - 1 }, "", ""},
		{"capability duplicate", func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities[1] = d.ObjectCapabilities[0] }, "descriptor.objectCapabilities[1]", ""},
		{"same stable type, other kind", func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities[1].StableType = "Player" }, "", ""},
		{"1024 capabilities", func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities = manyCapabilities(1024) }, "", ""},
		{"1025 capabilities", func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities = manyCapabilities(1025) }, "", "descriptor.objectCapabilities entries"},
		{"placement weight 10001", func(d *record.MeshNodeDescriptor) { d.PlacementWeight = 10001 }, "descriptor.placementWeight", ""},
		{"placement weight -1", func(d *record.MeshNodeDescriptor) { d.PlacementWeight = -1 }, "descriptor.placementWeight", ""},
		{"actors active -1", func(d *record.MeshNodeDescriptor) { d.Capacity.Actors.Active = -1 }, "descriptor.capacity.actors.active", ""},
		{"actors reserved 2^31", func(d *record.MeshNodeDescriptor) { d.Capacity.Actors.Reserved = 1 << 31 }, "descriptor.capacity.actors.reserved", ""},
		{"spots limit -1", func(d *record.MeshNodeDescriptor) { d.Capacity.Spots.Limit = -1 }, "descriptor.capacity.spots.limit", ""},
		{"spot type of kind actor", func(d *record.MeshNodeDescriptor) { d.Capacity.SpotTypes[0].ObjectKind = record.ObjectActor }, "descriptor.capacity.spotTypes[0].objectKind", ""},
		{"spot type stable type 256", func(d *record.MeshNodeDescriptor) { d.Capacity.SpotTypes[0].StableType = s256 }, "descriptor.capacity.spotTypes[0].stableType", ""},
		{"spot type active -1", func(d *record.MeshNodeDescriptor) { d.Capacity.SpotTypes[0].Active = -1 }, "descriptor.capacity.spotTypes[0].active", ""},
		{"spot type duplicate", func(d *record.MeshNodeDescriptor) {
			d.Capacity.SpotTypes = append(d.Capacity.SpotTypes, d.Capacity.SpotTypes[0])
		}, "descriptor.capacity.spotTypes[1]", ""},
		{"1025 spot types", func(d *record.MeshNodeDescriptor) { d.Capacity.SpotTypes = manySpotTypes(1025) }, "", "descriptor.capacity.spotTypes entries"},
		{"activation limit -1", func(d *record.MeshNodeDescriptor) { d.ActivationConcurrency.Limit = -1 }, "descriptor.activationConcurrency.limit", ""},
		{"maintenance wave empty", func(d *record.MeshNodeDescriptor) { d.MaintenanceWave = strptr("") }, "descriptor.maintenanceWave", ""},
		{"maintenance wave set", func(d *record.MeshNodeDescriptor) { d.MaintenanceWave = strptr("w1") }, "", ""},
		{"state empty", func(d *record.MeshNodeDescriptor) { d.State = "" }, "descriptor.state", ""},
		{"state unknown", func(d *record.MeshNodeDescriptor) { d.State = "ready" }, "descriptor.state", ""},
		{"security identity empty", func(d *record.MeshNodeDescriptor) { d.SecurityIdentity = "" }, "", ""},
		{"security identity 1025", func(d *record.MeshNodeDescriptor) { d.SecurityIdentity = strings.Repeat("i", 1025) }, "descriptor.securityIdentity", ""},
		{"security identity invalid UTF-8", func(d *record.MeshNodeDescriptor) { d.SecurityIdentity = "\xff" }, "descriptor.securityIdentity", ""},
		{"owner empty", func(d *record.MeshNodeDescriptor) { d.OwnerID = "" }, "ownerId", ""},
		{"lease 0", func(d *record.MeshNodeDescriptor) { d.LeaseGeneration = 0 }, "leaseGeneration", ""},
		{"updated negative", func(d *record.MeshNodeDescriptor) { d.UpdatedAt = -1 }, "descriptor.updatedAtEpochMs", ""},
		{"value over 1 MiB", func(d *record.MeshNodeDescriptor) {
			d.ChannelWeights = make(map[string]int)
			for i := 0; i < 5000; i++ {
				d.ChannelWeights[fmt.Sprintf("%04d", i)+strings.Repeat("c", 240)] = 1
			}
		}, "", "value bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := validMeshNode()
			tt.mutate(&d)
			b, err := d.Encode()
			if verr := d.Validate(); fmt.Sprint(verr) != fmt.Sprint(err) {
				t.Fatalf("Validate() = %v, Encode() = %v", verr, err)
			}
			switch {
			case tt.limit != "":
				expectLimit(t, err, tt.limit)
			case tt.field != "":
				expectField(t, err, tt.field)
			default:
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				if len(b) > record.MaxValueBytes {
					t.Fatalf("value %d bytes", len(b))
				}
				got, err := record.DecodeMeshNode(b)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				again, _ := got.Encode()
				if string(again) != string(b) {
					t.Fatalf("re-encode differs")
				}
			}
		})
	}
}

func TestAuthorityValidation(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*record.Authority)
		field  string
		limit  string
	}{
		{"valid", func(*record.Authority) {}, "", ""},
		{"object id empty", func(a *record.Authority) { a.ObjectID = "" }, "objectId", ""},
		{"object id with NUL", func(a *record.Authority) { a.ObjectID = "a\x00b" }, "objectId", ""},
		{"object id 256 bytes", func(a *record.Authority) { a.ObjectID = strings.Repeat("x", 256) }, "objectId", ""},
		{"object generation 0", func(a *record.Authority) { a.ObjectGeneration = 0 }, "objectGeneration", ""},
		{"object generation sentinel is storable", func(a *record.Authority) { a.ObjectGeneration = record.MaxGeneration }, "", ""},
		{"owner generation 0", func(a *record.Authority) { a.AuthorityOwnerGeneration = 0 }, "authorityOwnerGeneration", ""},
		{"owner empty", func(a *record.Authority) { a.OwnerID = "" }, "ownerId", ""},
		{"owner lease generation 2^63", func(a *record.Authority) { a.OwnerLeaseGeneration = 1 << 63 }, "ownerLeaseGeneration", ""},
		{"state empty", func(a *record.Authority) { a.Allocation.State = "" }, "allocation.state", ""},
		{"state Active", func(a *record.Authority) { a.Allocation.State = "Active" }, "allocation.state", ""},
		{"object kind entrySpot", func(a *record.Authority) { a.Allocation.ObjectKind = "entrySpot" }, "allocation.objectKind", ""},
		{"stable type empty", func(a *record.Authority) { a.Allocation.StableType = "" }, "allocation.stableType", ""},
		{"descriptor mesh NUL", func(a *record.Authority) { a.Allocation.Descriptor.MeshName = "\x00" }, "allocation.descriptor.meshName", ""},
		{"descriptor routing id empty", func(a *record.Authority) { a.Allocation.Descriptor.RoutingID = nil }, "allocation.descriptor.routingIdHex", ""},
		{"descriptor lifecycle 0", func(a *record.Authority) { a.Allocation.DescriptorLifecycleGeneration = 0 }, "allocation.descriptorLifecycleGeneration", ""},
		{"actors -1", func(a *record.Authority) { a.Allocation.Capacity.Actors = -1 }, "allocation.capacity.actors", ""},
		{"spots 2^31", func(a *record.Authority) { a.Allocation.Capacity.Spots = 1 << 31 }, "allocation.capacity.spots", ""},
		{"spot without spotType", func(a *record.Authority) { a.Allocation.Capacity.SpotType = nil }, "allocation.capacity.spotType", ""},
		{"actor with spotType", func(a *record.Authority) {
			a.Allocation.ObjectKind, a.Allocation.StableType = record.ObjectActor, "Player"
		}, "allocation.capacity.spotType", ""},
		{"actor without spotType", func(a *record.Authority) {
			a.Allocation.ObjectKind, a.Allocation.Capacity = record.ObjectActor, record.AllocationCapacity{Actors: 1}
		}, "", ""},
		{"actor with empty bundle", func(a *record.Authority) {
			a.Allocation.ObjectKind, a.Allocation.Capacity = record.ObjectActor, record.AllocationCapacity{}
		}, "allocation.capacity", ""},
		{"spot with only a spot-type slot", func(a *record.Authority) { a.Allocation.Capacity.Spots = 0 }, "", ""},
		{"spot with empty bundle", func(a *record.Authority) {
			a.Allocation.Capacity.Spots, a.Allocation.Capacity.SpotType.Count = 0, 0
		}, "allocation.capacity", ""},
		{"spotType kind differs", func(a *record.Authority) { a.Allocation.Capacity.SpotType.ObjectKind = record.ObjectInstanceSpot }, "allocation.capacity.spotType.objectKind", ""},
		{"spotType stable type differs", func(a *record.Authority) { a.Allocation.Capacity.SpotType.StableType = "Hall" }, "allocation.capacity.spotType.stableType", ""},
		{"spotType count -1", func(a *record.Authority) { a.Allocation.Capacity.SpotType.Count = -1 }, "allocation.capacity.spotType.count", ""},
		{"no pending creation", func(a *record.Authority) { a.PendingCreation = nil }, "", ""},
		{"reservation id empty", func(a *record.Authority) { a.PendingCreation.ReservationID = "" }, "pendingCreation.reservationId", ""},
		{"content reference empty", func(a *record.Authority) { a.PendingCreation.RequestContentReference = "" }, "pendingCreation.requestContentReference", ""},
		{"content reference 4097", func(a *record.Authority) {
			a.PendingCreation.RequestContentReference = strings.Repeat("r", 4097)
		}, "pendingCreation.requestContentReference", ""},
		{"encoded size -1", func(a *record.Authority) { a.PendingCreation.RequestEncodedSize = -1 }, "pendingCreation.requestEncodedSize", ""},
		{"encoded size 1 MiB", func(a *record.Authority) { a.PendingCreation.RequestEncodedSize = 1 << 20 }, "", ""},
		{"encoded size 1 MiB + 1", func(a *record.Authority) { a.PendingCreation.RequestEncodedSize = 1<<20 + 1 }, "pendingCreation.requestEncodedSize", ""},
		{"empty payload", func(a *record.Authority) { a.Payload = nil }, "", ""},
		{"relocation captured", func(a *record.Authority) { withRelocation(a, record.RelocationCaptured) }, "", ""},
		{"relocation prepared", func(a *record.Authority) { withRelocation(a, record.RelocationPrepared) }, "", ""},
		{"relocation committed", func(a *record.Authority) { withRelocation(a, record.RelocationCommitted) }, "", ""},
		{"relocation stage preparing is not stored", func(a *record.Authority) { withRelocation(a, "preparing") }, "relocation.stage", ""},
		{"relocation id zero", func(a *record.Authority) { withRelocation(a, record.RelocationCaptured).RelocationID = [16]byte{} }, "relocation.relocationId", ""},
		{"reservation id zero", func(a *record.Authority) { withRelocation(a, record.RelocationCaptured).ReservationID = [16]byte{} }, "relocation.reservationId", ""},
		{"target attempt 0", func(a *record.Authority) { withRelocation(a, record.RelocationCaptured).TargetAttempt = 0 }, "relocation.targetAttempt", ""},
		{"target attempt sentinel", func(a *record.Authority) {
			withRelocation(a, record.RelocationCaptured).TargetAttempt = record.MaxGeneration
		}, "", ""},
		{"source owner empty", func(a *record.Authority) { withRelocation(a, record.RelocationCaptured).Source.OwnerID = "" }, "relocation.source.ownerId", ""},
		{"target routing id empty", func(a *record.Authority) { withRelocation(a, record.RelocationCaptured).Target.RoutingID = nil }, "relocation.target.routingIdHex", ""},
		{"target lifecycle 0", func(a *record.Authority) { withRelocation(a, record.RelocationCaptured).Target.LifecycleGeneration = 0 }, "relocation.target.lifecycleGeneration", ""},
		{"target on the source's node run", func(a *record.Authority) {
			r := withRelocation(a, record.RelocationCaptured)
			r.Target.MeshName, r.Target.RoutingID, r.Target.LifecycleGeneration = r.Source.MeshName, r.Source.RoutingID, r.Source.LifecycleGeneration
		}, "relocation.target", ""},
		{"captured but another owner", func(a *record.Authority) {
			withRelocation(a, record.RelocationCaptured).Source.OwnerLeaseGeneration = 9
		}, "relocation.source", ""},
		{"captured but another node", func(a *record.Authority) { withRelocation(a, record.RelocationCaptured).Source.LifecycleGeneration = 9 }, "relocation.source", ""},
		{"committed but the target is not the owner", func(a *record.Authority) { withRelocation(a, record.RelocationCommitted).Target.OwnerID = "x" }, "relocation.target", ""},
		{"committed without previous generation", func(a *record.Authority) {
			withRelocation(a, record.RelocationCommitted).PreviousAuthorityOwnerGeneration = 0
		}, "relocation.previousAuthorityOwnerGeneration", ""},
		{"committed previous generation not below", func(a *record.Authority) {
			withRelocation(a, record.RelocationCommitted).PreviousAuthorityOwnerGeneration = a.AuthorityOwnerGeneration
		}, "relocation.previousAuthorityOwnerGeneration", ""},
		{"prepared with previous generation", func(a *record.Authority) {
			withRelocation(a, record.RelocationPrepared).PreviousAuthorityOwnerGeneration = 1
		}, "relocation.previousAuthorityOwnerGeneration", ""},
		{"relocation of a reserved allocation", func(a *record.Authority) {
			withRelocation(a, record.RelocationCaptured)
			a.Allocation.State = record.AllocationReserved
		}, "relocation.stage", ""},
		{"relocation with pending creation", func(a *record.Authority) {
			withRelocation(a, record.RelocationCaptured)
			a.PendingCreation = &record.PendingCreation{ReservationID: "r1", RequestContentReference: "ref"}
		}, "relocation.stage", ""},
		{"payload over 1 MiB encoded", func(a *record.Authority) { a.Payload = make([]byte, 800_000) }, "", "value bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := validAuthority()
			tt.mutate(&a)
			b, err := a.Encode()
			switch {
			case tt.limit != "":
				expectLimit(t, err, tt.limit)
			case tt.field != "":
				expectField(t, err, tt.field)
			default:
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				got, err := record.DecodeAuthority(b)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if len(a.Payload) == 0 {
					a.Payload = nil
				}
				if !reflect.DeepEqual(got, a) {
					t.Fatalf("round trip\n got %#v\nwant %#v", got, a)
				}
			}
		})
	}
}

func TestSmallRecordValidation(t *testing.T) {
	lease := func(f func(*record.OwnerLease)) error {
		l := record.OwnerLease{OwnerID: "o", LeaseGeneration: 1, AcquiredAt: 1, UpdatedAt: 1}
		f(&l)
		return l.Validate()
	}
	cs := func(f func(*record.ClientServerDescriptor)) error {
		d := record.ClientServerDescriptor{ChannelName: "c", ServerRoutingID: []byte{1}, LifecycleGeneration: 1, DescriptorRevision: 1,
			Endpoint: "tcp://x:1", Weight: 100, State: record.StateServing, OwnerID: "o", LeaseGeneration: 1}
		f(&d)
		return d.Validate()
	}
	fan := func(f func(*record.FanoutPublisherDescriptor)) error {
		d := record.FanoutPublisherDescriptor{ChannelName: "c", PublisherRoutingID: []byte{1}, LifecycleGeneration: 1, DescriptorRevision: 1,
			Endpoint: "tcp://x:1", State: record.StateServing, OwnerID: "o", LeaseGeneration: 1}
		f(&d)
		return d.Validate()
	}
	tests := []struct {
		name  string
		err   error
		field string
	}{
		{"lease valid", lease(func(*record.OwnerLease) {}), ""},
		{"lease owner empty", lease(func(l *record.OwnerLease) { l.OwnerID = "" }), "ownerId"},
		{"lease generation 0", lease(func(l *record.OwnerLease) { l.LeaseGeneration = 0 }), "leaseGeneration"},
		{"lease acquired negative", lease(func(l *record.OwnerLease) { l.AcquiredAt = -5 }), "acquiredAtEpochMs"},
		{"lease updated negative", lease(func(l *record.OwnerLease) { l.UpdatedAt = -5 }), "updatedAtEpochMs"},
		{"cs valid", cs(func(*record.ClientServerDescriptor) {}), ""},
		{"cs channel empty", cs(func(d *record.ClientServerDescriptor) { d.ChannelName = "" }), "descriptor.channelName"},
		{"cs routing id empty", cs(func(d *record.ClientServerDescriptor) { d.ServerRoutingID = nil }), "descriptor.serverRoutingIdHex"},
		{"cs weight 10001", cs(func(d *record.ClientServerDescriptor) { d.Weight = 10001 }), "descriptor.weight"},
		{"cs weight -1", cs(func(d *record.ClientServerDescriptor) { d.Weight = -1 }), "descriptor.weight"},
		{"cs state", cs(func(d *record.ClientServerDescriptor) { d.State = "up" }), "descriptor.state"},
		{"cs endpoint empty", cs(func(d *record.ClientServerDescriptor) { d.Endpoint = "" }), "descriptor.endpoint"},
		{"cs security NUL", cs(func(d *record.ClientServerDescriptor) { d.SecurityIdentity = "\x00" }), "descriptor.securityIdentity"},
		{"cs revision 0", cs(func(d *record.ClientServerDescriptor) { d.DescriptorRevision = 0 }), "descriptorRevision"},
		{"cs lifecycle 0", cs(func(d *record.ClientServerDescriptor) { d.LifecycleGeneration = 0 }), "descriptor.lifecycleGeneration"},
		{"fanout valid", fan(func(*record.FanoutPublisherDescriptor) {}), ""},
		{"fanout routing id 256", fan(func(d *record.FanoutPublisherDescriptor) { d.PublisherRoutingID = make([]byte, 256) }), "descriptor.publisherRoutingIdHex"},
		{"fanout owner 256", fan(func(d *record.FanoutPublisherDescriptor) { d.OwnerID = strings.Repeat("o", 256) }), "ownerId"},
		{"fanout updated negative", fan(func(d *record.FanoutPublisherDescriptor) { d.UpdatedAt = -1 }), "descriptor.updatedAtEpochMs"},
		{"counter 0", record.Counter{}.Validate(), "value"},
		{"counter max", record.Counter{Value: record.MaxGeneration}.Validate(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.field == "" {
				if tt.err != nil {
					t.Fatalf("unexpected %v", tt.err)
				}
				return
			}
			expectField(t, tt.err, tt.field)
		})
	}
}

// Exact canonical bytes written by hand from the rules in docs/RECORDS.md.
func TestHandWrittenCanonicalValues(t *testing.T) {
	es := "e"
	tests := []struct {
		name string
		enc  func() ([]byte, error)
		want string
	}{
		{"owner lease with escapes",
			record.OwnerLease{OwnerID: "n\"1\\\x01\u00e9", LeaseGeneration: 7, AcquiredAt: 1, UpdatedAt: 1752000000000}.Encode,
			`{"acquiredAtEpochMs":"1","leaseGeneration":"7","ownerId":"n\"1\\\u0001é","recordVersion":1,"updatedAtEpochMs":"1752000000000"}`},
		{"counter",
			record.Counter{Value: 42}.Encode,
			`{"recordVersion":1,"value":"42"}`},
		{"fanout",
			record.FanoutPublisherDescriptor{ChannelName: "p", PublisherRoutingID: []byte{0xff, 0x00}, LifecycleGeneration: 1, DescriptorRevision: 2,
				Endpoint: "tcp://h:1", State: record.StateDraining, SecurityIdentity: "", OwnerID: "o", LeaseGeneration: 3, UpdatedAt: 4}.Encode,
			`{"descriptor":{"channelName":"p","descriptorRevision":"2","endpoint":"tcp://h:1","leaseGeneration":"3","lifecycleGeneration":"1","ownerId":"o",` +
				`"publisherRoutingIdHex":"ff00","securityIdentity":"","state":"draining","updatedAtEpochMs":"4"},"descriptorRevision":"2","leaseGeneration":"3","ownerId":"o","recordVersion":1}`},
		{"authority actor",
			record.Authority{ObjectID: "a:1", Payload: []byte("hi!"), ObjectGeneration: 9, AuthorityOwnerGeneration: 1, OwnerID: "o", OwnerLeaseGeneration: 3,
				Allocation: record.Allocation{State: record.AllocationReserved, ObjectKind: record.ObjectActor, StableType: "P",
					Descriptor: record.DescriptorRef{MeshName: "m", RoutingID: []byte{0x0a}}, DescriptorLifecycleGeneration: 2,
					Capacity: record.AllocationCapacity{Actors: 1}},
				PendingCreation: &record.PendingCreation{ReservationID: "r", RequestContentReference: "c", RequestSHA256: [32]byte{0xab}, RequestEncodedSize: 5},
			}.Encode,
			`{"allocation":{"capacity":{"actors":"1","spotType":null,"spots":"0"},"descriptor":{"meshName":"m","routingIdHex":"0a"},` +
				`"descriptorLifecycleGeneration":"2","objectKind":"actor","stableType":"P","state":"reserved"},"authorityOwnerGeneration":"1",` +
				`"objectGeneration":"9","objectId":"a:1","ownerId":"o","ownerLeaseGeneration":"3","payload":"aGkh","pendingCreation":{"requestContentReference":"c",` +
				`"requestEncodedSize":"5","requestSha256":"ab` + strings.Repeat("00", 31) + `","reservationId":"r"},"recordVersion":1,"relocation":null}`},
		{"authority committed relocation",
			record.Authority{ObjectID: "a:1", ObjectGeneration: 9, AuthorityOwnerGeneration: 3, OwnerID: "t", OwnerLeaseGeneration: 4,
				Allocation: record.Allocation{State: record.AllocationActive, ObjectKind: record.ObjectActor, StableType: "P",
					Descriptor: record.DescriptorRef{MeshName: "m", RoutingID: []byte{0x0b}}, DescriptorLifecycleGeneration: 6,
					Capacity: record.AllocationCapacity{Actors: 1}},
				Relocation: &record.RelocationProgress{Stage: record.RelocationCommitted, RelocationID: [16]byte{0x01, 15: 0xff}, TargetAttempt: 2,
					ReservationID: [16]byte{15: 0x07}, PreviousAuthorityOwnerGeneration: 2,
					Source: record.RelocationParty{OwnerID: "s", OwnerLeaseGeneration: 1, MeshName: "m", RoutingID: []byte{0x0a}, LifecycleGeneration: 5},
					Target: record.RelocationParty{OwnerID: "t", OwnerLeaseGeneration: 4, MeshName: "m", RoutingID: []byte{0x0b}, LifecycleGeneration: 6}},
			}.Encode,
			`{"allocation":{"capacity":{"actors":"1","spotType":null,"spots":"0"},"descriptor":{"meshName":"m","routingIdHex":"0b"},` +
				`"descriptorLifecycleGeneration":"6","objectKind":"actor","stableType":"P","state":"active"},"authorityOwnerGeneration":"3",` +
				`"objectGeneration":"9","objectId":"a:1","ownerId":"t","ownerLeaseGeneration":"4","payload":"","pendingCreation":null,"recordVersion":1,` +
				`"relocation":{"previousAuthorityOwnerGeneration":"2","relocationId":"01` + strings.Repeat("00", 14) + `ff","reservationId":"` + strings.Repeat("00", 15) + `07",` +
				`"source":{"lifecycleGeneration":"5","meshName":"m","ownerId":"s","ownerLeaseGeneration":"1","routingIdHex":"0a"},"stage":"committed",` +
				`"target":{"lifecycleGeneration":"6","meshName":"m","ownerId":"t","ownerLeaseGeneration":"4","routingIdHex":"0b"},"targetAttempt":"2"}}`},
		{"mesh node minimal client",
			record.MeshNodeDescriptor{MeshName: "m", RoutingID: []byte{1}, LifecycleGeneration: 1, DescriptorRevision: 1, Endpoint: "e",
				ObjectRole: record.RoleClient, State: record.StatePreparing, OwnerID: "o", LeaseGeneration: 1, MaintenanceWave: &es}.Encode,
			`{"descriptor":{"activationConcurrency":{"active":0,"limit":0},"applicationVersion":"0","capacity":{"actors":{"active":0,"limit":0,"reserved":0},` +
				`"spotTypes":[],"spots":{"active":0,"limit":0,"reserved":0}},"channelWeights":{},"descriptorRevision":"1","endpoint":"e","entrySpotId":null,` +
				`"leaseGeneration":"1","lifecycleGeneration":"1","maintenanceWave":"e","meshName":"m","objectCapabilities":[],"objectRole":"client","ownerId":"o",` +
				`"placementWeight":0,"routingIdHex":"01","securityIdentity":"","state":"preparing","updatedAtEpochMs":"0"},"descriptorRevision":"1",` +
				`"leaseGeneration":"1","ownerId":"o","recordVersion":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.enc()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// The encoder sorts order-free lists itself, so callers cannot produce two
// spellings of one descriptor.
func TestMeshNodeListOrderIsCanonicalised(t *testing.T) {
	a := validMeshNode()
	b := validMeshNode()
	b.ObjectCapabilities = []record.ObjectCapability{a.ObjectCapabilities[1], a.ObjectCapabilities[0]}
	b.Capacity.SpotTypes = append(b.Capacity.SpotTypes, record.SpotTypeUsage{ObjectKind: record.ObjectInstanceSpot, StableType: "Z"})
	a.Capacity.SpotTypes = append([]record.SpotTypeUsage{{ObjectKind: record.ObjectInstanceSpot, StableType: "Z"}}, a.Capacity.SpotTypes...)
	ea, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	eb, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(ea) != string(eb) {
		t.Fatalf("list order leaked into the bytes:\n%s\n%s", ea, eb)
	}
	// Encoding does not reorder the caller's slice.
	if b.ObjectCapabilities[0].StableType != "Room" {
		t.Fatal("Encode mutated its input")
	}
}

func TestDecodeErrors(t *testing.T) {
	lease, _ := record.OwnerLease{OwnerID: "o", LeaseGeneration: 1, AcquiredAt: 1, UpdatedAt: 1}.Encode()
	deep := strings.Repeat("[", 40) + strings.Repeat("]", 40)
	tests := []struct {
		name  string
		value string
		is    error
	}{
		{"deep nesting", `{"recordVersion":1,"x":` + deep + `}`, record.ErrMalformed},
		{"over 1 MiB", `{"recordVersion":1,"ownerId":"` + strings.Repeat("a", 1<<20) + `"}`, record.ErrLimit},
		{"version 2 wins over field errors", `{"recordVersion":2,"whatever":true}`, record.ErrUnknownVersion},
		{"version checked after syntax", `{"recordVersion":2,`, record.ErrMalformed},
		{"top-level string", `"x"`, record.ErrInvalidField},
		{"valid", string(lease), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := record.DecodeOwnerLease([]byte(tt.value))
			if tt.is == nil {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			if !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want %v", err, tt.is)
			}
		})
	}
}

func TestUnknownVersionErrorNamesTheVersion(t *testing.T) {
	for _, tt := range []struct{ raw, want string }{
		{`2`, `2`}, {`"1"`, `"1"`}, {`1.0`, `1.0`}, {`null`, `null`}, {`{"a" : 1}`, `{"a":1}`},
		{`"` + strings.Repeat("가", 30) + `"`, `"` + strings.Repeat("가", 21) + `…`}, // cut at a rune boundary
	} {
		_, err := record.DecodeAuthority([]byte(`{"recordVersion":` + tt.raw + `}`))
		var uv *record.UnknownVersionError
		if !errors.As(err, &uv) || uv.Version != tt.want || uv.Kind != record.KindAuthority {
			t.Fatalf("%s: err = %#v", tt.raw, err)
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Fatalf("message %q does not name %s", err, tt.want)
		}
	}
}

func TestMismatchErrorDetails(t *testing.T) {
	d := validMeshNode()
	b, _ := d.Encode()
	s := string(b)
	i := strings.LastIndex(s, `"leaseGeneration":"2"`)
	bad := s[:i] + `"leaseGeneration":"3"` + s[i+len(`"leaseGeneration":"2"`):]
	_, err := record.DecodeMeshNode([]byte(bad))
	var me *record.MismatchError
	if !errors.As(err, &me) || me.Field != "leaseGeneration" || me.TopLevel != `"3"` || me.Descriptor != `"2"` {
		t.Fatalf("err = %#v", err)
	}
}

func TestDecodeLimits(t *testing.T) {
	d := validMeshNode()
	d.ObjectCapabilities = manyCapabilities(1024)
	b, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	extra := `{"hasSnapshotAdapter":false,"limit":0,"objectKind":"actor","policy":"disabled","stableType":"T9999"},`
	over := strings.Replace(string(b), `"objectCapabilities":[`, `"objectCapabilities":[`+extra, 1)
	_, err = record.DecodeMeshNode([]byte(over))
	expectLimit(t, err, "descriptor.objectCapabilities entries")
}

func TestCheckCanonical(t *testing.T) {
	b, _ := record.Counter{Value: 5}.Encode()
	if err := record.CheckCanonical(record.KindCounter, b); err != nil {
		t.Fatal(err)
	}
	err := record.CheckCanonical(record.KindCounter, []byte(`{"value":"5","recordVersion":1}`))
	var nc *record.NonCanonicalError
	if !errors.As(err, &nc) || nc.Offset != 2 {
		t.Fatalf("err = %#v", err)
	}
	if err := record.CheckCanonical(record.KindCounter, []byte(`{"recordVersion":1,"value":"0"}`)); !errors.Is(err, record.ErrInvalidField) {
		t.Fatalf("invalid value: err = %v", err)
	}
	if err := record.CheckCanonical("session", b); !errors.Is(err, record.ErrInvalidField) {
		t.Fatalf("unknown kind: err = %v", err)
	}
}

func TestNextRevision(t *testing.T) {
	tests := []struct {
		name      string
		next      func(record.Generation) (record.Generation, error)
		last      record.Generation
		want      record.Generation
		exhausted bool
	}{
		{"revision first", record.NextRevision, 0, 1, false},
		{"revision may reach 2^63-1", record.NextRevision, record.MaxGeneration - 1, record.MaxGeneration, false},
		{"revision past 2^63-1", record.NextRevision, record.MaxGeneration, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.next(tt.last)
			if tt.exhausted {
				if !errors.Is(err, record.ErrRevisionExhausted) {
					t.Fatalf("err = %v, want ErrRevisionExhausted", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestEpochMillis(t *testing.T) {
	at := time.Date(2025, 7, 8, 9, 10, 11, 123_456_789, time.UTC)
	e := record.EpochMillisOf(at)
	if e != 1751965811123 {
		t.Fatalf("EpochMillisOf = %d", e)
	}
	if !e.Time().Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("Time() = %v", e.Time())
	}
}

func TestAuthorityPreimageFollowsObjectKind(t *testing.T) {
	a := validAuthority()
	got, err := a.Preimage("user:42")
	if err != nil || string(got) != "authority\x00spot\x00user:42" {
		t.Fatalf("%q, %v", got, err)
	}
	a.Allocation.ObjectKind = record.ObjectActor
	got, _ = a.Preimage("user:42")
	if string(got) != "authority\x00actor\x00user:42" {
		t.Fatalf("%q", got)
	}
	a.Allocation.ObjectKind = "entry"
	if _, err := a.Preimage("user:42"); !errors.Is(err, record.ErrInvalidField) {
		t.Fatalf("err = %v", err)
	}
}
