package record_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/mesh/record"
)

// Preimages spelled out byte by byte from spec §3.4's table, independent of
// both the package and the fixture.
func TestPreimageLiterals(t *testing.T) {
	mustPre := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"authority actor user:42",
			mustPre(record.AuthorityPreimage(record.IdentityActor, "user:42")),
			[]byte{'a', 'u', 't', 'h', 'o', 'r', 'i', 't', 'y', 0, 'a', 'c', 't', 'o', 'r', 0, 'u', 's', 'e', 'r', ':', '4', '2'}},
		{"authority spot user:42",
			mustPre(record.AuthorityPreimage(record.IdentitySpot, "user:42")),
			[]byte{'a', 'u', 't', 'h', 'o', 'r', 'i', 't', 'y', 0, 's', 'p', 'o', 't', 0, 'u', 's', 'e', 'r', ':', '4', '2'}},
		{"authority actor é (NFC, UTF-8 c3 a9)",
			mustPre(record.AuthorityPreimage(record.IdentityActor, "\u00e9")),
			[]byte{'a', 'u', 't', 'h', 'o', 'r', 'i', 't', 'y', 0, 'a', 'c', 't', 'o', 'r', 0, 0xc3, 0xa9}},
		{"mesh-node with routing id 00 ab ff",
			mustPre(record.MeshNodePreimage("m", []byte{0x00, 0xab, 0xff})),
			[]byte{'m', 'e', 's', 'h', '-', 'n', 'o', 'd', 'e', 0, 'm', 0, '0', '0', 'a', 'b', 'f', 'f'}},
		{"owner-lease",
			mustPre(record.OwnerLeasePreimage("n1")),
			[]byte{'o', 'w', 'n', 'e', 'r', '-', 'l', 'e', 'a', 's', 'e', 0, 'n', '1'}},
		{"client-server",
			mustPre(record.ClientServerPreimage("c", []byte{0x0a})),
			[]byte{'c', 'l', 'i', 'e', 'n', 't', '-', 's', 'e', 'r', 'v', 'e', 'r', 0, 'c', 0, '0', 'a'}},
		{"fanout-publisher",
			mustPre(record.FanoutPublisherPreimage("c", []byte{0x0a})),
			[]byte{'f', 'a', 'n', 'o', 'u', 't', '-', 'p', 'u', 'b', 'l', 'i', 's', 'h', 'e', 'r', 0, 'c', 0, '0', 'a'}},
		{"counter object-generation",
			mustPre(record.CounterPreimage(record.CounterObjectGeneration)),
			append([]byte("counter\x00"), "object-generation"...)},
		{"counter mesh-node descriptor changes",
			mustPre(record.CounterPreimage(record.CounterMeshNodeDescriptors)),
			[]byte("counter\x00descriptor-change\x00mesh-node")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !bytes.Equal(tt.got, tt.want) {
				t.Fatalf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

// SHA-256 of "abc" is the FIPS 180-2 test vector; Key must be the kind
// segment (here the whole preimage, which has no NUL), a colon and the
// digest's lowercase hex, and RedisKey must wrap it in the namespace hash tag.
func TestKeyDerivation(t *testing.T) {
	const abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := record.Key([]byte("abc")); got != "abc:"+abc {
		t.Fatalf("Key(abc) = %s", got)
	}
	if got := record.RedisKey("meshnode", []byte("abc")); got != "{meshnode}:k:abc:"+abc {
		t.Fatalf("RedisKey = %s", got)
	}
	// SHA-256("owner-lease\x00o") computed independently with sha256sum.
	pre, _ := record.OwnerLeasePreimage("o")
	if got, want := record.Key(pre), "owner-lease:528deeb8c1289469b8cd11a03b8f0c141ea118f0b6603f06fe7049ac6f010b3e"; got != want {
		t.Fatalf("Key(owner-lease) = %s, want %s", got, want)
	}
	if !strings.HasPrefix(record.Key(pre), record.KindPrefix(record.KindOwnerLease)) {
		t.Fatal("key does not start with its kind prefix")
	}
	// The convenience functions agree with Key(preimage), also for ids
	// longer than the stack buffer they build the preimage in, and refuse
	// what the preimage functions refuse.
	long := strings.Repeat("x", record.MaxIDBytes)
	for _, id := range []string{"user:42", long} {
		pre, _ = record.AuthorityPreimage(record.IdentityActor, id)
		k, err := record.AuthorityKey(record.IdentityActor, id)
		if err != nil || k != record.Key(pre) {
			t.Fatalf("AuthorityKey(%d bytes) = %s, %v", len(id), k, err)
		}
		a := record.Authority{ObjectID: id, Allocation: record.Allocation{ObjectKind: record.ObjectUserSpot}}
		pre, _ = record.AuthorityPreimage(record.IdentitySpot, id)
		if k, err := a.Key(); err != nil || k != record.Key(pre) {
			t.Fatalf("Authority.Key(%d bytes) = %s, %v", len(id), k, err)
		}
	}
	for _, owner := range []string{"o", strings.Repeat("o", record.MaxNameBytes)} {
		pre, _ = record.OwnerLeasePreimage(owner)
		if k, err := record.OwnerLeaseKey(owner); err != nil || k != record.Key(pre) {
			t.Fatalf("OwnerLeaseKey(%d bytes) = %s, %v", len(owner), k, err)
		}
	}
	for name, f := range map[string]func() error{
		"authority kind": func() error { _, err := record.AuthorityKey("user", "x"); return err },
		"authority id":   func() error { _, err := record.AuthorityKey(record.IdentityActor, ""); return err },
		"long id":        func() error { _, err := record.AuthorityKey(record.IdentityActor, long+"x"); return err },
		"owner":          func() error { _, err := record.OwnerLeaseKey(""); return err },
		"object kind":    func() error { _, err := record.Authority{ObjectID: "x"}.Key(); return err },
	} {
		var fe *record.FieldError
		if err := f(); !errors.As(err, &fe) {
			t.Fatalf("%s: %v, want a FieldError", name, err)
		}
	}
	distinct := map[string]string{}
	for name, f := range map[string]func() (string, error){
		"actor user:42": func() (string, error) { return record.AuthorityKey(record.IdentityActor, "user:42") },
		"spot user:42":  func() (string, error) { return record.AuthorityKey(record.IdentitySpot, "user:42") },
		"actor User:42": func() (string, error) { return record.AuthorityKey(record.IdentityActor, "User:42") },
		"mesh-node":     func() (string, error) { return record.MeshNodeKey("user:42", []byte{1}) },
		"client-server": func() (string, error) { return record.ClientServerKey("chat", []byte{1}) },
		"fanout":        func() (string, error) { return record.FanoutPublisherKey("chat", []byte{1}) },
		"owner-lease":   func() (string, error) { return record.OwnerLeaseKey("user:42") },
		"counter":       func() (string, error) { return record.CounterKey(record.CounterLeaseGeneration) },
	} {
		k, err := f()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		kind, digest, ok := strings.Cut(k, ":")
		if !ok || kind == "" || len(digest) != 64 || strings.ToLower(digest) != digest {
			t.Fatalf("%s: key %q is not kind:<64 lowercase hex>", name, k)
		}
		if other, dup := distinct[k]; dup {
			t.Fatalf("%s and %s share key %s", name, other, k)
		}
		distinct[k] = name
	}
}

func TestKeyValidation(t *testing.T) {
	long := strings.Repeat("a", 256)
	max := strings.Repeat("a", 255)
	rid255 := bytes.Repeat([]byte{7}, 255)
	tests := []struct {
		name  string
		call  func() ([]byte, error)
		field string // "" = must succeed
	}{
		{"id 255 bytes", func() ([]byte, error) { return record.AuthorityPreimage(record.IdentityActor, max) }, ""},
		{"id 256 bytes", func() ([]byte, error) { return record.AuthorityPreimage(record.IdentityActor, long) }, "id"},
		{"id empty", func() ([]byte, error) { return record.AuthorityPreimage(record.IdentityActor, "") }, "id"},
		{"id NUL", func() ([]byte, error) { return record.AuthorityPreimage(record.IdentitySpot, "a\x00") }, "id"},
		{"id invalid UTF-8", func() ([]byte, error) { return record.AuthorityPreimage(record.IdentitySpot, "a\xff") }, "id"},
		{"id control characters allowed", func() ([]byte, error) { return record.AuthorityPreimage(record.IdentitySpot, "\x01\x1f\x7f") }, ""},
		{"kind Actor", func() ([]byte, error) { return record.AuthorityPreimage("Actor", "x") }, "kind"},
		{"kind empty", func() ([]byte, error) { return record.AuthorityPreimage("", "x") }, "kind"},
		{"mesh name empty", func() ([]byte, error) { return record.MeshNodePreimage("", []byte{1}) }, "meshName"},
		{"mesh name 256", func() ([]byte, error) { return record.MeshNodePreimage(long, []byte{1}) }, "meshName"},
		{"mesh name NUL", func() ([]byte, error) { return record.MeshNodePreimage("a\x00b", []byte{1}) }, "meshName"},
		{"mesh name invalid UTF-8", func() ([]byte, error) { return record.MeshNodePreimage("\xc3", []byte{1}) }, "meshName"},
		{"routing id empty", func() ([]byte, error) { return record.MeshNodePreimage("m", nil) }, "routingId"},
		{"routing id 255", func() ([]byte, error) { return record.MeshNodePreimage("m", rid255) }, ""},
		{"routing id 256", func() ([]byte, error) { return record.MeshNodePreimage("m", append(rid255, 0)) }, "routingId"},
		{"routing id all zero bytes", func() ([]byte, error) { return record.MeshNodePreimage("m", []byte{0, 0}) }, ""},
		{"owner empty", func() ([]byte, error) { return record.OwnerLeasePreimage("") }, "ownerId"},
		{"owner 256", func() ([]byte, error) { return record.OwnerLeasePreimage(long) }, "ownerId"},
		{"channel empty", func() ([]byte, error) { return record.ClientServerPreimage("", []byte{1}) }, "channelName"},
		{"channel NUL", func() ([]byte, error) { return record.FanoutPublisherPreimage("\x00", []byte{1}) }, "channelName"},
		{"fanout routing id empty", func() ([]byte, error) { return record.FanoutPublisherPreimage("c", []byte{}) }, "routingId"},
		{"counter unknown", func() ([]byte, error) { return record.CounterPreimage("object-generation\x00x") }, "counter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.call()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			var fe *record.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, record.ErrInvalidField) || fe.Field != tt.field {
				t.Fatalf("err = %v, want *FieldError on %s", err, tt.field)
			}
		})
	}
}

