package mesh

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// §7.2: Destroy and Close act only on the exact generation given — false
// when no record exists, ErrStaleGeneration when another generation exists,
// ErrMoving when the object is moving — locally on the owner, and remotely
// through the owner (command 48 for a User Spot; the destroy control request
// for an Actor). The record and its capacity go in one batch; the instance
// closes and refuses messages.
func TestDestroyAndCloseExactGeneration(t *testing.T) {
	c := clientAndServer(t) // node 0 owns nothing: every end below is remote
	ctx := ctxT(t, 30*time.Second)
	owner := c.nodes[1]
	for _, remote := range []bool{true, false} {
		m := c.m(0)
		if !remote {
			m = c.m(1)
		}
		name := map[bool]string{true: "remote", false: "local"}[remote]
		t.Run("actor "+name, func(t *testing.T) {
			id := "doomed-" + name
			ref, err := m.CreateActor(ctx, id, testActorType)
			if err != nil {
				t.Fatal(err)
			}
			stale := ref
			stale.ObjectGeneration++
			_, err = m.Destroy(ctx, stale)
			wantIs(t, err, ErrStaleGeneration)

			owner.obj.setMoving(actorKey(id), true)
			_, err = m.Destroy(ctx, ref)
			wantIs(t, err, ErrMoving)
			owner.obj.setMoving(actorKey(id), false)

			ok, err := m.Destroy(ctx, ref)
			if err != nil || !ok {
				t.Fatalf("Destroy = %v, %v", ok, err)
			}
			if rowOf(t, c, record.ObjectActor, id).Found {
				t.Fatal("record left after Destroy")
			}
			if _, hosted := owner.obj.hostedFor(actorKey(id)); hosted {
				t.Fatal("instance left after Destroy")
			}
			_, err = m.RequestActor(ctx, ref, []byte("x"))
			wantIs(t, err, ErrNotFound)
			ok, err = m.Destroy(ctx, ref)
			if err != nil || ok {
				t.Fatalf("second Destroy = %v, %v; want false, nil", ok, err)
			}
			// A newer generation under the same id is not touched by the old ref.
			ref2, err := m.CreateActor(ctx, id, testActorType)
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Destroy(ctx, ref)
			wantIs(t, err, ErrStaleGeneration)
			if _, err := m.RequestActor(ctx, ref2, []byte("alive")); err != nil {
				t.Fatalf("the newer generation was harmed: %v", err)
			}
		})
		t.Run("spot "+name, func(t *testing.T) {
			ref, err := m.CreateUserSpot(ctx, testSpotType)
			if err != nil {
				t.Fatal(err)
			}
			key := spot.Key{Spot: true, ID: ref.SpotID}
			stale := ref
			stale.ObjectGeneration++
			_, err = m.Close(ctx, stale)
			wantIs(t, err, ErrStaleGeneration)
			owner.obj.setMoving(key, true)
			_, err = m.Close(ctx, ref)
			wantIs(t, err, ErrMoving)
			owner.obj.setMoving(key, false)
			ok, err := m.Close(ctx, ref)
			if err != nil || !ok {
				t.Fatalf("Close = %v, %v", ok, err)
			}
			if rowOf(t, c, record.ObjectUserSpot, ref.SpotID).Found {
				t.Fatal("record left after Close")
			}
			if _, hosted := owner.obj.hostedFor(key); hosted {
				t.Fatal("instance left after Close")
			}
			ok, err = m.Close(ctx, ref)
			if err != nil || ok {
				t.Fatalf("second Close = %v, %v; want false, nil", ok, err)
			}
		})
	}
	// Every slot came back: two actors remain (the re-created ones).
	assertNoReservedSlots(t, c)
}
