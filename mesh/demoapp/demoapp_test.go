package demoapp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/spot"
)

type replies struct {
	mu  sync.Mutex
	got map[string]string
	err map[string]error
}

func (r *replies) Reply(route, body []byte, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got[string(route)], r.err[string(route)] = string(body), err
}

func (r *replies) get(t *testing.T, route string) (string, error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		v, ok := r.got[route]
		e := r.err[route]
		r.mu.Unlock()
		if ok {
			return v, e
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reply on %s", route)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCounterAndRoom(t *testing.T) {
	reg := spot.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	rep := &replies{got: map[string]string{}, err: map[string]error{}}
	rt := spot.New(spot.Options{Workers: 2, Replier: rep})
	defer rt.Close()
	ctx := context.Background()

	cf, _ := reg.Lookup(CounterType)
	h, err := cf.New(ctx, spot.CreateRequest{ID: "c1", Generation: 1, Body: []byte("40")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := rt.Open(spot.Spec{Key: spot.Key{ID: "c1"}, Kind: spot.KindActor, Generation: 1, Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"inc", "add 1", "bogus"} {
		if err := c.Post(spot.Envelope{Kind: spot.Send, Body: []byte(m)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Post(spot.Envelope{Kind: spot.Request, Body: []byte("get"), ReplyRoute: []byte("r1")}); err != nil {
		t.Fatal(err)
	}
	if v, err := rep.get(t, "r1"); v != "42" || err != nil {
		t.Fatalf("counter = %q, %v; want 42", v, err)
	}
	// Snapshot round trip (PreserveStateWith).
	state, err := cf.Snapshot.Snapshot(h)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := cf.Snapshot.Restore(ctx, spot.CreateRequest{ID: "c1", Generation: 1}, state)
	if err != nil || h2.(*Counter).Value() != 42 {
		t.Fatalf("restore: %v", err)
	}
	if _, err := cf.Snapshot.Restore(ctx, spot.CreateRequest{}, []byte{1}); err == nil {
		t.Fatal("restore of a 1-byte state succeeded")
	}
	var d *spot.Declined
	if _, err := cf.New(ctx, spot.CreateRequest{ID: "c2", Generation: 1, Body: []byte("x")}); !errors.As(err, &d) {
		t.Fatalf("bad initial value: %v, want Declined", err)
	}

	rf, _ := reg.Lookup(ChatRoomType)
	rh, _ := rf.New(ctx, spot.CreateRequest{ID: "room", Generation: 1})
	room, err := rt.Open(spot.Spec{Key: spot.Key{ID: "room", Spot: true}, Kind: spot.KindUserSpot, Generation: 1, Handler: rh})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < MaxHistory+5; i++ {
		_ = room.Post(spot.Envelope{Kind: spot.Send, Body: []byte("hi")})
	}
	_ = room.Post(spot.Envelope{Kind: spot.Request, Body: []byte("history"), ReplyRoute: []byte("h")})
	if v, _ := rep.get(t, "h"); len(v) != MaxHistory*3-1 {
		t.Fatalf("history has %d bytes, want %d", len(v), MaxHistory*3-1)
	}
}

// env builders for the tests below.
func sendEnv(body string) spot.Envelope { return spot.Envelope{Kind: spot.Send, Body: []byte(body)} }
func requestEnv(body, route string) spot.Envelope {
	return spot.Envelope{Kind: spot.Request, Body: []byte(body), ReplyRoute: []byte(route)}
}

func post(t *testing.T, o *spot.Object, envs ...spot.Envelope) {
	t.Helper()
	for _, e := range envs {
		if err := o.Post(e); err != nil {
			t.Fatal(err)
		}
	}
}

// "/later" arms a one-shot timer whose firing appends the text; the line
// itself is not kept. Malformed lines are refused with ErrBadLater.
func TestChatRoomLater(t *testing.T) {
	clock := spot.NewManualClock(time.Unix(0, 0))
	rep := &replies{got: map[string]string{}, err: map[string]error{}}
	rt := spot.New(spot.Options{Workers: 2, Replier: rep, Clock: clock})
	defer rt.Close()
	room, err := rt.Open(spot.Spec{Key: spot.Key{ID: "r", Spot: true}, Kind: spot.KindUserSpot, Generation: 1, Handler: &ChatRoom{}})
	if err != nil {
		t.Fatal(err)
	}
	post(t, room, sendEnv("first"), requestEnv("/later 2s reminder", "s"), requestEnv("history", "h0"))
	if v, err := rep.get(t, "s"); v != "scheduled" || err != nil {
		t.Fatalf("/later answered %q, %v", v, err)
	}
	if v, _ := rep.get(t, "h0"); v != "first" {
		t.Fatalf("history before the timer = %q, want %q", v, "first")
	}
	clock.Advance(time.Second)
	post(t, room, requestEnv("history", "h1"))
	if v, _ := rep.get(t, "h1"); v != "first" {
		t.Fatalf("history after 1s = %q, want %q", v, "first")
	}
	clock.Advance(time.Second)
	post(t, room, requestEnv("history", "h2"))
	if v, _ := rep.get(t, "h2"); v != "first\nreminder" {
		t.Fatalf("history after 2s = %q, want the reminder appended", v)
	}

	bad := []struct{ name, line string }{
		{"no text", "/later 1s"},
		{"empty text", "/later 1s "},
		{"bad duration", "/later soon hi"},
		{"negative duration", "/later -1s hi"},
		{"text too long", "/later 1s " + strings.Repeat("x", MaxLaterText+1)},
	}
	for i, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			route := fmt.Sprintf("bad-%d", i)
			post(t, room, requestEnv(tc.line, route))
			if _, err := rep.get(t, route); !errors.Is(err, ErrBadLater) {
				t.Fatalf("%q answered %v, want ErrBadLater", tc.line, err)
			}
		})
	}
}

// What a move does to each demo type, with the runtime's own primitives
// (hold, capture, open a new instance with the captured work): a counter's
// value moves with it (PreserveStateWith) together with its queued
// increments; a chat room's queue and timers move but its lines do not
// (RecreateOnRelocation) — what `meshnode demo` shows across real nodes.
func TestRelocationPolicies(t *testing.T) {
	reg := spot.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	clock := spot.NewManualClock(time.Unix(0, 0))
	rep := &replies{got: map[string]string{}, err: map[string]error{}}
	src := spot.New(spot.Options{Workers: 2, Replier: rep, Clock: clock})
	defer src.Close()
	dst := spot.New(spot.Options{Workers: 2, Replier: rep, Clock: clock})
	defer dst.Close()
	ctx := context.Background()

	// move captures o and opens it on dst: restored from a snapshot
	// (PreserveStateWith) or built fresh (RecreateOnRelocation).
	move := func(t *testing.T, f spot.Factory, o *spot.Object, h spot.Handler, key spot.Key, kind spot.ObjectKind) *spot.Object {
		t.Helper()
		o.Hold()
		captured, err := o.Capture()
		if err != nil {
			t.Fatal(err)
		}
		req := spot.CreateRequest{ID: key.ID, Generation: 1}
		var nh spot.Handler
		switch f.Policy {
		case spot.PolicyPreserveState:
			state, err := f.Snapshot.Snapshot(h)
			if err != nil {
				t.Fatal(err)
			}
			nh, err = f.Snapshot.Restore(ctx, req, state)
			if err != nil {
				t.Fatal(err)
			}
		case spot.PolicyRecreate:
			if nh, err = f.New(ctx, req); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("policy %v", f.Policy)
		}
		o.Discard()
		moved, err := dst.Open(spot.Spec{Key: key, Kind: kind, Generation: 1, Handler: nh, Restored: &captured})
		if err != nil {
			t.Fatal(err)
		}
		return moved
	}

	t.Run("counter keeps its value and its queue", func(t *testing.T) {
		f, _ := reg.Lookup(CounterType)
		h, err := f.New(ctx, spot.CreateRequest{ID: "c", Generation: 1, Body: []byte("10")})
		if err != nil {
			t.Fatal(err)
		}
		key := spot.Key{ID: "c"}
		c, err := src.Open(spot.Spec{Key: key, Kind: spot.KindActor, Generation: 1, Handler: h})
		if err != nil {
			t.Fatal(err)
		}
		post(t, c, sendEnv("add 5"), requestEnv("get", "c0"))
		if v, _ := rep.get(t, "c0"); v != "15" {
			t.Fatalf("before = %q", v)
		}
		c.Hold()
		post(t, c, sendEnv("inc"), sendEnv("inc")) // queued, not run: they move
		moved := move(t, f, c, h, key, spot.KindActor)
		post(t, moved, requestEnv("get", "c1"))
		if v, _ := rep.get(t, "c1"); v != "17" {
			t.Fatalf("after the move = %q, want 17 (15 carried + 2 queued)", v)
		}
	})

	t.Run("chat room starts fresh with its queue and timers", func(t *testing.T) {
		f, _ := reg.Lookup(ChatRoomType)
		h, err := f.New(ctx, spot.CreateRequest{ID: "room", Generation: 1})
		if err != nil {
			t.Fatal(err)
		}
		key := spot.Key{ID: "room", Spot: true}
		r, err := src.Open(spot.Spec{Key: key, Kind: spot.KindUserSpot, Generation: 1, Handler: h})
		if err != nil {
			t.Fatal(err)
		}
		post(t, r, sendEnv("before"), sendEnv("/later 1s timer"), requestEnv("history", "r0"))
		if v, _ := rep.get(t, "r0"); v != "before" {
			t.Fatalf("before = %q", v)
		}
		r.Hold()
		post(t, r, sendEnv("queued"))
		moved := move(t, f, r, h, key, spot.KindUserSpot)
		post(t, moved, requestEnv("history", "r1"))
		if v, _ := rep.get(t, "r1"); v != "queued" {
			t.Fatalf("after the move = %q, want only the queued line", v)
		}
		clock.Advance(time.Second)
		post(t, moved, requestEnv("history", "r2"))
		if v, _ := rep.get(t, "r2"); v != "queued\ntimer" {
			t.Fatalf("after the timer = %q, want the moved timer's line", v)
		}
	})
}

// The counter's sequence check tells in-order, duplicated and reordered
// messages apart, and moves with the counter's state.
func TestCounterSequence(t *testing.T) {
	tests := []struct {
		name string
		seqs []int64
		want seqCheck
	}{
		{"in order", []int64{1, 2, 3}, seqCheck{last: 3}},
		{"a duplicate", []int64{1, 2, 2, 3}, seqCheck{last: 3, duplicated: 1}},
		{"one overtakes another", []int64{1, 3, 2, 4}, seqCheck{last: 4, reordered: 1}},
		{"a late one twice", []int64{1, 3, 2, 2}, seqCheck{last: 3, reordered: 1, duplicated: 1}},
		{"a gap (lost, or still on its way)", []int64{1, 2, 5}, seqCheck{last: 5, missing: []int64{3, 4}}},
		{"a gap partly filled", []int64{1, 5, 3}, seqCheck{last: 5, reordered: 1, missing: []int64{2, 4}}},
		{"a gap over the bound", []int64{1, maxMissing + 10}, seqCheck{last: maxMissing + 10, overflow: 8, missing: count(2, maxMissing+1)}},
	}
	f := CounterFactory()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := f.New(context.Background(), spot.CreateRequest{ID: "c", Generation: 1})
			if err != nil {
				t.Fatal(err)
			}
			c := h.(*Counter)
			for _, n := range tc.seqs {
				c.seq.see(n)
			}
			if !reflect.DeepEqual(c.seq, tc.want) {
				t.Fatalf("seq %+v, want %+v", c.seq, tc.want)
			}
			state, err := f.Snapshot.Snapshot(c)
			if err != nil {
				t.Fatal(err)
			}
			back, err := f.Snapshot.Restore(context.Background(), spot.CreateRequest{ID: "c", Generation: 1}, state)
			if err != nil {
				t.Fatal(err)
			}
			if got := back.(*Counter).seq; !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("after a snapshot round trip: %+v, want %+v", got, tc.want)
			}
		})
	}
	for _, n := range []int{0, 9, 16, 24, 8 * (6 + maxMissing)} {
		if _, err := f.Snapshot.Restore(context.Background(), spot.CreateRequest{ID: "c", Generation: 1}, make([]byte, n)); err == nil {
			t.Fatalf("a %d-byte state restored", n)
		}
	}
	// A state of the earlier layout (value, last, duplicated, reordered).
	old := make([]byte, 32)
	for i, v := range []uint64{7, 9, 1, 2} {
		binary.BigEndian.PutUint64(old[8*i:], v)
	}
	back, err := f.Snapshot.Restore(context.Background(), spot.CreateRequest{ID: "c", Generation: 1}, old)
	if err != nil {
		t.Fatal(err)
	}
	if c := back.(*Counter); c.value != 7 || !reflect.DeepEqual(c.seq, seqCheck{last: 9, duplicated: 1, reordered: 2}) {
		t.Fatalf("earlier layout restored as %d %+v", c.value, c.seq)
	}
}

// count is the numbers from..to.
func count(from, to int64) []int64 {
	var out []int64
	for n := from; n <= to; n++ {
		out = append(out, n)
	}
	return out
}
