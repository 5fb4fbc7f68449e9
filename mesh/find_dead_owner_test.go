package mesh

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/query"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// Find, and a GetOrCreate that finds the object, answer OwnerGoneError
// for an object whose owner's lease has ended, also while the caller's last
// discovery list still shows that owner alive (§7.2, §7.4: not Ready while
// its owner is unavailable). Before, they took the list's word and
// answered a Ready ref / Existing for up to a discovery round.
func TestFindAfterOwnerLeaseGoneIsOwnerGone(t *testing.T)        { findDeadOwner(t, false) }
func TestGetOrCreateAfterOwnerLeaseGoneIsOwnerGone(t *testing.T) { findDeadOwner(t, true) }

func findDeadOwner(t *testing.T, getOrCreate bool) {
	f := newFixture(t)
	p := newProbe()
	registerTestFactories(t, f.reg, p)
	c := &cluster{f: f, probe: p}
	for i := 0; i < 3; i++ {
		cfg := objConfig("objects")
		cfg.Node.RoutingID = fmt.Sprintf("0%d0%d", i+1, i+1)
		clientRole0(i, &cfg)
		every := 100 * time.Millisecond
		if i == 0 {
			every = 3 * time.Second // a default-like discovery pace on the finder
		}
		opts := Options{Config: cfg, Factories: f.reg, Location: f.loc, Relocation: f.reloc, DiscoveryInterval: every}
		if cfg.Node.ObjectRole != config.RoleServer {
			opts.Factories = spot.NewRegistry()
		}
		n, err := Start(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close(context.Background()) })
		c.nodes = append(c.nodes, n)
	}
	eventually(t, 15*time.Second, "node 0 lists every node serving", func() bool {
		snap, ok := c.nodes[0].LastSnapshot()
		if !ok {
			return false
		}
		serving := 0
		for _, e := range snap.Entries {
			if e.LeaseValid && e.Descriptor.State == record.StateServing {
				serving++
			}
		}
		return serving == 3
	})
	// Placement needs admitted links too: listed is not yet linked on a
	// loaded machine (a CI run failed with "2 without an admitted link").
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.nodes[0].WaitPeers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	refs := createOn(t, c, "stale", 2, 1)
	dead := c.nodes[2]
	owner, _ := dead.Owner()
	dead.crash()
	// The owner's lease ends (deleted here; an expiry reads the same).
	key, _ := record.OwnerLeaseKey(owner)
	if _, err := f.loc.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Delete(key)}}); err != nil {
		t.Fatal(err)
	}
	e, found, err := query.Locate(context.Background(), f.loc, record.IdentityActor, refs[0].ActorID)
	t.Logf("ctl locate: found=%v state=%s err=%v", found, e.State, err)
	if getOrCreate {
		res, err := c.m(0).GetOrCreateActor(ctxT(t, 5*time.Second), refs[0].ActorID, testMoverType)
		var gone *OwnerGoneError
		if !errors.As(err, &gone) {
			t.Fatalf("GetOrCreateActor after the owner's lease is gone: %+v, err %v; want OwnerGoneError", res, err)
		}
		return
	}
	ref, err := c.m(0).FindActor(ctxT(t, 5*time.Second), refs[0].ActorID)
	var gone *OwnerGoneError
	if !errors.As(err, &gone) {
		t.Fatalf("FindActor after the owner's lease is gone: ref %+v, err %v; want OwnerGoneError (query says %s)", ref, err, e.State)
	}
}
