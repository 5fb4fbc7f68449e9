package record_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/mesh/record"
)

// The generator of testdata/store-records-v1.json. It runs only with
// -update; the normal test run reads the committed file and never consults
// these cases, so the fixture (not this code) is the contract.
var update = flag.Bool("update", false, "rewrite "+fixturePath+" from the generator cases")

func strp(s string) *string { return &s }
func intp(i int) *int       { return &i }

// ridHex is the hex of n bytes 0x00, 0x01, ...
func ridHex(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return hex.EncodeToString(b)
}

var (
	max255Korean = strings.Repeat("가", 85)                 // 85 x 3 bytes = 255 bytes
	max255Mixed  = strings.Repeat("é", 127) + "x"          // 127 x 2 + 1 = 255 bytes
	escapeText   = "q\"b\\s/c\x01\x1f\t\n\r\b\f\x7f\u2028" // every escaping rule
)

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		t.Fatal(err)
	}
	return json.RawMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

func baseMeshNode() meshNodeFields {
	var f meshNodeFields
	f.MeshName = "game"
	f.RoutingIDHex = "00a1b2c3d4e5f6ff"
	f.LifecycleGeneration = "3"
	f.DescriptorRevision = "17"
	f.Endpoint = "tcp://10.0.0.7:5555"
	f.EntrySpotID = strp("entry:game:00a1b2c3d4e5f6ff")
	f.ChannelWeights = map[string]int{"chat": 100, "trade": 250}
	f.ApplicationVersion = "42"
	// Deliberately not in canonical order: the encoder sorts.
	f.ObjectCapabilities = []capabilityFields{
		{ObjectKind: "userSpot", StableType: "Room", Policy: "snapshot", HasSnapshotAdapter: true, Limit: 500},
		{ObjectKind: "actor", StableType: "Player", Policy: "recreate", Limit: 0},
		{ObjectKind: "instanceSpot", StableType: "Match", Policy: "disabled", Limit: 100},
	}
	f.ObjectRole = "server"
	f.PlacementWeight = 100
	f.Capacity.Actors = slotFields{Active: 12, Reserved: 2, Limit: 10000}
	f.Capacity.Spots = slotFields{Active: 3, Reserved: 1, Limit: 0}
	f.Capacity.SpotTypes = []spotTypeFields{
		{ObjectKind: "userSpot", StableType: "Room", Active: 2, Reserved: 1, Limit: 500},
		{ObjectKind: "instanceSpot", StableType: "Match", Active: 1, Reserved: 0, Limit: 100},
	}
	f.ActivationConcurrency.Active = 1
	f.ActivationConcurrency.Limit = 8
	f.MaintenanceWave = strp("wave-2025-07")
	f.State = "serving"
	f.SecurityIdentity = "CN=node-7.game.internal"
	f.OwnerID = "node-7/5b0c1f7e"
	f.LeaseGeneration = "5"
	f.UpdatedAtEpochMs = "1752000000123"
	return f
}

func baseAuthority() authorityFields {
	var f authorityFields
	f.ID = "user:42"
	f.ObjectGeneration = "101"
	f.AuthorityOwnerGeneration = "1"
	f.OwnerID = "node-7/5b0c1f7e"
	f.OwnerLeaseGeneration = "5"
	f.Allocation.State = "active"
	f.Allocation.ObjectKind = "actor"
	f.Allocation.StableType = "Player"
	f.Allocation.Descriptor.MeshName = "game"
	f.Allocation.Descriptor.RoutingIDHex = "00a1b2c3d4e5f6ff"
	f.Allocation.DescriptorLifecycleGeneration = "3"
	f.Allocation.Capacity.Actors = 1
	return f
}

func asSpot(f *authorityFields, kind, stableType string, actors int) {
	f.Allocation.ObjectKind = kind
	f.Allocation.StableType = stableType
	f.Allocation.Capacity.Actors = actors
	f.Allocation.Capacity.Spots = 1
	f.Allocation.Capacity.SpotType = &struct {
		ObjectKind string `json:"objectKind"`
		StableType string `json:"stableType"`
		Count      int    `json:"count"`
	}{kind, stableType, 1}
}

func pending(f *authorityFields, resID, ref string, body string, size int) {
	sum := sha256.Sum256([]byte(body))
	f.PendingCreation = &struct {
		ReservationID           string `json:"reservationId"`
		RequestContentReference string `json:"requestContentReference"`
		RequestSha256           string `json:"requestSha256"`
		RequestEncodedSize      int    `json:"requestEncodedSize"`
	}{resID, ref, hex.EncodeToString(sum[:]), size}
}

func baseClientServer() channelFields {
	return channelFields{
		ChannelName: "chat", ServerRoutingIDHex: "0a0b0c0d", LifecycleGeneration: "2", DescriptorRevision: "4",
		Endpoint: "tcp://10.0.0.9:6000", Weight: intp(100), State: "serving", SecurityIdentity: "CN=chat-1",
		OwnerID: "chat-1/77aa", LeaseGeneration: "9", UpdatedAtEpochMs: "1752000000500",
	}
}

func baseFanout() channelFields {
	return channelFields{
		ChannelName: "prices", PublisherRoutingIDHex: "ff00", LifecycleGeneration: "1", DescriptorRevision: "1",
		Endpoint: "tcp://10.0.0.10:7000", State: "preparing", SecurityIdentity: "",
		OwnerID: "pub-1/0001", LeaseGeneration: "11", UpdatedAtEpochMs: "1752000000900",
	}
}

