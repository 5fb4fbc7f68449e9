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
	cases := []struct {
		name     string
		id       CounterID
		preimage string
		key      string
	}{
		{"spot type", spotTypeOf(nodeA, record.ObjectUserSpot, "Room"),
			"capacity\x00game\x000a01\x003\x00spotType\x00userSpot\x00Room",
			"capacity:872fa7f3349c46afe70170f8f736d4895fcd628b17766ca21143b649639b7afb"},
		{"actors", actorsOf(nodeA), "capacity\x00game\x000a01\x003\x00actors", ""},
		{"spots", spotsOf(nodeB), "capacity\x00game\x000b02\x007\x00spots", ""},
		{"instance spot type", spotTypeOf(nodeB, record.ObjectInstanceSpot, "사용자"),
			"capacity\x00game\x000b02\x007\x00spotType\x00instanceSpot\x00사용자", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := CapacityPreimage(tc.id)
			if err != nil {
				t.Fatal(err)
			}
			if string(p) != tc.preimage {
				t.Errorf("preimage %q, want %q", p, tc.preimage)
			}
			k, _ := CapacityKey(tc.id)
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
		if _, err := CapacityPreimage(id); err == nil {
			t.Errorf("CapacityPreimage(%+v) accepted", id)
		}
	}
}

func TestCapacityValue(t *testing.T) {
	id := spotTypeOf(nodeA, record.ObjectUserSpot, "Room")
	const want = `{"active":2,"class":"spotType","lifecycleGeneration":"3","meshName":"game","objectKind":"userSpot","recordVersion":1,"reserved":1,"routingIdHex":"0a01","stableType":"Room"}`
	v, err := EncodeCapacity(id, Usage{Reserved: 1, Active: 2})
	if err != nil || string(v) != want {
		t.Fatalf("EncodeCapacity = %s, %v\nwant %s", v, err, want)
	}
	const wantActors = `{"active":5,"class":"actors","lifecycleGeneration":"3","meshName":"game","objectKind":null,"recordVersion":1,"reserved":0,"routingIdHex":"0a01","stableType":null}`
	if v, _ := EncodeCapacity(actorsOf(nodeA), Usage{Active: 5}); string(v) != wantActors {
		t.Errorf("actors value %s\nwant %s", v, wantActors)
	}
	gotID, u, err := DecodeCapacity([]byte(want))
	if err != nil || !gotID.equal(id) || u != (Usage{1, 2}) {
		t.Fatalf("DecodeCapacity = %+v %+v %v", gotID, u, err)
	}
	esc := spotTypeOf(nodeA, record.ObjectUserSpot, "a\"b\\c\n\x01<>&\u2028é")
	ev, err := EncodeCapacity(esc, Usage{Active: 1})
	if err != nil || !strings.Contains(string(ev), `"stableType":"a\"b\\c\n\u0001<>&`+"\u2028é\"") {
		t.Errorf("escaping: %s %v", ev, err)
	}
	if back, _, err := DecodeCapacity(ev); err != nil || !back.equal(esc) {
		t.Errorf("escaped value does not round-trip: %v", err)
	}

	rejected := []struct{ name, value string }{
		{"whitespace", strings.Replace(want, `"active":2`, `"active": 2`, 1)},
		{"member order", `{"class":"spotType","active":2,"lifecycleGeneration":"3","meshName":"game","objectKind":"userSpot","recordVersion":1,"reserved":1,"routingIdHex":"0a01","stableType":"Room"}`},
		{"duplicate member", strings.Replace(want, `{"active":2,`, `{"active":9,"active":2,`, 1)},
		{"unknown member", strings.Replace(want, `"stableType":"Room"}`, `"stableType":"Room","x":1}`, 1)},
		{"missing member", strings.Replace(want, `"reserved":1,`, ``, 1)},
		{"case-folded name", strings.Replace(want, `"active"`, `"Active"`, 1)},
		{"number as string", strings.Replace(want, `"active":2`, `"active":"2"`, 1)},
		{"negative", strings.Replace(want, `"active":2`, `"active":-2`, 1)},
		{"fraction", strings.Replace(want, `"active":2`, `"active":2.0`, 1)},
		{"above 2^31-1", strings.Replace(want, `"active":2`, `"active":2147483648`, 1)},
		{"generation as number", strings.Replace(want, `"lifecycleGeneration":"3"`, `"lifecycleGeneration":3`, 1)},
		{"generation with leading zero", strings.Replace(want, `"lifecycleGeneration":"3"`, `"lifecycleGeneration":"03"`, 1)},
		{"uppercase hex", strings.Replace(want, `"0a01"`, `"0A01"`, 1)},
		{"kind without type", strings.Replace(want, `"stableType":"Room"`, `"stableType":null`, 1)},
		{"record version 2", strings.Replace(want, `"recordVersion":1`, `"recordVersion":2`, 1)},
		{"escaped slash", strings.Replace(want, `"Room"`, `"Ro\/om"`, 1)},
		{"trailing data", want + " "},
		{"invalid UTF-8", strings.Replace(want, "Room", "R\xffm", 1)},
	}
	for _, r := range rejected {
		t.Run(r.name, func(t *testing.T) {
			if _, _, err := DecodeCapacity([]byte(r.value)); err == nil {
				t.Errorf("accepted %s", r.value)
			}
		})
	}
	var uv *record.UnknownVersionError
	if _, _, err := DecodeCapacity([]byte(strings.Replace(want, `"recordVersion":1`, `"recordVersion":2`, 1))); !errors.As(err, &uv) {
		t.Errorf("recordVersion 2: %v, want *record.UnknownVersionError", err)
	}
}

func TestCapacityRowOf(t *testing.T) {
	id := actorsOf(nodeA)
	v := capValue(t, id, 1, 2)
	row, err := CapacityRowOf(id, locstore.ReadResult{Found: true, Value: v, Version: "x"})
	if err != nil || !row.Found || row.Usage != (Usage{1, 2}) || row.Version != "x" {
		t.Fatalf("row %+v, %v", row, err)
	}
	_, err = CapacityRowOf(actorsOf(nodeB), locstore.ReadResult{Found: true, Value: v, Version: "x"})
	wantErr(t, err, ErrCorruptRecord)
	_, err = CapacityRowOf(id, locstore.ReadResult{Found: true, Value: []byte("{}"), Version: "x"})
	wantErr(t, err, ErrCorruptRecord)
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
