package transport

import (
	"strconv"
	"testing"
)

func item(i int) outItem { return outItem{frames: [][]byte{[]byte(strconv.Itoa(i))}, size: 1} }

func itemNo(t *testing.T, it outItem) int {
	t.Helper()
	n, err := strconv.Atoi(string(it.frames[0]))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The queue is FIFO across its compactions, refuses a record past its
// bound, holds no room it does not use, and gives back the room of a burst
// once drained.
func TestSendQueue(t *testing.T) {
	for _, tc := range []struct {
		name             string
		max, burst, take int // push burst, pop take, repeat
		rounds           int
	}{
		{"one at a time", 10, 1, 1, 100},
		{"bursts drained", 10_000, 5_000, 5_000, 3},
		{"half taken, refilled (compaction)", 100, 100, 50, 20},
		{"full", 8, 12, 8, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newSendQueue(tc.max)
			if cap(q.items) != 0 {
				t.Fatalf("a new queue holds room for %d records", cap(q.items))
			}
			next, want := 0, 0
			// take pops up to n records (all for n < 0), checking their order.
			take := func(n int) {
				for ; n != 0; n-- {
					it, ok := q.pop()
					if !ok {
						return
					}
					if got := itemNo(t, it); got != want {
						t.Fatalf("popped %d, want %d (FIFO)", got, want)
					}
					want++
				}
			}
			for range tc.rounds {
				for range tc.burst {
					full := q.len() >= tc.max
					ok := q.push(item(next))
					if ok == full {
						t.Fatalf("push %d with %d queued (bound %d): %v", next, q.len(), tc.max, ok)
					}
					if ok {
						next++
					}
					if q.len() > tc.max {
						t.Fatalf("%d queued, bound %d", q.len(), tc.max)
					}
				}
				take(tc.take)
			}
			take(-1) // the rest
			if want != next {
				t.Fatalf("popped %d records, pushed %d", want, next)
			}
			if q.len() != 0 || cap(q.items) > sendQueueKeep {
				t.Fatalf("drained queue: %d queued, room for %d (keeps at most %d)", q.len(), cap(q.items), sendQueueKeep)
			}
		})
	}
}

// A connection holds no room for records it has not queued: the channel
// this replaced allocated its whole bound (400 KB at the default 10,000
// records) per connection.
func TestPeerConnQueueGrowsOnDemand(t *testing.T) {
	allocs := testing.AllocsPerRun(10, func() { _ = newSendQueue(10_000) })
	if allocs > 1 {
		t.Fatalf("a send queue costs %v allocations before any record", allocs)
	}
	q := newSendQueue(10_000)
	if cap(q.items) != 0 {
		t.Fatalf("room for %d records before any was queued", cap(q.items))
	}
}

// popN takes at most n records, oldest first, and appends them to dst.
func TestSendQueuePopN(t *testing.T) {
	q := newSendQueue(1_000)
	for i := range 600 {
		q.push(item(i))
	}
	got := q.popN(nil, 256)
	got = q.popN(got, 256)
	if len(got) != 512 || q.len() != 88 {
		t.Fatalf("took %d, %d left; want 512 and 88", len(got), q.len())
	}
	got = q.popN(got, 256)
	if len(got) != 600 || q.len() != 0 {
		t.Fatalf("took %d, %d left; want 600 and 0", len(got), q.len())
	}
	for i, it := range got {
		if n := itemNo(t, it); n != i {
			t.Fatalf("record %d is %d", i, n)
		}
	}
	if got := q.popN(nil, 256); len(got) != 0 {
		t.Fatalf("an empty queue gave %d records", len(got))
	}
}