type genRecord struct {
	name, kind string
	fields     any
}

func generatorRecords() []genRecord {
	var out []genRecord
	add := func(name string, kind record.Kind, f any) { out = append(out, genRecord{name, string(kind), f}) }

	// Owner leases.
	add("plain", record.KindOwnerLease, ownerLeaseFields{"node-7/5b0c1f7e", "5", "1752000000000", "1752000005000"})
	add("non-ascii owner", record.KindOwnerLease, ownerLeaseFields{"사용자:42", "42", "1", "2"})
	add("nfc owner", record.KindOwnerLease, ownerLeaseFields{"caf\u00e9", "7", "1752000000000", "1752000000000"})
	add("nfd owner (different key from nfc)", record.KindOwnerLease, ownerLeaseFields{"cafe\u0301", "8", "1752000000000", "1752000000000"})
	add("owner needing escapes", record.KindOwnerLease, ownerLeaseFields{escapeText, "3", "0", "0"})
	add("255-byte owner, extreme values", record.KindOwnerLease, ownerLeaseFields{max255Korean, "9223372036854775807", "0", "9223372036854775807"})

	// MeshNode descriptors.
	add("server", record.KindMeshNode, baseMeshNode())
	{
		f := baseMeshNode()
		f.EntrySpotID, f.MaintenanceWave = nil, nil
		f.ChannelWeights, f.ObjectCapabilities = map[string]int{}, []capabilityFields{}
		f.Capacity.SpotTypes = []spotTypeFields{}
		f.ObjectRole, f.State, f.SecurityIdentity, f.PlacementWeight, f.ApplicationVersion = "client", "preparing", "", 0, "0"
		f.Capacity.Actors, f.Capacity.Spots = slotFields{}, slotFields{}
		f.ActivationConcurrency.Active, f.ActivationConcurrency.Limit = 0, 0
		add("client, empty lists and nulls", record.KindMeshNode, f)
	}
	{
		f := baseMeshNode()
		f.MeshName = "메시-1"
		f.EntrySpotID = strp("입구:1")
		// U+1F600 sorts before U+FB01 in UTF-16 order (D83D < FB01) but
		// after it in byte order: this pins RFC 8785's rule.
		f.ChannelWeights = map[string]int{"채널": 10000, "ünïcödé": 0, "😀": 7, "\ufb01le": 3, "z": 1}
		f.ObjectCapabilities = []capabilityFields{{ObjectKind: "actor", StableType: "Spieler·Ä", Policy: "unspecified", Limit: 1}}
		f.Capacity.SpotTypes = []spotTypeFields{{ObjectKind: "userSpot", StableType: "방", Active: 0, Reserved: 0, Limit: 0}}
		f.State = "relocating"
		add("non-ascii names, UTF-16 key order", record.KindMeshNode, f)
	}
	{
		f := baseMeshNode()
		f.MeshName = max255Mixed
		f.RoutingIDHex = ridHex(255)
		f.ObjectRole, f.EntrySpotID, f.State = "none", nil, "draining"
		add("255-byte mesh name and routing id", record.KindMeshNode, f)
	}
	{
		f := baseMeshNode()
		f.MeshName = "m\"e\\s/h\x01"
		f.ChannelWeights = map[string]int{"q\"\\\x1f\t": 5}
		f.Endpoint = "tcp://[::1]:5555"
		f.SecurityIdentity = escapeText
		f.MaintenanceWave = strp("w\x7f")
		f.State = "error"
		add("names needing escapes", record.KindMeshNode, f)
	}
	{
		f := baseMeshNode()
		f.LifecycleGeneration, f.DescriptorRevision, f.LeaseGeneration = "9223372036854775807", "9223372036854775807", "9223372036854775807"
		f.ApplicationVersion = "9223372036854775807"
		f.UpdatedAtEpochMs = "9223372036854775807"
		f.PlacementWeight = 10000
		f.ChannelWeights = map[string]int{"chat": 10000}
		f.Capacity.Actors = slotFields{2147483647, 2147483647, 2147483647}
		f.Capacity.Spots = slotFields{2147483647, 2147483647, 2147483647}
		f.ActivationConcurrency.Active, f.ActivationConcurrency.Limit = 2147483647, 2147483647
		f.State = "stopped"
		add("maximum values", record.KindMeshNode, f)
	}

	// ClientServer server descriptors.
	add("plain", record.KindClientServer, baseClientServer())
	{
		f := baseClientServer()
		f.ChannelName, f.Weight, f.State = "채팅/ünïcödé", intp(0), "draining"
		add("non-ascii channel, weight 0", record.KindClientServer, f)
	}
	{
		f := baseClientServer()
		f.ChannelName, f.ServerRoutingIDHex, f.Weight, f.State = max255Korean, ridHex(255), intp(10000), "relocated"
		f.LifecycleGeneration, f.DescriptorRevision = "9223372036854775807", "9223372036854775807"
		add("255-byte channel and routing id", record.KindClientServer, f)
	}
	{
		f := baseClientServer()
		f.ChannelName, f.SecurityIdentity, f.State = "c\"h\\a\tn\x1f", escapeText, "error"
		add("channel needing escapes", record.KindClientServer, f)
	}

	// Fanout publisher descriptors.
	add("plain", record.KindFanoutPublisher, baseFanout())
	{
		f := baseFanout()
		f.ChannelName, f.State = "시세/ünïcödé", "relocated"
		add("non-ascii channel", record.KindFanoutPublisher, f)
	}
	{
		f := baseFanout()
		f.ChannelName, f.PublisherRoutingIDHex, f.Endpoint, f.State = "p\"r\\i\x01ces", ridHex(255), "epgm://eth0;239.1.1.1:5555", "stopped"
		add("channel needing escapes, 255-byte routing id", record.KindFanoutPublisher, f)
	}

	// Authority records.
	add("actor user:42, empty payload", record.KindAuthority, baseAuthority())
	{
		f := baseAuthority()
		asSpot(&f, "userSpot", "Room", 0)
		f.PayloadHex = hex.EncodeToString([]byte("hi"))
		add("spot user:42 (same Id, different key)", record.KindAuthority, f)
	}
	{
		f := baseAuthority()
		f.ID, f.PayloadHex = "Actor", "ff"
		add("actor Actor (case differs)", record.KindAuthority, f)
	}
	{
		f := baseAuthority()
		f.ID, f.PayloadHex = "actor", "000102"
		add("actor actor (case differs)", record.KindAuthority, f)
	}
	{
		f := baseAuthority()
		f.ID, f.PayloadHex = "사용자:42", "00ff10e282ac"
		add("non-ascii actor", record.KindAuthority, f)
	}
	{
		f := baseAuthority()
		f.ID = "ünïcödé"
		asSpot(&f, "instanceSpot", "Match", 0)
		f.Allocation.State = "reserved"
		pending(&f, "res-0001", "creation/ünïcödé/0001", "first message", 1234)
		add("reserved instance spot with pending creation", record.KindAuthority, f)
	}
	{
		f := baseAuthority()
		f.ID = "caf\u00e9"
		add("actor nfc", record.KindAuthority, f)
	}
	{
		f := baseAuthority()
		f.ID = "cafe\u0301"
		add("actor nfd (different key from nfc)", record.KindAuthority, f)
	}
	{
		f := baseAuthority()
		f.ID = max255Korean
		f.Allocation.Descriptor.MeshName = max255Mixed
		f.Allocation.Descriptor.RoutingIDHex = ridHex(255)
		add("255-byte id, mesh name and routing id", record.KindAuthority, f)
	}
	{
		f := baseAuthority()
		f.ID = "quote\"back\\slash/\x01\x1f\t"
		asSpot(&f, "userSpot", "Ro\"om\\", 0)
		f.OwnerID = escapeText
		pending(&f, "r\"1", "ref\\with\x01ctl", "", 1048576)
		add("spot id and names needing escapes", record.KindAuthority, f)
	}
	{
		f := baseAuthority()
		f.ID = "guild:7"
		asSpot(&f, "userSpot", "Guild", 3)
		f.ObjectGeneration, f.AuthorityOwnerGeneration = "9223372036854775807", "9223372036854775806"
		f.OwnerLeaseGeneration, f.Allocation.DescriptorLifecycleGeneration = "9223372036854775807", "9223372036854775807"
		f.Allocation.Capacity.SpotType.Count = 2147483647
		f.PayloadHex = hex.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff, 0xbf}, 5)) // base64 uses + and /
		add("user spot with members, maximum values", record.KindAuthority, f)
	}

	// Authority rows with relocation progress (docs/RECORDS.md §5.5).
	for _, c := range relocationVectors() {
		add(c.name, record.KindAuthority, c.fields)
	}

	// Counters (project-specific).
	add("object-generation", record.KindCounter, counterFields{"object-generation", "1"})
	add("lease-generation near exhaustion", record.KindCounter, counterFields{"lease-generation", "9223372036854775806"})
	add("mesh-node descriptor change number at sentinel", record.KindCounter, counterFields{"descriptor-change\x00mesh-node", "9223372036854775807"})
	return out
}

