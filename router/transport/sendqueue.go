package transport

import (
	"errors"
	"sync"
)

// sendQueue is a connection's FIFO of data records, bounded in records (the
// byte bound is peerConn's). It holds room for what is queued, not for its
// bound: the buffered channel it replaces allocated its whole bound up
// front — 400 KB per connection at the default send_queue_limit of 10,000,
// idle or not, so a node linked to 1,000 peers carried ~800 MB of empty
// queues (docs/TRANSPORT.md).
type sendQueue struct {
	mu    sync.Mutex
	items []outItem // queued from head on
	head  int
	max   int // records
	// closed: the queue was taken for good (close); nothing is queued
	// after that. The check is under mu with the append, so a record is
	// either taken by close or refused — never left behind in a queue
	// nobody reads.
	closed bool
}

// sendQueueKeep is the capacity a drained queue keeps for the next burst;
// a larger one is given back.
const sendQueueKeep = 64

func newSendQueue(max int) *sendQueue { return &sendQueue{max: max} }

// push appends it unless the queue holds max records already
// (errQueueFull) or was closed (errQueueClosed).
func (q *sendQueue) push(it outItem) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return errQueueClosed
	}
	if len(q.items)-q.head >= q.max {
		return errQueueFull
	}
	if len(q.items) == cap(q.items) && q.head > 0 && 2*q.head >= len(q.items) {
		// Reuse the taken half instead of growing.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, it)
	return nil
}

// errQueueFull is push's answer at the record bound.
var errQueueFull = errors.New("transport: send queue full")

// close takes every record still queued, in order, appended to dst, and
// refuses every later push: the connection's session ended and what it
// did not send is handed on (peerConn.takeUnsent).
func (q *sendQueue) close(dst []outItem) []outItem {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	dst = append(dst, q.items[q.head:]...)
	q.items, q.head = nil, 0
	return dst
}

// pushOver appends it whatever the bound: records a sender was already told
// were sent (peerConn.requeue) are not refused; new sends see a full queue
// until they drain.
func (q *sendQueue) pushOver(it outItem) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items = append(q.items, it)
}

// pop takes the oldest record.
func (q *sendQueue) pop() (outItem, bool) {
	var one [1]outItem
	if got := q.popN(one[:0], 1); len(got) == 1 {
		return got[0], true
	}
	return outItem{}, false
}

// popN moves up to n of the oldest records to dst (appended) under one
// lock: the writer takes a batch at a time instead of locking per record
// against the senders.
func (q *sendQueue) popN(dst []outItem, n int) []outItem {
	q.mu.Lock()
	defer q.mu.Unlock()
	end := min(q.head+n, len(q.items))
	dst = append(dst, q.items[q.head:end]...)
	clear(q.items[q.head:end]) // the frames are the writer's now
	q.head = end
	if q.head == len(q.items) {
		if cap(q.items) > sendQueueKeep {
			q.items = nil
		} else {
			q.items = q.items[:0]
		}
		q.head = 0
	}
	return dst
}

// len is the number of records queued.
func (q *sendQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) - q.head
}
