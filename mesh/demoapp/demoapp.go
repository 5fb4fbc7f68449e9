// Package demoapp holds the factories the stock meshnode binary registers: a
// counter Actor and a chat-room User Spot (Register), and a session Instance
// Spot (RegisterInstances, session.go). They double as the example of how
// an application plugs its own object types into a node: build spot.Factory
// values and register them (Register here, or spot.MustRegister from an
// init function), then run the node through mesh/cli.Main.
package demoapp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshnode/meshnode/spot"
)

// Stable types of the demo factories.
const (
	CounterType  = "demo.counter"
	ChatRoomType = "demo.chat-room"
)

// Register adds the demo factories to r.
func Register(r *spot.Registry) error {
	return errors.Join(r.Register(CounterFactory()), r.Register(ChatRoomFactory()))
}

// Counter is an Actor holding one integer, and a sequence check for one
// sender (how the demo sees lost, doubled or reordered messages).
//
//	send "inc" or "add <n>"  → adds
//	request "get"            → replies the decimal value
//	send "seq <n>"           → adds 1 and checks n against the last seq:
//	                           n = last+1 is in order; n > last+1 leaves
//	                           the numbers between missing; a missing n
//	                           arriving later is counted reordered, any
//	                           other n ≤ last duplicated
//	request "seq"            → replies "<last> <duplicated> <reordered> <missing>"
type Counter struct {
	mu    sync.Mutex // the runtime runs one turn at a time; the lock is for Snapshot
	value int64
	seq   seqCheck
}

// seqCheck is the counter's sequence check; it moves with the value.
// missing holds the numbers skipped and not seen since (ascending, at most
// maxMissing; overflow counts the rest), so that a late arrival is told
// from a duplicate and a message that never came from one still on its
// way.
type seqCheck struct {
	last, duplicated, reordered int64
	overflow                    int64
	missing                     []int64
}

// maxMissing bounds the skipped numbers a counter remembers.
const maxMissing = 4096

func (s *seqCheck) see(n int64) {
	switch {
	case n == s.last+1:
		s.last = n
	case n > s.last+1:
		gap := n - s.last - 1
		keep := min(gap, int64(maxMissing-len(s.missing)))
		for m := s.last + 1; m < s.last+1+keep; m++ {
			s.missing = append(s.missing, m)
		}
		s.overflow += gap - keep
		s.last = n
	default:
		if i, ok := slices.BinarySearch(s.missing, n); ok {
			if s.missing = slices.Delete(s.missing, i, i+1); len(s.missing) == 0 {
				s.missing = nil
			}
			s.reordered++ // it came after a later one
		} else {
			s.duplicated++
		}
	}
}

// missed is how many numbers up to last have not been seen.
func (s *seqCheck) missed() int64 { return int64(len(s.missing)) + s.overflow }

func (s *seqCheck) empty() bool {
	return s.last == 0 && s.duplicated == 0 && s.reordered == 0 && s.missed() == 0
}

// Receive handles one message.
func (c *Counter) Receive(t *spot.Turn, env spot.Envelope) error {
	cmd := strings.TrimSpace(string(env.Body))
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case cmd == "inc":
		c.value++
	case strings.HasPrefix(cmd, "add "):
		n, err := strconv.ParseInt(strings.TrimSpace(cmd[4:]), 10, 64)
		if err != nil {
			return fmt.Errorf("counter: bad add %q: %w", cmd, err)
		}
		c.value += n
	case strings.HasPrefix(cmd, "seq "):
		n, err := strconv.ParseInt(strings.TrimSpace(cmd[4:]), 10, 64)
		if err != nil {
			return fmt.Errorf("counter: bad seq %q: %w", cmd, err)
		}
		c.value++
		c.seq.see(n)
	case cmd == "seq":
		if env.Kind == spot.Request {
			return t.Reply([]byte(fmt.Sprintf("%d %d %d %d", c.seq.last, c.seq.duplicated, c.seq.reordered, c.seq.missed())))
		}
		return nil
	case cmd == "get":
	default:
		return fmt.Errorf("counter: unknown command %q", cmd)
	}
	if env.Kind == spot.Request {
		return t.Reply([]byte(strconv.FormatInt(c.value, 10)))
	}
	return nil
}

// Value returns the current value.
func (c *Counter) Value() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.value
}

type counterSnapshots struct{}