var (
	relocSource = partyFields{OwnerID: "node-7/5b0c1f7e", OwnerLeaseGeneration: "5", MeshName: "game", RoutingIDHex: "00a1b2c3d4e5f6ff", LifecycleGeneration: "3"}
	relocTarget = partyFields{OwnerID: "node-9/0c0ffee0", OwnerLeaseGeneration: "8", MeshName: "game", RoutingIDHex: "0b0c", LifecycleGeneration: "2"}
)

const (
	relocCapturedName  = "actor relocation captured"
	relocCommittedName = "actor relocation committed"
)

// relocationVectors are authority rows in each stored relocation stage:
// captured and prepared (the source owns the row), committed (the target
// owns it, previousAuthorityOwnerGeneration set).
func relocationVectors() []struct {
	name   string
	fields authorityFields
} {
	progress := func(stage, attempt string) *relocationFields {
		return &relocationFields{Stage: stage, RelocationIDHex: "0123456789abcdef0011223344556677", TargetAttempt: attempt,
			ReservationIDHex: "fedcba98765432100f1e2d3c4b5a6978", Source: relocSource, Target: relocTarget}
	}
	captured := baseAuthority()
	captured.ID, captured.AuthorityOwnerGeneration = "user:77", "4"
	captured.Relocation = progress("captured", "1")

	prepared := baseAuthority()
	prepared.ID = "guild:9"
	asSpot(&prepared, "userSpot", "Guild", 12)
	prepared.AuthorityOwnerGeneration = "2"
	prepared.PayloadHex = hex.EncodeToString([]byte("state"))
	prepared.Relocation = progress("prepared", "9223372036854775807")
	prepared.Relocation.RelocationIDHex, prepared.Relocation.ReservationIDHex = "ffffffffffffffffffffffffffffffff", "00000000000000000000000000000001"

	committed := captured
	committed.AuthorityOwnerGeneration = "5"
	committed.OwnerID, committed.OwnerLeaseGeneration = relocTarget.OwnerID, relocTarget.OwnerLeaseGeneration
	committed.Allocation.Descriptor.MeshName, committed.Allocation.Descriptor.RoutingIDHex = relocTarget.MeshName, relocTarget.RoutingIDHex
	committed.Allocation.DescriptorLifecycleGeneration = relocTarget.LifecycleGeneration
	committed.Relocation = progress("committed", "1")
	committed.Relocation.PreviousAuthorityOwnerGeneration = strp("4")

	return []struct {
		name   string
		fields authorityFields
	}{
		{relocCapturedName, captured},
		{"user spot relocation prepared, extreme ids and attempt", prepared},
		{relocCommittedName, committed},
	}
}

