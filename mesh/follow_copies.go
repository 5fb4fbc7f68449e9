package mesh

import (
	"sync"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/spot"
)

// Copies of what Message Follow passes on before a move is confirmed.
//
// After the cutover the source passes arriving messages on to the target
// (§7.3), but the target runs nothing before its owner CAS, and a target
// whose attempt fails after relay-ready — its CAS refused or unconfirmed
// past the deadline, its process dead — drops them: a request is answered
// Unavailable (or times out with a dead target), a one-way message is gone
// although its sender was told it was accepted. So the source keeps a copy
// of every one-way message it passes on to that target until the store
// names the target (ActFreePayload drops the copies) or the move is taken
// back (recoverLocal puts them into the object after the relayed and
// unrelayed ones). Requests are not copied: the failed target answers them,
// and running one again would run it twice.
//
// A pass-on registers with the move before it asks the follow table
// (beginPassOn) and ends after its send (endPassOn); recoverLocal removes
// the follow record first and then waits for the registered pass-ons
// (takeCopies), so a message either is refused by the removed record or is
// copied before the copies are taken.

// passCopies is a source move's copies and its pass-ons in flight, under
// objects.mu.
type passCopies struct {
	open     bool   // copies are kept (from the cutover until confirmed or taken back)
	ownerGen uint64 // the move's new AuthorityOwnerGeneration: its departure in the follow table
	envs     []spot.Envelope
	passing  int        // pass-ons registered and not ended
	done     *sync.Cond // on objects.mu: passing fell to 0
}

// keepPassCopies starts keeping copies for s; called before its move is
// recorded in the follow table.
func (o *objects) keepPassCopies(s *sourceMove) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s.copies = passCopies{open: true, ownerGen: s.followMove().AuthorityOwnerGeneration, done: sync.NewCond(&o.mu)}
	if o.unconfirmed == nil {
		o.unconfirmed = map[follow.Key]*sourceMove{}
	}
	o.unconfirmed[followKey(s.kind, s.id)] = s
}

// beginPassOn registers a pass-on of a message for key with the move that
// keeps copies for it, if any; endPassOn must follow.
func (o *objects) beginPassOn(key follow.Key) *sourceMove {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.unconfirmed[key]
	if s != nil {
		s.copies.passing++
	}
	return s
}

// endPassOn ends a pass-on begun with beginPassOn. env, when not nil, is a
// one-way message passed on along the departure to ownerGen: copied when
// that is s's own (an earlier departure of the object carries senders of
// an earlier stay, whose messages come back here through it).
func (o *objects) endPassOn(s *sourceMove, ownerGen uint64, env *spot.Envelope) {
	if s == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if env != nil && s.copies.open && ownerGen == s.copies.ownerGen {
		s.copies.envs = append(s.copies.envs, *env)
	}
	if s.copies.passing--; s.copies.passing == 0 {
		s.copies.done.Broadcast()
	}
}

// dropCopies stops keeping copies for s and drops them: the store named
// the target, which runs what was passed on (or the move ended otherwise).
// Idempotent.
func (o *objects) dropCopies(s *sourceMove) {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := followKey(s.kind, s.id)
	if o.unconfirmed[key] == s {
		delete(o.unconfirmed, key)
	}
	s.copies.open, s.copies.envs = false, nil
}

// takeCopies stops keeping copies for s and returns them, after every
// pass-on registered with s has ended. Call it after the move's follow
// record is removed, when the source takes the object back.
func (o *objects) takeCopies(s *sourceMove) []spot.Envelope {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := followKey(s.kind, s.id)
	if o.unconfirmed[key] == s {
		delete(o.unconfirmed, key)
	}
	if !s.copies.open {
		return nil
	}
	for s.copies.passing > 0 {
		s.copies.done.Wait()
	}
	envs := s.copies.envs
	s.copies.open, s.copies.envs = false, nil
	return envs
}
