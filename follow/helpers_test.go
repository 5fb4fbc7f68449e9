package follow

import (
	"sync"
	"time"
)

// manualClock is a Clock that moves only when Advance is called.
type manualClock struct {
	mu  sync.Mutex
	now time.Duration
}

func (c *manualClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now += d
	c.mu.Unlock()
}

// start is the manual clock's first reading: not zero, so that a zero
// deadline is visibly in the past.
const start = time.Hour

func newClock() *manualClock { return &manualClock{now: start} }

var (
	actorA = Key{Kind: KindActor, ID: "a"}
	spotA  = Key{Kind: KindSpot, ID: "a"} // same ID, other kind
)

// ready returns a valid Ready for key under generations obj/own, owned by
// owner-1 lease 1 on node n1, valid for an hour past start.
func ready(key Key, obj, own uint64) Ready {
	return Ready{
		Key:                      key,
		ObjectGeneration:         obj,
		AuthorityOwnerGeneration: own,
		StoreVersion:             "v1",
		Owner:                    Owner{ID: "owner-1", LeaseGeneration: 1},
		ValidUntil:               2 * start,
		Route:                    Route{NodeRID: []byte("n1"), NodeGeneration: 1, Endpoint: "tcp://127.0.0.1:7001"},
	}
}

// move returns a valid Move of key (object generation 1) from owner
// generation prev to next on node rid.
func move(key Key, prev, next uint64, rid string) Move {
	return Move{
		Key:                              key,
		ObjectGeneration:                 1,
		PreviousAuthorityOwnerGeneration: prev,
		AuthorityOwnerGeneration:         next,
		Owner:                            Owner{ID: "owner-" + rid, LeaseGeneration: 3},
		Route:                            Route{NodeRID: []byte(rid), NodeGeneration: 2, Endpoint: "tcp://" + rid + ":7000"},
	}
}