func generatorKeys() []keyCase {
	k := func(name string, kind record.Kind, in keyInputs) keyCase {
		return keyCase{Name: name, Kind: string(kind), Inputs: in}
	}
	out := []keyCase{
		k("spec example actor user:42", record.KindAuthority, keyInputs{Kind: "actor", ID: "user:42"}),
		k("spec example spot user:42", record.KindAuthority, keyInputs{Kind: "spot", ID: "user:42"}),
		k("actor Actor", record.KindAuthority, keyInputs{Kind: "actor", ID: "Actor"}),
		k("actor actor", record.KindAuthority, keyInputs{Kind: "actor", ID: "actor"}),
		k("actor 사용자:42", record.KindAuthority, keyInputs{Kind: "actor", ID: "사용자:42"}),
		k("spot ünïcödé", record.KindAuthority, keyInputs{Kind: "spot", ID: "ünïcödé"}),
		k("actor café NFC", record.KindAuthority, keyInputs{Kind: "actor", ID: "caf\u00e9"}),
		k("actor café NFD", record.KindAuthority, keyInputs{Kind: "actor", ID: "cafe\u0301"}),
		k("actor 255-byte id", record.KindAuthority, keyInputs{Kind: "actor", ID: max255Korean}),
		k("spot id with quote, backslash, control", record.KindAuthority, keyInputs{Kind: "spot", ID: "a\"b\\c\x01\x1f"}),
		k("mesh-node plain", record.KindMeshNode, keyInputs{MeshName: "game", RoutingIDHex: "00a1b2c3d4e5f6ff"}),
		k("mesh-node one-byte routing id", record.KindMeshNode, keyInputs{MeshName: "g", RoutingIDHex: "00"}),
		k("mesh-node 255-byte name and routing id", record.KindMeshNode, keyInputs{MeshName: max255Mixed, RoutingIDHex: ridHex(255)}),
		k("owner-lease plain", record.KindOwnerLease, keyInputs{OwnerID: "node-7/5b0c1f7e"}),
		k("owner-lease non-ascii", record.KindOwnerLease, keyInputs{OwnerID: "사용자:42"}),
		k("client-server chat", record.KindClientServer, keyInputs{ChannelName: "chat", RoutingIDHex: "0a0b0c0d"}),
		k("fanout-publisher chat (same inputs as client-server)", record.KindFanoutPublisher, keyInputs{ChannelName: "chat", RoutingIDHex: "0a0b0c0d"}),
	}
	for _, c := range record.CounterNames() {
		out = append(out, k("counter "+strings.ReplaceAll(string(c), "\x00", " "), record.KindCounter, keyInputs{Counter: string(c)}))
	}
	return out
}

func generatorRejectedKeys() []rejectedKey {
	r := func(name string, kind record.Kind, in keyInputs) rejectedKey {
		return rejectedKey{Name: name, Kind: string(kind), Inputs: in, Error: "invalidField"}
	}
	return []rejectedKey{
		r("authority kind Actor (case matters)", record.KindAuthority, keyInputs{Kind: "Actor", ID: "user:42"}),
		r("authority kind entry", record.KindAuthority, keyInputs{Kind: "entry", ID: "user:42"}),
		r("empty id", record.KindAuthority, keyInputs{Kind: "actor", ID: ""}),
		r("256-byte id", record.KindAuthority, keyInputs{Kind: "actor", ID: max255Korean + "x"}),
		r("id with NUL", record.KindAuthority, keyInputs{Kind: "spot", ID: "user\x0042"}),
		r("empty mesh name", record.KindMeshNode, keyInputs{MeshName: "", RoutingIDHex: "00"}),
		r("mesh name with NUL", record.KindMeshNode, keyInputs{MeshName: "a\x00b", RoutingIDHex: "00"}),
		r("256-byte mesh name", record.KindMeshNode, keyInputs{MeshName: max255Mixed + "x", RoutingIDHex: "00"}),
		r("empty routing id", record.KindMeshNode, keyInputs{MeshName: "game", RoutingIDHex: ""}),
		r("256-byte routing id", record.KindClientServer, keyInputs{ChannelName: "chat", RoutingIDHex: ridHex(255) + "ff"}),
		r("channel name with NUL", record.KindFanoutPublisher, keyInputs{ChannelName: "c\x00", RoutingIDHex: "01"}),
		r("empty owner id", record.KindOwnerLease, keyInputs{OwnerID: ""}),
		r("unknown counter", record.KindCounter, keyInputs{Counter: "authority-owner-generation"}),
	}
}