// The counter's state: value, then — when a sequence was seen — last,
// duplicated, reordered, overflow and the missing numbers; 8-byte
// big-endian integers each. An 8-byte state (value only) is what counters
// without a sequence carry; a 32-byte one (value, last, duplicated,
// reordered) what earlier versions wrote.
func (counterSnapshots) Snapshot(h spot.Handler) ([]byte, error) {
	c, ok := h.(*Counter)
	if !ok {
		return nil, fmt.Errorf("counter snapshot: unexpected handler %T", h)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := binary.BigEndian.AppendUint64(nil, uint64(c.value))
	if !c.seq.empty() {
		for _, v := range append([]int64{c.seq.last, c.seq.duplicated, c.seq.reordered, c.seq.overflow}, c.seq.missing...) {
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		}
	}
	return b, nil
}

func (counterSnapshots) Restore(_ context.Context, _ spot.CreateRequest, state []byte) (spot.Handler, error) {
	n := len(state) / 8
	if len(state)%8 != 0 || n == 0 || n == 2 || n == 3 || n > 5+maxMissing {
		return nil, fmt.Errorf("counter restore: state is %d bytes, want 8, 32, or 40 and up to %d missing numbers of 8", len(state), maxMissing)
	}
	at := func(i int) int64 { return int64(binary.BigEndian.Uint64(state[8*i:])) }
	c := &Counter{value: at(0)}
	if n >= 4 {
		c.seq = seqCheck{last: at(1), duplicated: at(2), reordered: at(3)}
	}
	if n >= 5 {
		c.seq.overflow = at(4)
		for i := 5; i < n; i++ {
			c.seq.missing = append(c.seq.missing, at(i))
		}
	}
	return c, nil
}

// CounterFactory builds counters; their value moves with them
// (PreserveStateWith).
func CounterFactory() spot.Factory {
	return spot.Factory{
		StableType: CounterType,
		Kind:       spot.KindActor,
		Policy:     spot.PolicyPreserveState,
		Snapshot:   counterSnapshots{},
		New: func(_ context.Context, req spot.CreateRequest) (spot.Handler, error) {
			if len(req.Body) == 0 {
				return &Counter{}, nil
			}
			n, err := strconv.ParseInt(string(req.Body), 10, 64)
			if err != nil {
				return nil, &spot.Declined{Reason: fmt.Sprintf("initial value %q is not an integer", req.Body)}
			}
			return &Counter{value: n}, nil
		},
	}
}

// ChatRoom is a User Spot keeping the last messages posted to it.
//
//	send <text>                 → appends
//	send "/later <dur> <text>"  → appends <text> when a one-shot timer fires
//	                              after <dur> (a Go duration, e.g. 2s)
//	request "history"           → replies the kept lines joined by '\n'
//
// "/later" is how the demo shows that a room's timers move with it while
// its lines do not (RecreateOnRelocation): the text travels in the timer's
// name, not in the room's state.
type ChatRoom struct {
	lines []string
}

// MaxHistory bounds a room's kept lines.
const MaxHistory = 100

// MaxLaterText bounds the text of a "/later" line: it becomes part of a
// timer name, and a timer name travels in the Restore payload (≤ 65535
// bytes, docs/RESTORE-PAYLOAD.md).
const MaxLaterText = 1024

// LaterCommand prefixes a chat line that arms a timer instead of appending.
const LaterCommand = "/later "

// laterTimer prefixes the name of a "/later" timer; the rest is the text.
const laterTimer = "later:"

// ErrBadLater is a malformed "/later" line.
var ErrBadLater = errors.New("chat room: bad /later line")

// Receive handles one message.
func (r *ChatRoom) Receive(t *spot.Turn, env spot.Envelope) error {
	if env.Kind == spot.Timer {
		text, ok := strings.CutPrefix(env.Timer, laterTimer)
		if !ok {
			return fmt.Errorf("chat room: unknown timer %q", env.Timer)
		}
		r.add(text)
		return nil
	}
	text := string(env.Body)
	if env.Kind == spot.Request && text == "history" {
		return t.Reply([]byte(strings.Join(r.lines, "\n")))
	}
	if rest, ok := strings.CutPrefix(text, LaterCommand); ok {
		after, line, err := parseLater(rest)
		if err != nil {
			return err
		}
		// One timer per text: posting the same "/later" text again re-arms it.
		if err := t.SetTimer(laterTimer+line, after, 0); err != nil {
			return err
		}
		if env.Kind == spot.Request {
			return t.Reply([]byte("scheduled"))
		}
		return nil
	}
	r.add(text)
	if env.Kind == spot.Request {
		return t.Reply([]byte(strconv.Itoa(len(r.lines))))
	}
	return nil
}

func (r *ChatRoom) add(line string) {
	r.lines = append(r.lines, line)
	if len(r.lines) > MaxHistory {
		r.lines = r.lines[len(r.lines)-MaxHistory:]
	}
}

// parseLater splits "<dur> <text>".
func parseLater(s string) (time.Duration, string, error) {
	ds, text, ok := strings.Cut(s, " ")
	if !ok || text == "" {
		return 0, "", fmt.Errorf("%w: want %q", ErrBadLater, LaterCommand+"<duration> <text>")
	}
	d, err := time.ParseDuration(ds)
	if err != nil || d < 0 {
		return 0, "", fmt.Errorf("%w: duration %q", ErrBadLater, ds)
	}
	if len(text) > MaxLaterText {
		return 0, "", fmt.Errorf("%w: text is %d bytes, at most %d", ErrBadLater, len(text), MaxLaterText)
	}
	return d, text, nil
}

// ChatRoomFactory builds rooms; a moved room starts empty but keeps its
// queued messages and timers (RecreateOnRelocation).
func ChatRoomFactory() spot.Factory {
	return spot.Factory{
		StableType: ChatRoomType,
		Kind:       spot.KindUserSpot,
		Policy:     spot.PolicyRecreate,
		New: func(context.Context, spot.CreateRequest) (spot.Handler, error) {
			return &ChatRoom{}, nil
		},
	}
}
