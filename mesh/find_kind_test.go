package mesh

import (
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
)

// Find of an id held by an object of another kind is ErrTypeMismatch
// whether that object is Ready or still Creating, as a message's route
// resolution and Create/GetOrCreate answer it (§7 table: "a different Spot
// kind or type"): the id can never be found as the kind asked for while
// that record holds it. Find checked the state first, so a Creating record
// of another kind answered ErrNotFound — "try again later" — and the same
// call answered ErrTypeMismatch once the creation finished.
func TestFindOfAnotherKindIsTypeMismatchAlsoWhileCreating(t *testing.T) {
	c := newCluster(t, 2, clientRole0)
	ctx := ctxT(t, 30*time.Second)
	const id = "find-kind"
	done := make(chan error, 1)
	go func() {
		_, err := c.m(0).GetOrCreateUserSpot(ctx, id, testSpotType, WithBody([]byte("wait:find-kind")))
		done <- err
	}()
	waitCreating(t, c, record.ObjectUserSpot, id)
	if _, err := c.m(0).FindInstance(ctx, id); !errors.Is(err, ErrTypeMismatch) || errors.Is(err, ErrNotFound) {
		t.Fatalf("FindInstance of a Creating User Spot: %v; want ErrTypeMismatch", err)
	}
	if _, err := c.m(0).FindSpot(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("FindSpot of a Creating User Spot: %v; want ErrNotFound (not Ready)", err)
	}
	close(c.probe.gate("find-kind"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := c.m(0).FindInstance(ctx, id); !errors.Is(err, ErrTypeMismatch) {
		t.Fatalf("FindInstance of a Ready User Spot: %v; want ErrTypeMismatch", err)
	}
}