// valueOf finds a generated record's value by kind and name.
func valueOf(t testing.TB, recs []recordCase, kind record.Kind, name string) string {
	t.Helper()
	for _, r := range recs {
		if r.Kind == string(kind) && r.Name == name {
			return r.Value
		}
	}
	t.Fatalf("generator: no %s record %q", kind, name)
	return ""
}

func mustReplace(t testing.TB, s, old, new string) string {
	t.Helper()
	if strings.Count(s, old) != 1 {
		t.Fatalf("generator: %q occurs %d times in %s", old, strings.Count(s, old), s)
	}
	return strings.Replace(s, old, new, 1)
}

func replaceLast(t testing.TB, s, old, new string) string {
	t.Helper()
	i := strings.LastIndex(s, old)
	if i < 0 {
		t.Fatalf("generator: %q not in %s", old, s)
	}
	return s[:i] + new + s[i+len(old):]
}

func generatorRejectedValues(t testing.TB, recs []recordCase) []rejectedValue {
	lease := valueOf(t, recs, record.KindOwnerLease, "plain")
	mesh := valueOf(t, recs, record.KindMeshNode, "server")
	actor := valueOf(t, recs, record.KindAuthority, "actor user:42, empty payload")
	spot := valueOf(t, recs, record.KindAuthority, "spot user:42 (same Id, different key)")
	pend := valueOf(t, recs, record.KindAuthority, "reserved instance spot with pending creation")
	cs := valueOf(t, recs, record.KindClientServer, "plain")
	fan := valueOf(t, recs, record.KindFanoutPublisher, "plain")
	ctr := valueOf(t, recs, record.KindCounter, "object-generation")
	var out []rejectedValue
	add := func(kind record.Kind, class, name, value string) {
		out = append(out, rejectedValue{Name: name, Kind: string(kind), Value: value, Error: class})
	}
	L, M, A, C, F, N := record.KindOwnerLease, record.KindMeshNode, record.KindAuthority, record.KindClientServer, record.KindFanoutPublisher, record.KindCounter
	body := strings.TrimPrefix(lease, "{")

	add(L, "unknownVersion", "recordVersion 2", mustReplace(t, lease, `"recordVersion":1`, `"recordVersion":2`))
	add(L, "unknownVersion", "recordVersion as string", mustReplace(t, lease, `"recordVersion":1`, `"recordVersion":"1"`))
	add(L, "unknownVersion", "recordVersion 1.0", mustReplace(t, lease, `"recordVersion":1`, `"recordVersion":1.0`))
	add(L, "unknownVersion", "recordVersion null", mustReplace(t, lease, `"recordVersion":1`, `"recordVersion":null`))
	add(L, "invalidField", "recordVersion missing", mustReplace(t, lease, `"recordVersion":1,`, ``))
	add(L, "malformed", "duplicate member", `{"ownerId":"x",`+body)
	add(L, "malformed", "duplicate member spelled with an escape", `{"owner\u0049d":"x",`+body)
	add(L, "invalidField", "unknown member", `{"expiresAtEpochMs":"1",`+body)
	add(L, "invalidField", "generation with leading zero", mustReplace(t, lease, `"leaseGeneration":"5"`, `"leaseGeneration":"05"`))
	add(L, "invalidField", "generation with plus sign", mustReplace(t, lease, `"leaseGeneration":"5"`, `"leaseGeneration":"+5"`))
	add(L, "invalidField", "generation with space", mustReplace(t, lease, `"leaseGeneration":"5"`, `"leaseGeneration":" 5"`))
	add(L, "invalidField", "generation 0", mustReplace(t, lease, `"leaseGeneration":"5"`, `"leaseGeneration":"0"`))
	add(L, "invalidField", "generation 2^63", mustReplace(t, lease, `"leaseGeneration":"5"`, `"leaseGeneration":"9223372036854775808"`))
	add(L, "invalidField", "generation 2^64", mustReplace(t, lease, `"leaseGeneration":"5"`, `"leaseGeneration":"18446744073709551616"`))
	add(L, "invalidField", "generation as number", mustReplace(t, lease, `"leaseGeneration":"5"`, `"leaseGeneration":5`))
	add(L, "invalidField", "negative timestamp", mustReplace(t, lease, `"acquiredAtEpochMs":"1752000000000"`, `"acquiredAtEpochMs":"-1"`))
	add(L, "invalidField", "empty owner id", mustReplace(t, lease, `"ownerId":"node-7/5b0c1f7e"`, `"ownerId":""`))
	add(L, "invalidField", "owner id with NUL", mustReplace(t, lease, `"ownerId":"node-7/5b0c1f7e"`, `"ownerId":"a\u0000b"`))
	add(L, "invalidField", "not an object", `["recordVersion",1]`)
	add(L, "malformed", "data after the value", lease+` {}`)
	add(L, "malformed", "trailing comma", strings.TrimSuffix(lease, "}")+`,}`)
	add(L, "malformed", "byte order mark", "\ufeff"+lease)
	add(L, "malformed", "raw control character in a string", mustReplace(t, lease, `"ownerId":"node-7/5b0c1f7e"`, "\"ownerId\":\"a\x01b\""))
	add(L, "malformed", "lone surrogate escape", mustReplace(t, lease, `"ownerId":"node-7/5b0c1f7e"`, `"ownerId":"\ud800"`))
	add(L, "malformed", "empty value", ``)
	out = append(out, rejectedValue{Name: "invalid UTF-8", Kind: string(L), Error: "malformed",
		ValueBase64: base64.StdEncoding.EncodeToString([]byte(mustReplace(t, lease, `"ownerId":"node-7/5b0c1f7e"`, "\"ownerId\":\"a\xffb\"")))})

	add(M, "mismatch", "top-level ownerId differs", replaceLast(t, mesh, `"ownerId":"node-7/5b0c1f7e"`, `"ownerId":"node-8/5b0c1f7e"`))
	add(M, "mismatch", "top-level leaseGeneration differs", replaceLast(t, mesh, `"leaseGeneration":"5"`, `"leaseGeneration":"6"`))
	add(M, "mismatch", "top-level descriptorRevision differs", replaceLast(t, mesh, `"descriptorRevision":"17"`, `"descriptorRevision":"16"`))
	add(M, "unknownVersion", "recordVersion 0", mustReplace(t, mesh, `"recordVersion":1`, `"recordVersion":0`))
	add(M, "invalidField", "placementWeight 10001", mustReplace(t, mesh, `"placementWeight":100`, `"placementWeight":10001`))
	add(M, "invalidField", "negative channel weight", mustReplace(t, mesh, `"chat":100`, `"chat":-1`))
	add(M, "invalidField", "fractional limit", mustReplace(t, mesh, `"limit":10000`, `"limit":1.5`))
	add(M, "invalidField", "exponent limit", mustReplace(t, mesh, `"limit":10000`, `"limit":1e4`))
	add(M, "invalidField", "limit as string", mustReplace(t, mesh, `"limit":10000`, `"limit":"10000"`))
	add(M, "invalidField", "server without entrySpotId", mustReplace(t, mesh, `"entrySpotId":"entry:game:00a1b2c3d4e5f6ff"`, `"entrySpotId":null`))
	add(M, "invalidField", "entrySpotId as number", mustReplace(t, mesh, `"entrySpotId":"entry:game:00a1b2c3d4e5f6ff"`, `"entrySpotId":7`))
	add(M, "invalidField", "unknown state", mustReplace(t, mesh, `"state":"serving"`, `"state":"running"`))
	add(M, "invalidField", "state in another case", mustReplace(t, mesh, `"state":"serving"`, `"state":"Serving"`))
	add(M, "invalidField", "uppercase routingIdHex", mustReplace(t, mesh, `"routingIdHex":"00a1b2c3d4e5f6ff"`, `"routingIdHex":"00A1B2C3D4E5F6FF"`))
	add(M, "invalidField", "odd-length routingIdHex", mustReplace(t, mesh, `"routingIdHex":"00a1b2c3d4e5f6ff"`, `"routingIdHex":"0a1b2c3d4e5f6ff"`))
	add(M, "invalidField", "endpoint missing", mustReplace(t, mesh, `"endpoint":"tcp://10.0.0.7:5555",`, ``))
	add(M, "invalidField", "unknown member in descriptor", mustReplace(t, mesh, `{"activationConcurrency"`, `{"generation":"1","activationConcurrency"`))
	add(M, "invalidField", "duplicate capability", mustReplace(t, mesh, `"objectCapabilities":[`,
		`"objectCapabilities":[{"hasSnapshotAdapter":false,"limit":0,"objectKind":"actor","policy":"recreate","stableType":"Player"},`))
	add(M, "invalidField", "spot type of kind actor", mustReplace(t, mesh, `"objectKind":"instanceSpot","reserved":0`, `"objectKind":"actor","reserved":0`))
	add(M, "invalidField", "unknown policy", mustReplace(t, mesh, `"policy":"snapshot"`, `"policy":"preserve"`))

	add(A, "unknownVersion", "recordVersion 2", mustReplace(t, actor, `"recordVersion":1`, `"recordVersion":2`))
	add(A, "invalidField", "payload without padding", mustReplace(t, spot, `"payload":"aGk="`, `"payload":"aGk"`))
	add(A, "invalidField", "payload with non-zero pad bits", mustReplace(t, spot, `"payload":"aGk="`, `"payload":"aGl="`))
	add(A, "invalidField", "payload with a line break", mustReplace(t, spot, `"payload":"aGk="`, `"payload":"aG\nk="`))
	add(A, "invalidField", "payload in URL alphabet", mustReplace(t, valueOf(t, recs, A, "user spot with members, maximum values"), `"payload":"+/+/`, `"payload":"-_-_`))
	add(A, "invalidField", "capacity count as number", mustReplace(t, actor, `"actors":"1"`, `"actors":1`))
	add(A, "invalidField", "empty capacity bundle", mustReplace(t, actor, `"actors":"1"`, `"actors":"0"`))
	add(A, "invalidField", "spotType on an actor", mustReplace(t, actor, `"spotType":null`, `"spotType":{"count":"1","objectKind":"userSpot","stableType":"Player"}`))
	add(A, "invalidField", "spot without spotType", mustReplace(t, spot, `"spotType":{"count":"1","objectKind":"userSpot","stableType":"Room"}`, `"spotType":null`))
	add(A, "invalidField", "spotType of another stable type", mustReplace(t, spot, `"stableType":"Room"}`, `"stableType":"Hall"}`))
	add(A, "invalidField", "objectGeneration 0", mustReplace(t, actor, `"objectGeneration":"101"`, `"objectGeneration":"0"`))
	add(A, "invalidField", "allocation state creating", mustReplace(t, actor, `"state":"active"`, `"state":"creating"`))
	add(A, "invalidField", "objectKind entrySpot", mustReplace(t, actor, `"objectKind":"actor"`, `"objectKind":"entrySpot"`))
	add(A, "invalidField", "uppercase requestSha256", upperSha(t, pend))
	add(A, "invalidField", "requestEncodedSize over 1 MiB", mustReplace(t, pend, `"requestEncodedSize":"1234"`, `"requestEncodedSize":"1048577"`))
	add(A, "invalidField", "pendingCreation missing", mustReplace(t, actor, `,"pendingCreation":null`, ``))

	capt := valueOf(t, recs, A, relocCapturedName)
	comm := valueOf(t, recs, A, relocCommittedName)
	add(A, "invalidField", "relocation missing", mustReplace(t, actor, `,"relocation":null`, ``))
	add(A, "invalidField", "relocation stage preparing (not stored)", mustReplace(t, capt, `"stage":"captured"`, `"stage":"preparing"`))
	add(A, "invalidField", "relocation stage completed (not stored)", mustReplace(t, capt, `"stage":"captured"`, `"stage":"completed"`))
	add(A, "invalidField", "relocationId zero", mustReplace(t, capt, `"relocationId":"0123456789abcdef0011223344556677"`, `"relocationId":"00000000000000000000000000000000"`))
	add(A, "invalidField", "relocationId uppercase", mustReplace(t, capt, `"relocationId":"0123456789abcdef0011223344556677"`, `"relocationId":"0123456789ABCDEF0011223344556677"`))
	add(A, "invalidField", "reservationId of 15 bytes", mustReplace(t, capt, `"reservationId":"fedcba98765432100f1e2d3c4b5a6978"`, `"reservationId":"fedcba98765432100f1e2d3c4b5a69"`))
	add(A, "invalidField", "targetAttempt 0", mustReplace(t, capt, `"targetAttempt":"1"`, `"targetAttempt":"0"`))
	add(A, "invalidField", "targetAttempt as number", mustReplace(t, capt, `"targetAttempt":"1"`, `"targetAttempt":1`))
	add(A, "invalidField", "captured with previousAuthorityOwnerGeneration", mustReplace(t, capt, `"previousAuthorityOwnerGeneration":null`, `"previousAuthorityOwnerGeneration":"3"`))
	add(A, "invalidField", "captured with previousAuthorityOwnerGeneration 0", mustReplace(t, capt, `"previousAuthorityOwnerGeneration":null`, `"previousAuthorityOwnerGeneration":"0"`))
	add(A, "invalidField", "committed without previousAuthorityOwnerGeneration", mustReplace(t, comm, `"previousAuthorityOwnerGeneration":"4"`, `"previousAuthorityOwnerGeneration":null`))
	add(A, "invalidField", "previousAuthorityOwnerGeneration not below authorityOwnerGeneration", mustReplace(t, comm, `"previousAuthorityOwnerGeneration":"4"`, `"previousAuthorityOwnerGeneration":"5"`))
	add(A, "invalidField", "committed while the source owns the row", mustReplace(t, mustReplace(t, capt, `"stage":"captured"`, `"stage":"committed"`),
		`"previousAuthorityOwnerGeneration":null`, `"previousAuthorityOwnerGeneration":"3"`))
	add(A, "invalidField", "captured while the target owns the row", mustReplace(t, mustReplace(t, comm, `"stage":"committed"`, `"stage":"captured"`),
		`"previousAuthorityOwnerGeneration":"4"`, `"previousAuthorityOwnerGeneration":null`))
	add(A, "invalidField", "relocation of a reserved allocation", mustReplace(t, capt, `"state":"active"`, `"state":"reserved"`))
	add(A, "invalidField", "unknown member in relocation source", mustReplace(t, capt, `"source":{`, `"source":{"descriptorRevision":"1",`))

	add(C, "invalidField", "weight missing", mustReplace(t, cs, `,"weight":100`, ``))
	add(C, "invalidField", "weight 10001", mustReplace(t, cs, `"weight":100`, `"weight":10001`))
	add(C, "mismatch", "top-level ownerId differs", replaceLast(t, cs, `"ownerId":"chat-1/77aa"`, `"ownerId":"chat-2/77aa"`))
	add(C, "unknownVersion", "recordVersion 2", mustReplace(t, cs, `"recordVersion":1`, `"recordVersion":2`))
	add(C, "unknownVersion", "recordVersion as string", mustReplace(t, cs, `"recordVersion":1`, `"recordVersion":"1"`))
	add(F, "invalidField", "weight present", mustReplace(t, fan, `"updatedAtEpochMs":"1752000000900"`, `"updatedAtEpochMs":"1752000000900","weight":100`))
	add(F, "mismatch", "top-level descriptorRevision differs", replaceLast(t, fan, `"descriptorRevision":"1"`, `"descriptorRevision":"2"`))
	add(F, "unknownVersion", "recordVersion 0", mustReplace(t, fan, `"recordVersion":1`, `"recordVersion":0`))
	add(F, "unknownVersion", "recordVersion null", mustReplace(t, fan, `"recordVersion":1`, `"recordVersion":null`))
	add(N, "invalidField", "counter value 0", mustReplace(t, ctr, `"value":"1"`, `"value":"0"`))
	add(N, "unknownVersion", "recordVersion \"2\"", mustReplace(t, ctr, `"recordVersion":1`, `"recordVersion":"2"`))
	return out
}

