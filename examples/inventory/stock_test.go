package main

import (
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/spot"
)

type replies struct {
	mu  sync.Mutex
	got []string
}

func (r *replies) Reply(_, body []byte, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.got = append(r.got, "error: "+err.Error())
		return
	}
	r.got = append(r.got, string(body))
}

func (r *replies) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// TestReserveBeyondTheTimerLimitIsRefusedCleanly: every hold arms one
// timer, and an object has at most spot.MaxTimers. A reservation past that
// is answered "too many open holds" and records nothing — a hold recorded
// without its timer would never expire (the timer was armed after the hold
// was recorded, and the turn failed with the hold kept).
func TestReserveBeyondTheTimerLimitIsRefusedCleanly(t *testing.T) {
	r := &replies{}
	rt := spot.New(spot.Options{Workers: 1, Clock: spot.NewManualClock(time.Unix(1000, 0)), Replier: r})
	defer rt.Close()
	h, err := stockFactory().New(t.Context(), spot.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	o, err := rt.Open(spot.Spec{Key: spot.Key{ID: "widget"}, Kind: spot.KindActor, Generation: 1, Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string) {
		t.Helper()
		if err := o.Post(spot.Envelope{Kind: spot.Request, Body: []byte(body), ReplyRoute: []byte("r")}); err != nil {
			t.Fatal(err)
		}
	}
	post("add 5000")
	for range spot.MaxTimers + 1 {
		post("reserve 1 1h")
	}
	post("get")
	deadline := time.Now().Add(time.Minute)
	for len(r.all()) < spot.MaxTimers+3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := r.all()
	if len(got) != spot.MaxTimers+3 {
		t.Fatalf("%d replies, want %d", len(got), spot.MaxTimers+3)
	}
	if last := got[spot.MaxTimers+1]; last != "too many open holds" {
		t.Errorf("reservation past the limit answered %q", last)
	}
	if want := "on_hand=5000 held=1000 available=4000 moves=0"; got[len(got)-1] != want {
		t.Errorf("status %q, want %q", got[len(got)-1], want)
	}
}
