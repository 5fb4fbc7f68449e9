package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// ctl reclaim refuses what it cannot mean, before touching any store.
func TestCtlReclaimUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"nothing named", []string{}, "want <actor|spot> <Id>, or --all"},
		{"id and --all", []string{"actor", "a-1", "--all"}, "want <actor|spot> <Id>, or --all"},
		{"bad kind", []string{"room", "a-1"}, `object kind "room"`},
		{"bad --kind", []string{"--all", "--kind", "rooms"}, `--kind "rooms"`},
		{"--kind with an id", []string{"actor", "a-1", "--kind", "actor"}, "want <actor|spot> <Id>, or --all"},
		{"unknown flag", []string{"--all", "--bogus"}, "unknown flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), append([]string{"ctl", "reclaim"}, tc.args...), &out, &errb)
			if code != ExitUsage || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errb.String(), ExitUsage, tc.want)
			}
		})
	}
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"ctl", "reclaim", "--help"}, &out, &errb); code != ExitOK || !strings.Contains(out.String(), "usage: meshnode ctl reclaim") {
		t.Fatalf("--help: exit %d %s %s", code, out.String(), errb.String())
	}
}

// What a released reservation held is said in words, whatever it held.
func TestSlotsOf(t *testing.T) {
	cases := []struct {
		b    authority.Bundle
		want string
	}{
		{authority.Bundle{Actors: 1}, "1 actor slot"},
		{authority.Bundle{Actors: 3}, "3 actor slots"},
		{authority.Bundle{Spots: 1, SpotType: &record.SpotTypeSlots{ObjectKind: record.ObjectUserSpot, StableType: "Room", Count: 1}},
			"1 spot slot, 1 userSpot Room slot"},
		{authority.Bundle{Spots: 1, Actors: 4, SpotType: &record.SpotTypeSlots{ObjectKind: record.ObjectUserSpot, StableType: "Room", Count: 1}},
			"4 actor slots, 1 spot slot, 1 userSpot Room slot"},
		{authority.Bundle{}, "no slots"},
	}
	for _, c := range cases {
		if got := slotsOf(c.b); got != c.want {
			t.Errorf("slotsOf(%+v) = %q, want %q", c.b, got, c.want)
		}
	}
}
