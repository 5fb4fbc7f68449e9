package transport

import (
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
)

// This file shares the MaxUnadmitted pool between source addresses
// (docs/TRANSPORT.md "Limits before admission").
//
// The pool used to be first come, first served: one host that dials again
// whenever a connection of its is closed — at the hello deadline, or at
// once when refused — took every slot the moment it freed, and a peer not
// admitted yet was refused at accept for as long as that host kept it up
// (TestSquattersDoNotLockOutNewPeers). The rule now: while the pool has
// room, anyone takes a slot, as before. When it is full, a connection from
// an address holding fewer slots than the address holding most evicts the
// oldest pending connection of that address (of the oldest such one when
// several hold as many); otherwise it is refused at accept as before. Under
// contention every address therefore converges to an equal share of
// MaxUnadmitted, and an address that holds none always gets one.
//
// A fixed per-address cap (say MaxUnadmitted/4) was not chosen: it refuses
// connections while the pool still has room, which hurts every mesh whose
// nodes share one address (several nodes on a host, peers behind one NAT,
// a whole mesh restarting on loopback) and does not hold off a squatter
// with a handful of addresses anyway; the fair share costs nothing until
// the pool is full and then gives each contending address its part.
//
// An address is an IPv4 address or an IPv6 /64 (a host usually has a whole
// /64 and may pick any address in it; an IPv4-mapped address is its IPv4
// address). No address rule holds off a squatter with as many addresses
// as MaxUnadmitted (a botnet, a routed IPv6 prefix): then new peers compete
// with it for slots, as before.

// pendingSlot is one connection's place in the MaxUnadmitted pool, from
// accept to admission or close. r.mu guards held and the pool's maps.
type pendingSlot struct {
	raw     net.Conn
	key     string // source address group (addrGroup)
	seq     uint64 // accept order: lower is older
	held    bool
	evicted atomic.Bool // closed to make room for another address
}

// addrGroup is the key a connection from addr shares its part of the
// unadmitted pool under: the IPv4 address, or the IPv6 /64.
func addrGroup(addr net.Addr) string {
	var ip netip.Addr
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	default:
		if ap, err := netip.ParseAddrPort(addr.String()); err == nil {
			ip = ap.Addr()
		}
	}
	ip = ip.Unmap()
	if !ip.IsValid() {
		return addr.String()
	}
	if ip.Is6() {
		if p, err := ip.WithZone("").Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

// takeSlotLocked gives a connection from key a slot in the unadmitted
// pool. When the pool is full it evicts (returns, no longer held) the
// oldest slot of the address holding most, if key holds fewer than that
// address; when it cannot, it returns ok false. r.mu is held.
func (r *routerSock) takeSlotLocked(raw net.Conn, key string) (s, evicted *pendingSlot, ok bool) {
	if r.unadm >= r.p.maxUnadmitted {
		evicted = r.evictionVictimLocked(key)
		if evicted == nil {
			return nil, nil, false
		}
		r.releaseSlotLocked(evicted)
		evicted.evicted.Store(true)
	}
	if r.pending == nil {
		r.pending = make(map[string]map[*pendingSlot]struct{})
	}
	r.slotSeq++
	s = &pendingSlot{raw: raw, key: key, seq: r.slotSeq, held: true}
	set := r.pending[key]
	if set == nil {
		set = make(map[*pendingSlot]struct{})
		r.pending[key] = set
	}
	set[s] = struct{}{}
	r.unadm++
	return s, evicted, true
}

// evictionVictimLocked picks the slot a connection from key may evict from
// the full pool: the oldest of the address holding most slots, provided
// key holds fewer; nil otherwise.
func (r *routerSock) evictionVictimLocked(key string) *pendingSlot {
	most := 0
	var victim *pendingSlot
	for _, set := range r.pending {
		if len(set) < most {
			continue
		}
		var oldest *pendingSlot
		for s := range set {
			if oldest == nil || s.seq < oldest.seq {
				oldest = s
			}
		}
		if len(set) > most || oldest.seq < victim.seq {
			most, victim = len(set), oldest
		}
	}
	if victim == nil || len(r.pending[key]) >= most {
		return nil
	}
	return victim
}

// releaseSlotLocked gives s back to the pool (admission, close, eviction);
// it may run more than once. r.mu is held.
func (r *routerSock) releaseSlotLocked(s *pendingSlot) {
	if s == nil || !s.held {
		return
	}
	s.held = false
	r.unadm--
	set := r.pending[s.key]
	delete(set, s)
	if len(set) == 0 {
		delete(r.pending, s.key)
	}
}

// evict closes a connection whose slot went to another address: its
// handshake or its wait for hello fails, and its serve reports it
// (evictedCause).
func (r *routerSock) evict(s *pendingSlot) {
	r.evictedUnadmitted.Add(1)
	_ = s.raw.Close()
}

// evictedCause wraps err, the failure of a connection evicted from the
// unadmitted pool, so that its close cause says so and matches
// ErrUnadmittedLimit.
func (r *routerSock) evictedCause(err error) error {
	return fmt.Errorf("%w: closed to make room for a connection from another address (%d connections pending hello, transport.max_unadmitted): %w",
		ErrUnadmittedLimit, r.p.maxUnadmitted, err)
}
