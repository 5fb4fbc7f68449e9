package mesh

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// lateLeaseStore is a Location Store whose reads of one owner-lease record
// answer it a moment before it expires — less than the fencing margin left,
// so that the admission deadline a reader derives from it has passed — as
// a reader sees an owner that stopped renewing (killed, paused, cut off
// from the store) between its admission deadline and its lease's end.
type lateLeaseStore struct {
	locstore.Store
	mu  sync.Mutex
	key string // "": reads answer as the store does
}

func (s *lateLeaseStore) lateFor(t *testing.T, ownerID string) {
	t.Helper()
	key, err := record.OwnerLeaseKey(ownerID)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.key = key
	s.mu.Unlock()
}

func (s *lateLeaseStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	rr, err := s.Store.Read(ctx, key)
	s.mu.Lock()
	late := key == s.key
	s.mu.Unlock()
	if err == nil && late && rr.Found {
		rr.ExpiresAt = rr.StoreNow.Add(time.Millisecond)
	}
	return rr, err
}

// A message or request to an object whose owner is past its admission
// deadline, its lease not yet ended, is refused Unavailable naming the
// object, the owner and its node, and saying what to expect — as
// OwnerGoneError does once the lease has ended. It said only "owner
// <OwnerId> is past its admission deadline" (operator try-out 8: every
// sender to a SIGKILLed server's objects got it for lease.fencing_margin).
func TestOwnerPastItsAdmissionDeadlineIsNamedWithItsObject(t *testing.T) {
	f := newFixture(t)
	late := &lateLeaseStore{Store: f.loc}
	c := newClusterWith(t, f, func(i int) locstore.Store {
		if i == 0 {
			return late
		}
		return nil
	}, 2, func(i int, cfg *config.Config) { clientRole0(i, cfg) })
	ctx := ctxT(t, 30*time.Second)
	// Created through the server's own Manager: the client has no route
	// cached, so its sends read the owner's lease.
	ref, err := c.m(1).CreateActor(ctx, "late-owner", testMoverType)
	if err != nil {
		t.Fatal(err)
	}
	owner, gen := c.nodes[1].Owner()
	late.lateFor(t, owner)

	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"send", func() error { return c.m(0).SendActor(ctx, ref, []byte("one")) }},
		{"request", func() error { _, err := c.m(0).RequestActor(ctx, ref, []byte("count")); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("%v, want ErrUnavailable", err)
			}
			var gone *OwnerGoneError
			if errors.As(err, &gone) {
				t.Fatalf("%v: the lease has not ended, the owner is not gone", err)
			}
			for _, want := range []string{`actor "late-owner"`, fmt.Sprintf("%s/%d", owner, gen),
				fmt.Sprintf("(node %x)", c.nodes[1].RID()), "has not renewed its owner lease in time"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%v: does not say %q", err, want)
				}
			}
		})
	}
}
