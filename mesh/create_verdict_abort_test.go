package mesh

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// refuseOnceStore refuses the first write that touches key (once armed),
// as Redis at its maxmemory does: nothing written, locstore.ErrWriteRefused
// — a store error, not a conflict and not an unknown outcome.
type refuseOnceStore struct {
	locstore.Store
	key     atomic.Pointer[string]
	refused atomic.Int32
}

func (s *refuseOnceStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	if key := s.key.Load(); key != nil {
		for _, m := range req.Mutations {
			if m.Key == *key && s.key.CompareAndSwap(key, nil) {
				s.refused.Add(1)
				return locstore.WriteResult{}, &locstore.ProviderError{Provider: "test", Op: "write", Refused: true,
					Err: errors.New("OOM command not allowed (refused, nothing written: test)")}
			}
		}
	}
	return s.Store.Write(ctx, req)
}

func (s *refuseOnceStore) ReadMany(ctx context.Context, keys []string) ([]locstore.ReadResult, error) {
	return locstore.ReadMany(ctx, s.Store, keys)
}

// A factory's verdict (spot.Declined, or an error) whose Abort the store
// refuses outright: the application has answered, so the creator gets that
// answer (ErrRejected / ErrCreateFailed) and the factory runs once. Until
// 2026-12-07 the target answered a framework failure, the creator returned
// the reservation itself and placed the creation on the other server,
// whose factory ran a second time for a request the application had
// already rejected (review). The verdict is recorded once the store takes
// the write: a retry under the same OperationId then reads it.
func runVerdictWhoseAbortIsRefused(t *testing.T, loc locstore.Store) {
	for _, tc := range []struct {
		name, body string
		want       error
	}{
		{"rejected", "decline:not today", ErrRejected},
		{"failed", "fail", ErrCreateFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			inner := storeOf(f, loc)
			rs := &refuseOnceStore{Store: inner}
			// Node 0 (the creator, a client) writes the Reserve on the
			// plain store; both servers' first write of the record is the
			// Abort recording the verdict, whichever of them is placed.
			c := newClusterWith(t, f, func(i int) locstore.Store {
				if i == 0 {
					return inner
				}
				return rs
			}, 3, clientRole0)
			ctx := ctxT(t, 30*time.Second)
			id := "verdict-refused-" + tc.name
			key, err := record.AuthorityKey(record.IdentityActor, id)
			if err != nil {
				t.Fatal(err)
			}
			rs.key.Store(&key)
			op := WithOperationID([16]byte{0: 3, 15: byte(len(tc.name))})
			_, err = c.m(0).CreateActor(ctx, id, testActorType, op, WithBody([]byte(tc.body)))
			if !errors.Is(err, tc.want) {
				t.Fatalf("CreateActor = %v; want %v", err, tc.want)
			}
			if rs.refused.Load() != 1 {
				t.Fatalf("%d writes refused, want the verdict's Abort", rs.refused.Load())
			}
			if runs := c.probe.runCount(id); runs != 1 {
				t.Fatalf("the factory ran %d times, want once", runs)
			}
			// The verdict is recorded once the store takes it: the record
			// goes, and a retry of the same request reads the verdict.
			waitUntil(t, "the reservation to be returned", func() bool {
				return !rowOf(t, c, record.ObjectActor, id).Found
			})
			if _, err := c.m(0).CreateActor(ctx, id, testActorType, op, WithBody([]byte(tc.body))); !errors.Is(err, tc.want) {
				t.Fatalf("retry under the same OperationId = %v; want %v", err, tc.want)
			}
			if runs := c.probe.runCount(id); runs != 1 {
				t.Fatalf("the factory ran %d times after the retry, want once", runs)
			}
		})
	}
}

func TestVerdictWhoseAbortIsRefused(t *testing.T) { runVerdictWhoseAbortIsRefused(t, nil) }

func TestVerdictWhoseAbortIsRefusedRedis(t *testing.T) {
	runVerdictWhoseAbortIsRefused(t, newRedisLocation(t))
}
