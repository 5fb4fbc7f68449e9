package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/meshnode/meshnode/spot"
)

// StockType is the stable type of the stock Actor. It is the name the
// mesh stores with every object of the type and that every node offering
// the type registers, so it must never change once objects exist.
const StockType = "inventory.stock"

// holdTimer prefixes the name of the timer that releases a hold; the rest
// of the name is the hold id. A timer firing carries only its name, so the
// name says which hold it is for.
const holdTimer = "release:"

// stock is the Actor of one SKU ("sku:apple"): how many units are on hand
// and which of them are held for checkouts in progress. Its fields are
// exported only so that encoding/json can snapshot them.
//
// The protocol is plain text, one command per message:
//
//	send or request "add <n>"              → n more units on hand
//	request "reserve <n> <duration>"       → holds n units, replies the hold id
//	                                         ("out of stock" when too few are free);
//	                                         the hold is released after <duration>
//	request "confirm <hold>"               → the held units are sold: "ok",
//	                                         or "expired" when the hold is gone
//	request "get"                          → "on_hand=<n> held=<n> available=<n> moves=<n>"
//
// Anything else is an error, which the requester sees as mesh.ErrRequestFailed.
type stock struct {
	OnHand   int            `json:"on_hand"`
	Holds    map[string]int `json:"holds"` // hold id → units
	NextHold int            `json:"next_hold"`
	// Moves counts the times the object arrived on a node by relocation
	// (see Relocated). It is application state like the rest, so it
	// travels in the snapshot.
	Moves int `json:"moves"`
}

// Receive runs one message or timer. The runtime runs one turn of an
// object at a time, so the handler needs no lock of its own.
func (s *stock) Receive(t *spot.Turn, env spot.Envelope) error {
	if env.Kind == spot.Timer {
		id, ok := strings.CutPrefix(env.Timer, holdTimer)
		if !ok {
			return fmt.Errorf("stock %s: unknown timer %q", t.ID(), env.Timer)
		}
		delete(s.Holds, id) // not confirmed in time: the units are free again
		return nil
	}
	args := strings.Fields(string(env.Body))
	if len(args) == 0 {
		return fmt.Errorf("stock %s: empty message", t.ID())
	}
	var reply string
	switch {
	case args[0] == "add" && len(args) == 2:
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 0 {
			return fmt.Errorf("stock %s: bad quantity %q", t.ID(), args[1])
		}
		s.OnHand += n
		reply = s.status()
	case args[0] == "reserve" && len(args) == 3:
		n, err := strconv.Atoi(args[1])
		if err != nil || n <= 0 {
			return fmt.Errorf("stock %s: bad quantity %q", t.ID(), args[1])
		}
		hold, err := time.ParseDuration(args[2])
		if err != nil || hold <= 0 {
			return fmt.Errorf("stock %s: bad hold duration %q", t.ID(), args[2])
		}
		if s.available() < n {
			reply = "out of stock"
			break
		}
		id := "hold-" + strconv.Itoa(s.NextHold+1)
		// A one-shot timer (period 0). It fires as a Timer envelope, in
		// mailbox order, on whichever node owns the object by then: a
		// relocation carries pending timers with their remaining time.
		// Armed before the hold is recorded: an object has at most
		// spot.MaxTimers timers, and a hold without its timer would never
		// expire.
		if err := t.SetTimer(holdTimer+id, hold, 0); errors.Is(err, spot.ErrTooManyTimers) {
			reply = "too many open holds"
			break
		} else if err != nil {
			return err
		}
		s.NextHold++
		s.Holds[id] = n
		reply = id
	case args[0] == "confirm" && len(args) == 2:
		n, ok := s.Holds[args[1]]
		if !ok {
			reply = "expired"
			break
		}
		s.OnHand -= n
		delete(s.Holds, args[1])
		t.CancelTimer(holdTimer + args[1])
		reply = "ok"
	case args[0] == "get" && len(args) == 1:
		reply = s.status()
	default:
		return fmt.Errorf("stock %s: unknown command %q", t.ID(), env.Body)
	}
	if env.Kind != spot.Request {
		return nil // a one-way message has nobody to answer
	}
	// A request must be answered exactly once; returning without Reply
	// fails it with spot.ErrNoReply.
	return t.Reply([]byte(reply))
}

// Relocated implements spot.Relocated: the target node calls it once the
// object has arrived, before any of its messages or timers runs there.
// Real applications reopen node-local resources here.
func (s *stock) Relocated(_ context.Context, _ spot.RelocationInfo) error {
	s.Moves++
	return nil
}

func (s *stock) held() int {
	n := 0
	for _, h := range s.Holds {
		n += h
	}
	return n
}

func (s *stock) available() int { return s.OnHand - s.held() }

func (s *stock) status() string {
	return fmt.Sprintf("on_hand=%d held=%d available=%d moves=%d", s.OnHand, s.held(), s.available(), s.Moves)
}

// stockSnapshots is the SnapshotAdapter of PolicyPreserveState: it turns a
// live stock into bytes on the node the object leaves and back into a
// stock on the node it arrives at. The framework calls Snapshot only while
// the object is held (no turn running), so it reads the fields unlocked.
type stockSnapshots struct{}

func (stockSnapshots) Snapshot(h spot.Handler) ([]byte, error) {
	s, ok := h.(*stock)
	if !ok {
		return nil, fmt.Errorf("stock snapshot: unexpected handler %T", h)
	}
	return json.Marshal(s)
}

func (stockSnapshots) Restore(_ context.Context, req spot.CreateRequest, state []byte) (spot.Handler, error) {
	s := &stock{}
	if err := json.Unmarshal(state, s); err != nil {
		return nil, fmt.Errorf("stock %s: restore: %w", req.ID, err)
	}
	if s.Holds == nil {
		s.Holds = map[string]int{}
	}
	return s, nil
}

// stockFactory describes the stock type. The creation body, when given, is
// the initial quantity on hand.
func stockFactory() spot.Factory {
	return spot.Factory{
		StableType: StockType,
		Kind:       spot.KindActor,
		// The state moves with the object: without it a relocated stock
		// would forget what it holds (PolicyRecreate), or could not move
		// at all (PolicyDisabled).
		Policy:   spot.PolicyPreserveState,
		Snapshot: stockSnapshots{},
		// New may run twice for one id and generation (a node can die in
		// the middle of a creation), so it only builds and has no side
		// effects.
		New: func(_ context.Context, req spot.CreateRequest) (spot.Handler, error) {
			s := &stock{Holds: map[string]int{}}
			if len(req.Body) == 0 {
				return s, nil
			}
			n, err := strconv.Atoi(string(req.Body))
			if err != nil || n < 0 {
				// Declined is the factory's "no": the creation is rolled
				// back and the caller gets mesh.ErrRejected with this
				// reason. Any other error is a failure (ErrCreateFailed).
				return nil, &spot.Declined{Reason: fmt.Sprintf("initial quantity %q is not a count", req.Body)}
			}
			s.OnHand = n
			return s, nil
		},
	}
}
