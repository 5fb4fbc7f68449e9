package authority

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// Keys and values of the package's own records, pinned by hand-written
// literals (the digests were checked with sha256sum(1), not with this code).

func TestCapacityKeys(t *testing.T) {
	// Pinned digests: printf 'capacity\0game\0000a01\0003\0spotType\000userSpot\000Room\000secured' | sha256sum
	// (and …\000active).
	cases := []struct {
		name     string
		id       CounterID
		m        Measure
		preimage string
		key      string
	}{
		{"spot type, secured", spotTypeOf(nodeA, record.ObjectUserSpot, "Room"), MeasureSecured,
			"capacity\x00game\x000a01\x003\x00spotType\x00userSpot\x00Room\x00secured",
			"capacity:97f7d0a097685a6e4dbac877d435b1878e1cf1c165d87b606c387e6a5712c877"},
		{"spot type, active", spotTypeOf(nodeA, record.ObjectUserSpot, "Room"), MeasureActive,
			"capacity\x00game\x000a01\x003\x00spotType\x00userSpot\x00Room\x00active",
			"capacity:f0cbed33396c97128a47a222d8b7ed441223b7961b383909427417f856f3a308"},
		{"actors", actorsOf(nodeA), MeasureSecured, "capacity\x00game\x000a01\x003\x00actors\x00secured", ""},
		{"spots", spotsOf(nodeB), MeasureActive, "capacity\x00game\x000b02\x007\x00spots\x00active", ""},
		{"instance spot type", spotTypeOf(nodeB, record.ObjectInstanceSpot, "사용자"), MeasureSecured,
			"capacity\x00game\x000b02\x007\x00spotType\x00instanceSpot\x00사용자\x00secured", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := CapacityPreimage(tc.id, tc.m)
			if err != nil {
				t.Fatal(err)
			}
			if string(p) != tc.preimage {
				t.Errorf("preimage %q, want %q", p, tc.preimage)
			}
			k, _ := CapacityKey(tc.id, tc.m)
			if k != record.Key([]byte(tc.preimage)) || (tc.key != "" && k != tc.key) {
				t.Errorf("key %s, want %s", k, tc.key)
			}
		})
	}
	bad := []CounterID{
		{Node: nodeA, Class: "widgets"},
		{Node: nodeA, Class: SlotActors, StableType: "Player"},
		{Node: nodeA, Class: SlotSpotType, SpotKind: record.ObjectActor, StableType: "Player"},
		{Node: nodeA, Class: SlotSpotType, SpotKind: record.ObjectUserSpot, StableType: "a\x00b"},
		{Node: Node{MeshName: "", RoutingID: []byte{1}, LifecycleGeneration: 1}, Class: SlotActors},
		{Node: Node{MeshName: "m", RoutingID: nil, LifecycleGeneration: 1}, Class: SlotActors},
		{Node: Node{MeshName: "m", RoutingID: []byte{1}, LifecycleGeneration: 0}, Class: SlotActors},
	}
	for _, id := range bad {
		if _, err := CapacityPreimage(id, MeasureSecured); err == nil {
			t.Errorf("CapacityPreimage(%+v) accepted", id)
		}
	}
	if _, err := CapacityPreimage(actorsOf(nodeA), "reserved"); err == nil {
		t.Error("CapacityPreimage accepted an unknown measure")
	}
}

