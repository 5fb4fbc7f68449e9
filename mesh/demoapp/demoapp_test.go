package demoapp

import (
	"context"
	"errors"
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
