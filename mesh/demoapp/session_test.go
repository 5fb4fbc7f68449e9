package demoapp

import (
	"context"
	"testing"

	"github.com/meshnode/meshnode/spot"
)

func TestSessionCountsEveryMessageButTheCount(t *testing.T) {
	r := &replies{got: map[string]string{}, err: map[string]error{}}
	rt := spot.New(spot.Options{Replier: r})
	defer rt.Close()
	h, err := SessionFactory().New(context.Background(), spot.CreateRequest{ID: "s1", Generation: 1, StableType: SessionType})
	if err != nil {
		t.Fatal(err)
	}
	s, err := rt.Open(spot.Spec{Key: spot.Key{ID: "s1", Spot: true}, Kind: spot.KindInstanceSpot, Generation: 1, Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	post(t, s, sendEnv("a"), requestEnv("hi", "r1"), sendEnv("b"), requestEnv("count", "r2"), requestEnv("count", "r3"))
	for route, want := range map[string]string{"r1": "session s1 #2 on generation 1", "r2": "3", "r3": "3"} {
		if got, err := r.get(t, route); err != nil || got != want {
			t.Fatalf("%s: %q, %v; want %q", route, got, err, want)
		}
	}
}