func TestExportedValidators(t *testing.T) {
	for name, err := range map[string]error{
		"ValidateObjectID":    record.ValidateObjectID(""),
		"ValidateMeshName":    record.ValidateMeshName("a\x00"),
		"ValidateChannelName": record.ValidateChannelName(strings.Repeat("c", 256)),
		"ValidateOwnerID":     record.ValidateOwnerID("\xff"),
		"ValidateStableType":  record.ValidateStableType(""),
		"ValidateRoutingID":   record.ValidateRoutingID(nil),
	} {
		if !errors.Is(err, record.ErrInvalidField) {
			t.Errorf("%s: err = %v, want ErrInvalidField", name, err)
		}
	}
	for name, err := range map[string]error{
		"ValidateObjectID":    record.ValidateObjectID("사용자:42"),
		"ValidateMeshName":    record.ValidateMeshName("game"),
		"ValidateChannelName": record.ValidateChannelName(strings.Repeat("c", 255)),
		"ValidateOwnerID":     record.ValidateOwnerID("o"),
		"ValidateStableType":  record.ValidateStableType("Player"),
		"ValidateRoutingID":   record.ValidateRoutingID([]byte{0}),
	} {
		if err != nil {
			t.Errorf("%s: unexpected %v", name, err)
		}
	}
}

func TestDescriptorCounter(t *testing.T) {
	for kind, want := range map[record.Kind]record.CounterName{
		record.KindMeshNode:        record.CounterMeshNodeDescriptors,
		record.KindClientServer:    record.CounterClientServerDescriptors,
		record.KindFanoutPublisher: record.CounterFanoutPublisherDescriptors,
	} {
		if got, err := record.DescriptorCounter(kind); err != nil || got != want {
			t.Errorf("%s: %q, %v", kind, got, err)
		}
	}
	if _, err := record.DescriptorCounter(record.KindAuthority); !errors.Is(err, record.ErrInvalidField) {
		t.Errorf("authority: err = %v", err)
	}
}