// upperSha upper-cases the hex digits of requestSha256 in v.
func upperSha(t testing.TB, v string) string {
	t.Helper()
	const tag = `"requestSha256":"`
	i := strings.Index(v, tag)
	if i < 0 {
		t.Fatal("generator: no requestSha256")
	}
	i += len(tag)
	return v[:i] + strings.ToUpper(v[i:i+64]) + v[i+64:]
}

func generatorNonCanonical(t testing.TB, recs []recordCase) []nonCanonical {
	lease := valueOf(t, recs, record.KindOwnerLease, "plain")
	esc := valueOf(t, recs, record.KindOwnerLease, "owner needing escapes")
	mesh := valueOf(t, recs, record.KindMeshNode, "server")
	uni := valueOf(t, recs, record.KindMeshNode, "non-ascii names, UTF-16 key order")
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(lease), "", "  "); err != nil {
		t.Fatal(err)
	}
	L, M := string(record.KindOwnerLease), string(record.KindMeshNode)
	return []nonCanonical{
		{"insignificant whitespace", L, pretty.String()},
		{"members not in UTF-16 order", L, `{"recordVersion":1,` + mustReplace(t, strings.TrimPrefix(lease, "{"), `,"recordVersion":1`, ``)},
		{"escaped ASCII letter", L, mustReplace(t, lease, `"ownerId":"node`, `"ownerId":"\u006eode`)},
		{"escaped solidus", L, mustReplace(t, lease, `node-7/5b0c1f7e`, `node-7\/5b0c1f7e`)},
		{"uppercase hex in a control escape", L, mustReplace(t, esc, `\u001f`, `\u001F`)},
		{"control escape instead of short form", L, mustReplace(t, esc, `\n`, `\u000a`)},
		{"escaped non-ASCII", L, mustReplace(t, esc, "\u2028", `\u2028`)},
		{"capabilities not sorted", M, swapFirstTwoCapabilities(t, mesh)},
		{"channelWeights in byte order instead of UTF-16 order", M, mustReplace(t, uni, `"😀":7,"ﬁle":3`, `"ﬁle":3,"😀":7`)},
	}
}