func TestCapacityValue(t *testing.T) {
	id := spotTypeOf(nodeA, record.ObjectUserSpot, "Room")
	const want = `{"class":"spotType","count":3,"lifecycleGeneration":"3","measure":"secured","meshName":"game","objectKind":"userSpot","recordVersion":2,"routingIdHex":"0a01","stableType":"Room"}`
	v, err := EncodeCapacity(id, MeasureSecured, 3)
	if err != nil || string(v) != want {
		t.Fatalf("EncodeCapacity = %s, %v\nwant %s", v, err, want)
	}
	const wantActors = `{"class":"actors","count":5,"lifecycleGeneration":"3","measure":"active","meshName":"game","objectKind":null,"recordVersion":2,"routingIdHex":"0a01","stableType":null}`
	if v, _ := EncodeCapacity(actorsOf(nodeA), MeasureActive, 5); string(v) != wantActors {
		t.Errorf("actors value %s\nwant %s", v, wantActors)
	}
	gotID, m, n, err := DecodeCapacity([]byte(want))
	if err != nil || !gotID.equal(id) || m != MeasureSecured || n != 3 {
		t.Fatalf("DecodeCapacity = %+v %s %d %v", gotID, m, n, err)
	}
	if _, err := EncodeCapacity(id, "reserved", 1); err == nil {
		t.Error("EncodeCapacity accepted an unknown measure")
	}
	if _, err := EncodeCapacity(id, MeasureActive, -1); err == nil {
		t.Error("EncodeCapacity accepted a negative count")
	}
	esc := spotTypeOf(nodeA, record.ObjectUserSpot, "a\"b\\c\n\x01<>&\u2028é")
	ev, err := EncodeCapacity(esc, MeasureActive, 1)
	if err != nil || !strings.Contains(string(ev), `"stableType":"a\"b\\c\n\u0001<>&`+"\u2028é\"") {
		t.Errorf("escaping: %s %v", ev, err)
	}
	if back, _, _, err := DecodeCapacity(ev); err != nil || !back.equal(esc) {
		t.Errorf("escaped value does not round-trip: %v", err)
	}

	rejected := []struct{ name, value string }{
		{"whitespace", strings.Replace(want, `"count":3`, `"count": 3`, 1)},
		{"member order", `{"count":3,"class":"spotType","lifecycleGeneration":"3","measure":"secured","meshName":"game","objectKind":"userSpot","recordVersion":2,"routingIdHex":"0a01","stableType":"Room"}`},
		{"duplicate member", strings.Replace(want, `"count":3,`, `"count":9,"count":3,`, 1)},
		{"unknown member", strings.Replace(want, `"stableType":"Room"}`, `"stableType":"Room","x":1}`, 1)},
		{"missing member", strings.Replace(want, `"measure":"secured",`, ``, 1)},
		{"unknown measure", strings.Replace(want, `"secured"`, `"reserved"`, 1)},
		{"case-folded name", strings.Replace(want, `"count"`, `"Count"`, 1)},
		{"number as string", strings.Replace(want, `"count":3`, `"count":"3"`, 1)},
		{"negative", strings.Replace(want, `"count":3`, `"count":-3`, 1)},
		{"fraction", strings.Replace(want, `"count":3`, `"count":3.0`, 1)},
		{"above 2^31-1", strings.Replace(want, `"count":3`, `"count":2147483648`, 1)},
		{"generation as number", strings.Replace(want, `"lifecycleGeneration":"3"`, `"lifecycleGeneration":3`, 1)},
		{"generation with leading zero", strings.Replace(want, `"lifecycleGeneration":"3"`, `"lifecycleGeneration":"03"`, 1)},
		{"uppercase hex", strings.Replace(want, `"0a01"`, `"0A01"`, 1)},
		{"kind without type", strings.Replace(want, `"stableType":"Room"`, `"stableType":null`, 1)},
		{"escaped slash", strings.Replace(want, `"Room"`, `"Ro\/om"`, 1)},
		{"trailing data", want + " "},
		{"invalid UTF-8", strings.Replace(want, "Room", "R\xffm", 1)},
	}
	for _, r := range rejected {
		t.Run(r.name, func(t *testing.T) {
			if _, _, _, err := DecodeCapacity([]byte(r.value)); err == nil {
				t.Errorf("accepted %s", r.value)
			}
		})
	}
	// The one-row layout of recordVersion 1 ({active, reserved}) and any
	// other version are refused as such.
	var uv *record.UnknownVersionError
	v1 := `{"active":2,"class":"spotType","lifecycleGeneration":"3","meshName":"game","objectKind":"userSpot","recordVersion":1,"reserved":1,"routingIdHex":"0a01","stableType":"Room"}`
	for _, old := range []string{v1, strings.Replace(want, `"recordVersion":2`, `"recordVersion":3`, 1)} {
		if _, _, _, err := DecodeCapacity([]byte(old)); !errors.As(err, &uv) {
			t.Errorf("%s: %v, want *record.UnknownVersionError", old, err)
		}
	}
}

