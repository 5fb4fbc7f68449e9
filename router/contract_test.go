package router

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// contract mirrors the parts of golden/contract-amendment-v1.json that the
// codec can be checked against.
type contract struct {
	Format        string `json:"format"`
	MessageFollow struct {
		HopMaximum           int `json:"hopMaximum"`
		QueuedMessageMaximum int `json:"queuedMessageMaximum"`
		QueuedByteMaximum    int `json:"queuedByteMaximum"`
	} `json:"messageFollow"`
	Terminal struct {
		Commands                map[string]int `json:"commands"`
		ReplyEnvelopeFields     []string       `json:"replyEnvelopeFields"`
		CreateRequestFields     []string       `json:"createRequestFields"`
		CreateReservationFences []string       `json:"createReservationFences"`
		CreateTerminalStates    []string       `json:"createTerminalStates"`
		CreateTerminalTail      []string       `json:"createTerminalTail"`
		ActorCreateRequest      []string       `json:"actorCreateRequestFields"`
		ActorCreateStates       []string       `json:"actorCreateTerminalStates"`
		ActorCreateTail         []string       `json:"actorCreateTerminalTail"`
		CloseRequestFields      []string       `json:"closeRequestFields"`
		CloseTargetFences       []string       `json:"closeTargetFences"`
		CloseTerminalTail       []string       `json:"closeTerminalTail"`
	} `json:"terminalServiceOperations"`
}

// orderedKeys returns the member names of the JSON object at path (a list
// of member names from the root), in document order.
func orderedKeys(t *testing.T, doc []byte, path ...string) []string {
	t.Helper()
	var v json.RawMessage = doc
	for _, p := range path {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			t.Fatalf("at %q: %v", p, err)
		}
		v = m[p]
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("path %v is not an object: %s", path, v)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func describe(t *testing.T, r *Record) []byte {
	t.Helper()
	js, err := DescribeJSON(r)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestContractAmendmentFieldLists cross-checks commands 47/48/49/20/50
// against the published contract-amendment field lists and bounds.
func TestContractAmendmentFieldLists(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "contract-amendment-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c contract
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if c.Format != "contract-amendment-v1" {
		t.Fatalf("format %q", c.Format)
	}
	ids := map[string]Command{"userSpotCreate": CmdUserSpotCreate, "userSpotClose": CmdUserSpotClose,
		"actorCreate": CmdActorCreate, "terminalReply": CmdReply, "messageFollow": CmdMessageFollow}
	for name, cmd := range ids {
		if c.Terminal.Commands[name] != int(cmd) {
			t.Errorf("%s is command %d in the contract, %d here", name, c.Terminal.Commands[name], cmd)
		}
	}
	if c.MessageFollow.HopMaximum != MessageFollowHopCount || c.MessageFollow.QueuedMessageMaximum != MessageFollowMessages ||
		c.MessageFollow.QueuedByteMaximum != MessageFollowBytes {
		t.Errorf("message follow bounds differ: %+v", c.MessageFollow)
	}

	g := newGen(1)
	check := func(what string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s fields %v, contract %v", what, got, want)
		}
	}
	create := describe(t, g.record(CmdUserSpotCreate).rec)
	check("userSpotCreate", orderedKeys(t, create, "body"), c.Terminal.CreateRequestFields)
	check("userSpotCreate.reservation", orderedKeys(t, create, "body", "reservation"), c.Terminal.CreateReservationFences)
	actor := describe(t, g.record(CmdActorCreate).rec)
	check("actorCreate", orderedKeys(t, actor, "body"), c.Terminal.ActorCreateRequest)
	check("actorCreate.reservation", orderedKeys(t, actor, "body", "reservation"), c.Terminal.CreateReservationFences)
	closeRec := describe(t, g.record(CmdUserSpotClose).rec)
	check("userSpotClose", orderedKeys(t, closeRec, "body"), c.Terminal.CloseRequestFields)
	// The versioned fence renders its version first; the contract lists the fences only.
	closeTarget := orderedKeys(t, closeRec, "body", "target")
	check("userSpotClose.target", slices.DeleteFunc(closeTarget, func(s string) bool { return s == "version" }), c.Terminal.CloseTargetFences)

	reply := &Record{Body: &Reply{Correlation: 1, Tail: &UserSpotCreateTail{CreateCreated, SpotRef{"s", 1}}}}
	js := describe(t, reply)
	check("reply", orderedKeys(t, js, "body"), c.Terminal.ReplyEnvelopeFields)
	check("reply tail (userSpotCreate)", orderedKeys(t, js, "body", "tail"), c.Terminal.CreateTerminalTail)
	js = describe(t, &Record{Body: &Reply{Correlation: 1, Tail: &ActorCreateTail{CreateCreated, &ActorRef{"a", 1}}}})
	check("reply tail (actorCreate)", orderedKeys(t, js, "body", "tail"), c.Terminal.ActorCreateTail)
	js = describe(t, &Record{Body: &Reply{Correlation: 1, Tail: &UserSpotCloseTail{true}}})
	check("reply tail (userSpotClose)", orderedKeys(t, js, "body", "tail"), c.Terminal.CloseTerminalTail)

	var states []string
	for r := CreateResult(0); r < 8; r++ {
		if r.valid() {
			states = append(states, r.String())
		}
	}
	check("create terminal states", states, c.Terminal.CreateTerminalStates)
	check("actor create terminal states", states, c.Terminal.ActorCreateStates)
}