func swapFirstTwoCapabilities(t testing.TB, v string) string {
	t.Helper()
	a := `{"hasSnapshotAdapter":false,"limit":0,"objectKind":"actor","policy":"recreate","stableType":"Player"}`
	b := `{"hasSnapshotAdapter":false,"limit":100,"objectKind":"instanceSpot","policy":"disabled","stableType":"Match"}`
	return mustReplace(t, v, a+","+b, b+","+a)
}

func writeFixture(t *testing.T) {
	t.Helper()
	const ns = "meshnode"
	f := fixtureFile{
		Format: "meshnode-store-records-v1",
		Description: []string{
			"Golden vectors for the Location Store records of spec §3.4 as this project writes them (docs/RECORDS.md).",
			"Origin: generated by `go test ./mesh/record -run TestGoldenFixture -update` in github.com/meshnode/meshnode; the file, not the generator, is the contract.",
			"keys: preimageHex = hex of the logical key preimage; key = the record kind (first preimage segment) + ':' + lowercase hex SHA-256 of the preimage (the Location Store key); redisKey = '{' + redisNamespace + '}:k:' + key.",
			"records: fields are the logical values (64-bit integers as decimal strings, bytes as lowercase hex, arrays in any order); value is the exact canonical JSON text (UTF-8) stored as the record's bytes.",
			"rejectedKeys / rejectedValues: inputs that must be refused, with the error class. nonCanonicalValues: values that decode but are not the canonical bytes.",
		},
		RedisNamespace: ns,
	}
	for _, kc := range generatorKeys() {
		pre, err := keyPreimage(t, kc.Kind, kc.Inputs)
		if err != nil {
			t.Fatalf("generator key %s: %v", kc.Name, err)
		}
		kc.PreimageHex, kc.Key, kc.RedisKey = hex.EncodeToString(pre), record.Key(pre), record.RedisKey(ns, pre)
		f.Keys = append(f.Keys, kc)
	}
	for _, g := range generatorRecords() {
		raw := mustJSON(t, g.fields)
		cr := buildRecord(t, g.kind, raw)
		v, err := cr.encode()
		if err != nil {
			t.Fatalf("generator record %s/%s: %v", g.kind, g.name, err)
		}
		f.Records = append(f.Records, recordCase{
			Name: g.name, Kind: g.kind, Fields: raw, PreimageHex: hex.EncodeToString(cr.preimage),
			Key: record.Key(cr.preimage), RedisKey: record.RedisKey(ns, cr.preimage), Value: string(v),
		})
	}
	f.RejectedKeys = generatorRejectedKeys()
	f.RejectedValues = generatorRejectedValues(t, f.Records)
	f.NonCanonicalValues = generatorNonCanonical(t, f.Records)

	// Refuse to write a fixture whose negative cases do not fail as
	// declared (the consuming test checks it again, from the file).
	for _, rv := range f.RejectedValues {
		if _, err := decodeAny(rv.Kind, rv.bytes(t)); !errors.Is(err, errorClasses[rv.Error]) {
			t.Fatalf("generator: rejected value %s/%s: err = %v, want %s", rv.Kind, rv.Name, err, rv.Error)
		}
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fixturePath, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", fixturePath, buf.Len())
}
