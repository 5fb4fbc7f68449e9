package transport

import (
	"errors"
	"net"
	"runtime"
	"strconv"
	"sync"
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
					err := q.push(item(next))
					if ok := err == nil; ok == full || (!ok && !errors.Is(err, errQueueFull)) {
						t.Fatalf("push %d with %d queued (bound %d): %v", next, q.len(), tc.max, err)
					}
					if err == nil {
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
		_ = q.push(item(i))
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

// A queue handed on when its session ended (close) refuses later pushes,
// so a record pushed concurrently is either in what close returned or
// refused — never left in a queue nobody reads. Pushers race close here;
// every record they were told was queued must be among those taken.
func TestSendQueueCloseLosesNothing(t *testing.T) {
	for round := range 200 {
		q := newSendQueue(1 << 20)
		const pushers = 4
		var accepted [pushers][]int
		var wg sync.WaitGroup
		start := make(chan struct{})
		for p := range pushers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; ; i++ {
					n := p*1_000_000 + i
					err := q.push(item(n))
					if errors.Is(err, errQueueClosed) {
						return
					}
					if err != nil {
						t.Errorf("push: %v", err)
						return
					}
					accepted[p] = append(accepted[p], n)
				}
			}()
		}
		close(start)
		var taken []outItem
		for len(taken) < 50 {
			taken = q.popN(taken, 16)
			runtime.Gosched()
		}
		taken = q.close(taken)
		wg.Wait()
		if err := q.push(item(-1)); !errors.Is(err, errQueueClosed) {
			t.Fatalf("push after close: %v, want errQueueClosed", err)
		}
		checkAllTaken(t, round, accepted[:], taken)
	}
}

// The same race one level up, where it lost records: a send that passed
// enqueue's check of the connection's end just before the session ended,
// and queued its record after the link had taken what was not sent
// (takeUnsent). Every record enqueue accepted must be among those taken.
func TestEnqueueRacingTakeUnsentLosesNothing(t *testing.T) {
	for round := range 300 {
		c1, c2 := net.Pipe()
		zc := &zconn{g: newGuardConn(c1, frameLimits{}, 4096), raw: c1}
		pc := newPeerConn(zc, 1<<20, 0, 0) // no writer: everything stays queued
		const pushers = 4
		var accepted [pushers][]int
		var wg sync.WaitGroup
		for p := range pushers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					n := p*1_000_000 + i
					if err := pc.enqueue(outItem{frames: item(n).frames, size: 1, keep: true}); err != nil {
						return
					}
					accepted[p] = append(accepted[p], n)
				}
			}()
		}
		for pc.q.len() < 20*(round%5+1) {
			runtime.Gosched()
		}
		pc.end(errors.New("session ended"), func() {})
		taken := pc.takeUnsent()
		wg.Wait()
		checkAllTaken(t, round, accepted[:], taken)
		_ = c1.Close()
		_ = c2.Close()
	}
}

// checkAllTaken fails unless every record the pushers were told was
// queued (accepted, per pusher) is among those taken.
func checkAllTaken(t *testing.T, round int, accepted [][]int, taken []outItem) {
	t.Helper()
	seen := make(map[int]bool, len(taken))
	for _, it := range taken {
		seen[itemNo(t, it)] = true
	}
	for _, acc := range accepted {
		for _, n := range acc {
			if !seen[n] {
				t.Fatalf("round %d: record %d was accepted but is not among the %d taken", round, n, len(taken))
			}
		}
	}
}
