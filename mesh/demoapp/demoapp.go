// Package demoapp holds the factories the stock meshnode binary registers: a
// counter Actor and a chat-room User Spot. They double as the example of how
// an application plugs its own object types into a node: build spot.Factory
// values and register them (Register here, or spot.MustRegister from an
// init function), then run the node through mesh/cli.Main.
package demoapp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

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

// Counter is an Actor holding one integer.
//
//	send "inc" or "add <n>"  → adds
//	request "get"            → replies the decimal value
type Counter struct {
	mu    sync.Mutex // the runtime runs one turn at a time; the lock is for Snapshot
	value int64
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

func (counterSnapshots) Snapshot(h spot.Handler) ([]byte, error) {
	c, ok := h.(*Counter)
	if !ok {
		return nil, fmt.Errorf("counter snapshot: unexpected handler %T", h)
	}
	return binary.BigEndian.AppendUint64(nil, uint64(c.Value())), nil
}

func (counterSnapshots) Restore(_ context.Context, _ spot.CreateRequest, state []byte) (spot.Handler, error) {
	if len(state) != 8 {
		return nil, fmt.Errorf("counter restore: state is %d bytes, want 8", len(state))
	}
	return &Counter{value: int64(binary.BigEndian.Uint64(state))}, nil
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
//	send <text>        → appends
//	request "history"  → replies the kept lines joined by '\n'
type ChatRoom struct {
	lines []string
}

// MaxHistory bounds a room's kept lines.
const MaxHistory = 100

// Receive handles one message.
func (r *ChatRoom) Receive(t *spot.Turn, env spot.Envelope) error {
	text := string(env.Body)
	if env.Kind == spot.Request && text == "history" {
		return t.Reply([]byte(strings.Join(r.lines, "\n")))
	}
	r.lines = append(r.lines, text)
	if len(r.lines) > MaxHistory {
		r.lines = r.lines[len(r.lines)-MaxHistory:]
	}
	if env.Kind == spot.Request {
		return t.Reply([]byte(strconv.Itoa(len(r.lines))))
	}
	return nil
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
