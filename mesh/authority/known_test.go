package authority

import (
	"context"
	"errors"
	"testing"
)

// ReserveRequest.Known spares the first read; a stale Known (the row was
// created meanwhile) only costs a conflict and a re-read, never a second
// record.
func TestReserveKnownRow(t *testing.T) {
	ctx := context.Background()
	s, _ := newMemory(t)
	putLease(t, s, ownerA)
	e := newExecutor(t, s)
	key, err := room.Key()
	if err != nil {
		t.Fatal(err)
	}
	missing := AuthorityRow{Key: key} // what a caller read before anyone created it

	res, err := e.Reserve(ctx, ReserveRequest{Object: room, Target: Target{Node: nodeA, Owner: ownerA}, Creation: pending("k-1"), Known: &missing})
	if err != nil || res.Attempts != 1 {
		t.Fatalf("reserve with a fresh Known: %+v, %v", res, err)
	}
	first := readAuthorityRow(t, s, room)

	stale := missing // still says Missing, but the record exists now
	_, err = e.Reserve(ctx, ReserveRequest{Object: room, Target: Target{Node: nodeA, Owner: ownerA}, Creation: pending("k-2"), Known: &stale})
	var ae *Error
	if !errors.Is(err, ErrConflict) || !errors.As(err, &ae) || ae.Current == nil {
		t.Fatalf("reserve with a stale Known: %v, want ErrConflict carrying the current row", err)
	}
	if now := readAuthorityRow(t, s, room); now.Version != first.Version {
		t.Fatalf("a stale Known changed the record: version %s -> %s", first.Version, now.Version)
	}
}
