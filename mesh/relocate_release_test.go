package mesh

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// lostReleaseFaults is casFaults whose source reservation release loses
// its answer too, after a read of the reservation and its counters that
// predates the owner CAS (one the store served before the CAS landed),
// so that the release batch is
// refused by its conditions, its answer lost, and the executor's re-read
// finds the reservation gone — which both a release and the target's
// owner CAS leave.
type lostReleaseFaults struct {
	*casFaults

	mu       sync.Mutex
	stale    map[string]locstore.ReadResult // the rows the owner CAS changes but the record, as they were before it
	released bool                           // a release batch has been seen
	lost     int                            // release batches whose answer was lost
}

func (s *lostReleaseFaults) isRelease(req locstore.WriteRequest) bool {
	del := false
	for _, m := range req.Mutations {
		if m.Kind == locstore.MutPut && m.Key == s.authKey {
			return false
		}
		del = del || (m.Kind == locstore.MutDelete && strings.HasPrefix(m.Key, record.KindPrefix(authority.KindRelocationReservation)))
	}
	return del
}

func (s *lostReleaseFaults) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	s.casFaults.mu.Lock()
	newOwner := s.casFaults.authKey != "" && s.isNewOwner(req)
	s.casFaults.mu.Unlock()
	if newOwner {
		s.mu.Lock()
		if s.stale == nil {
			s.stale = map[string]locstore.ReadResult{}
			for _, m := range req.Mutations {
				if m.Key == s.authKey {
					continue
				}
				rr, err := s.casFaults.Store.Read(ctx, m.Key)
				if err != nil {
					s.mu.Unlock()
					return locstore.WriteResult{}, err
				}
				s.stale[m.Key] = rr
			}
		}
		s.mu.Unlock()
		return s.casFaults.Write(ctx, req)
	}
	s.mu.Lock()
	lose := s.stale != nil && !s.released && s.isRelease(req)
	if lose {
		s.released = true
		s.lost++
	}
	s.mu.Unlock()
	if !lose {
		return s.casFaults.Write(ctx, req)
	}
	_, _ = s.casFaults.Store.Write(context.WithoutCancel(ctx), req) // refused: the CAS consumed the reservation
	return locstore.WriteResult{}, errStoreDown
}

func (s *lostReleaseFaults) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	s.mu.Lock()
	rr, serve := s.stale[key]
	serve = serve && !s.released
	s.mu.Unlock()
	if serve {
		return rr, nil
	}
	return s.casFaults.Read(ctx, key)
}

func (s *lostReleaseFaults) lostReleases() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// The target's owner CAS applies with its answer lost (the record's reads
// failing past the Restore deadline, as in
// TestRelocationOwnerCASAppliedPastDeadline), and the source's reservation
// release at its deadline — planned on a read of the reservation from
// before the CAS — loses its answer as well; the executor's re-read finds
// the reservation gone. Only the owner read can tell a release from the
// CAS that consumed it: the source stays held until the record answers,
// then reports Moved. Before, the re-read was taken for the release: the
// source reopened the object while the target, once the store answered,
// opened it too — two instances.
func TestRelocationReleaseLostAfterTheOwnerCAS(t *testing.T) {
	onFailStores(t, func(t *testing.T, f *fixture, loc locstore.Store) {
		faults := &lostReleaseFaults{casFaults: &casFaults{Store: loc}}
		l := startLateCAS(t, f, faults, faults.casFaults, "release-lost")
		deadline := time.Now().Add(10 * time.Second)
		for faults.lostReleases() == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := faults.lostReleases(); n != 1 {
			t.Fatalf("%d release answers lost, want 1 (the source's release after its deadline)", n)
		}
		if failed, applied := faults.counts(); failed != 1 || applied != 1 {
			t.Fatalf("%d owner CAS batches failed (%d applied; %v), want 1 (1)", failed, applied, faults.notApplied)
		}
		// The source must not serve while the record cannot be read.
		time.Sleep(300 * time.Millisecond)
		for i, n := range l.c.nodes {
			if state, ok := n.obj.stateOf(spot.Key{ID: l.ref.ActorID}); ok && state == hostServing {
				t.Fatalf("node %d serves %s before the record decided the move", i, l.ref.ActorID)
			}
		}
		l.answerAndCheckMoved(t, faults.casFaults)
	})
}