func TestCapacityRowOf(t *testing.T) {
	id := actorsOf(nodeA)
	sec := locstore.ReadResult{Found: true, Value: secVal(t, id, 3), Version: "s"}
	act := locstore.ReadResult{Found: true, Value: actVal(t, id, 2), Version: "a"}
	row, err := CapacityRowOf(id, sec, act)
	if err != nil || !row.Found || row.Usage != (Usage{1, 2}) || row.Secured != (StoredCount{true, "s"}) || row.Active != (StoredCount{true, "a"}) {
		t.Fatalf("row %+v, %v", row, err)
	}
	if row, err := CapacityRowOf(id, sec, locstore.ReadResult{}); err != nil || row.Usage != (Usage{Reserved: 3}) || row.Active.Found {
		t.Errorf("active row missing: %+v, %v; want 3 reserved", row, err)
	}
	if row, err := CapacityRowOf(id, locstore.ReadResult{}, locstore.ReadResult{}); err != nil || row.Found || row.Usage != (Usage{}) {
		t.Errorf("both missing: %+v, %v; want zero", row, err)
	}
	for name, c := range map[string][2]locstore.ReadResult{
		"another counter's row":    {{Found: true, Value: secVal(t, actorsOf(nodeB), 3), Version: "s"}, act},
		"rows swapped":             {act, sec},
		"more active than secured": {{Found: true, Value: secVal(t, id, 1), Version: "s"}, act},
		"active without secured":   {{}, act},
		"undecodable":              {{Found: true, Value: []byte("{}"), Version: "s"}, act},
	} {
		_, err = CapacityRowOf(id, c[0], c[1])
		if !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: %v, want ErrCorruptRecord", name, err)
		}
	}
	_, err = AuthorityRowOf("authority:x", locstore.ReadResult{Found: true, Value: []byte(`{"recordVersion":1}`), Version: "x"})
	wantErr(t, err, ErrCorruptRecord)
}

func sampleOperation() OperationRef {
	return OperationRef{SourceRoutingID: []byte{0xc1, 0x02}, SourceRunGeneration: 4,
		OperationID: [16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0, 1, 2, 3, 4, 5, 6, 7}}
}

func TestTerminalKey(t *testing.T) {
	op := sampleOperation()
	p, err := TerminalPreimage(op)
	if err != nil {
		t.Fatal(err)
	}
	const wantPre = "creation-terminal\x00c102\x004\x000123456789abcdef0001020304050607"
	if string(p) != wantPre {
		t.Errorf("preimage %q, want %q", p, wantPre)
	}
	k, _ := TerminalKey(op)
	if k != "creation-terminal:65ff6dc3098f5a5cf23d5982baf0c76930b32e9e16302bdf9484559f8deb208e" {
		t.Errorf("key %s", k)
	}
	for _, bad := range []OperationRef{
		{SourceRoutingID: nil, SourceRunGeneration: 4, OperationID: op.OperationID},
		{SourceRoutingID: []byte{1}, SourceRunGeneration: 0, OperationID: op.OperationID},
		{SourceRoutingID: []byte{1}, SourceRunGeneration: 4},
	} {
		if _, err := TerminalKey(bad); err == nil {
			t.Errorf("TerminalKey(%+v) accepted", bad)
		}
	}
}

