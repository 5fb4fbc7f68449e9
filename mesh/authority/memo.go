package authority

import (
	"bytes"
	"sync"

	"github.com/meshnode/meshnode/mesh/record"
)

// Results of pure functions that every creation and every move recomputes
// on the same inputs: the store keys of a node's capacity counters (a
// SHA-256 over a preimage built from five strings, two rows per counter,
// several counters per operation) and the decoded owner lease of a row
// whose bytes did not change since the last decode (a node's lease is
// rewritten only when renewed). Together they were ~10 % of the bytes a
// remote creation allocated (benchmarks/README.md). A memo holds at most
// memoMax entries and starts over when full, so a long-lived process that
// meets many node runs does not grow without bound.
const memoMax = 4096

// memo is a bounded concurrent map.
type memo[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

func (c *memo[K, V]) get(k K) (V, bool) {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	return v, ok
}

func (c *memo[K, V]) put(k K, v V) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= memoMax {
		c.m = make(map[K]V)
	}
	c.m[k] = v
	c.mu.Unlock()
}

// counterMemoKey is a CounterID in comparable form.
type counterMemoKey struct {
	mesh, rid  string
	gen        uint64
	class      SlotClass
	kind       record.ObjectKind
	stableType string
}

type counterKeyPair struct{ secured, active string }

var counterKeys memo[counterMemoKey, counterKeyPair]

// leaseMemo remembers, per row key, the last value decoded and its lease:
// a hit needs the very same bytes, so stores, namespaces and versions do
// not matter.
type leaseDecoded struct {
	value []byte
	lease record.OwnerLease
}

var leases memo[string, leaseDecoded]

// decodeLease is record.DecodeOwnerLease of the value of row key,
// remembered.
func decodeLease(key string, value []byte) (record.OwnerLease, error) {
	if d, ok := leases.get(key); ok && bytes.Equal(d.value, value) {
		return d.lease, nil
	}
	l, err := record.DecodeOwnerLease(value)
	if err != nil {
		return record.OwnerLease{}, err
	}
	leases.put(key, leaseDecoded{value: bytes.Clone(value), lease: l})
	return l, nil
}