func TestTerminalRecord(t *testing.T) {
	reason := "full"
	created := TerminalRecord{
		Operation: sampleOperation(), RequestSHA256: [32]byte{0xab, 0xcd},
		ID: "user:42", ObjectKind: record.ObjectActor, StableType: "Player", Outcome: OutcomeCreated,
		Ref:      &CreatedRef{ObjectGeneration: 101, AuthorityOwnerGeneration: 1, MeshName: "game", RoutingID: []byte{0x0a, 0x01}},
		Reply:    []byte("hi"),
		Deadline: 1752000010000, RecordedAt: 1752000000000,
	}
	const want = `{"deadlineEpochMs":"1752000010000","failure":null,"format":"creation-operation-terminal-v1","objectId":"user:42","objectKind":"actor","operationIdHex":"0123456789abcdef0001020304050607","outcome":"created","reason":null,"recordedAtEpochMs":"1752000000000","ref":{"authorityOwnerGeneration":"1","meshName":"game","objectGeneration":"101","routingIdHex":"0a01"},"reply":"aGk=","requestSha256":"abcd000000000000000000000000000000000000000000000000000000000000","sourceRoutingIdHex":"c102","sourceRunGeneration":"4","stableType":"Player"}`
	v, err := created.Encode()
	if err != nil || string(v) != want {
		t.Fatalf("Encode = %s, %v\nwant %s", v, err, want)
	}
	back, err := DecodeTerminal(v)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := back.Encode(); string(again) != want {
		t.Errorf("round trip differs: %s", again)
	}

	rejected := created
	rejected.Outcome, rejected.Ref, rejected.Reason, rejected.Reply = OutcomeRejected, nil, &reason, nil
	failed := created
	failed.Outcome, failed.Ref, failed.Failure = OutcomeFailed, nil, &Failure{Type: "factoryPanic", Message: "boom"}
	for _, r := range []TerminalRecord{rejected, failed} {
		v, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeTerminal(v); err != nil {
			t.Errorf("%s: %v", r.Outcome, err)
		}
	}
	if v, _ := rejected.Encode(); !strings.Contains(string(v), `"reason":"full"`) || !strings.Contains(string(v), `"reply":null`) {
		t.Errorf("rejected value %s", v)
	}

	invalidRecords := map[string]func(*TerminalRecord){
		"created without ref":     func(r *TerminalRecord) { r.Ref = nil },
		"created with a reason":   func(r *TerminalRecord) { r.Reason = &reason },
		"unknown outcome":         func(r *TerminalRecord) { r.Outcome = "maybe" },
		"bad object id":           func(r *TerminalRecord) { r.ID = "" },
		"zero operation id":       func(r *TerminalRecord) { r.Operation.OperationID = [16]byte{} },
		"failure type with a NUL": func(r *TerminalRecord) { r.Outcome, r.Ref, r.Failure = OutcomeFailed, nil, &Failure{Type: "a\x00"} },
		"over 1 MiB":              func(r *TerminalRecord) { r.Reply = make([]byte, MaxTerminalBytes) },
	}
	for name, edit := range invalidRecords {
		r := created
		edit(&r)
		if _, err := r.Encode(); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}

	for name, value := range map[string]string{
		"unknown format":  strings.Replace(want, "terminal-v1", "terminal-v2", 1),
		"non-canonical":   strings.Replace(want, `"failure":null`, `"failure": null`, 1),
		"unknown member":  strings.Replace(want, `{"deadline`, `{"x":1,"deadline`, 1),
		"uppercase hex":   strings.Replace(want, "abcd0000", "ABCD0000", 1),
		"short sha":       strings.Replace(want, "abcd0000", "abcd", 1),
		"unpadded base64": strings.Replace(want, `"aGk="`, `"aGk"`, 1),
		"no ref":          strings.Replace(want, `"ref":{"authorityOwnerGeneration":"1","meshName":"game","objectGeneration":"101","routingIdHex":"0a01"}`, `"ref":null`, 1),
	} {
		if _, err := DecodeTerminal([]byte(value)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	var uv *record.UnknownVersionError
	if _, err := DecodeTerminal([]byte(strings.Replace(want, "terminal-v1", "terminal-v2", 1))); !errors.As(err, &uv) {
		t.Errorf("unknown format: %v", err)
	}
}

func TestTerminalRetention(t *testing.T) {
	cases := []struct {
		deadline, now time.Time
		want          time.Duration
	}{
		{storeNow.Add(30 * time.Second), storeNow, 5*time.Minute + 30*time.Second},
		{storeNow, storeNow, 5 * time.Minute},
		{storeNow.Add(-4 * time.Minute), storeNow, time.Minute},
		{storeNow.Add(-5 * time.Minute), storeNow, 0},
		{storeNow.Add(time.Microsecond), storeNow, 5*time.Minute + time.Millisecond}, // rounded up to the stores' unit
	}
	for _, c := range cases {
		if got := terminalRetention(c.deadline, c.now); got != c.want {
			t.Errorf("deadline %v now %v: retention %v, want %v", c.deadline, c.now, got, c.want)
		}
	}
}

func TestCheckTerminal(t *testing.T) {
	op := sampleOperation()
	rec := TerminalRecord{Operation: op, RequestSHA256: [32]byte{1}, ID: "user:42", ObjectKind: record.ObjectActor,
		StableType: "Player", Outcome: OutcomeFailed, Failure: &Failure{Type: "boom"}}
	v, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := CheckTerminal(op, [32]byte{1}, locstore.ReadResult{Found: true, Value: v}); err != nil || got.Outcome != OutcomeFailed {
		t.Errorf("same request: %+v %v", got, err)
	}
	_, err = CheckTerminal(op, [32]byte{2}, locstore.ReadResult{Found: true, Value: v})
	wantErr(t, err, ErrInvalidOperation)
	_, err = CheckTerminal(op, [32]byte{1}, locstore.ReadResult{})
	wantErr(t, err, ErrNotFound, ErrConflict)
	other := op
	other.SourceRunGeneration = 5
	_, err = CheckTerminal(other, [32]byte{1}, locstore.ReadResult{Found: true, Value: v})
	wantErr(t, err, ErrCorruptRecord)
}
