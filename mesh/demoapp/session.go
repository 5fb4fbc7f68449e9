package demoapp

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/meshnode/meshnode/spot"
)

// SessionType is the demo's Instance Spot type: it is never created by a
// call; the first message sent to a session id creates it (spec §7.1).
const SessionType = "demo.session"

// RegisterInstances adds the demo's Instance Spot factory to r. It is kept
// apart from Register so that an application (or a test) that brings its
// own Instance Spot type is not offered two types by default (§7.1: a
// message that omits the type needs exactly one).
func RegisterInstances(r *spot.Registry) error { return r.Register(SessionFactory()) }

// Session counts the messages it received, first one included.
//
//	send anything        → counts it
//	request "count"      → replies the decimal count (not counting itself)
//	request anything     → counts it, replies "session <id> #<n> on generation <g>"
//	"sleep <ms>"         → counts it after a turn of that long (at most
//	                       MaxSessionSleep): slow work, to watch a node die
//	                       in the middle of a first message
type Session struct{ n int }

// MaxSessionSleep bounds a "sleep" turn.
const MaxSessionSleep = 10 * time.Second

// Receive implements spot.Handler.
func (s *Session) Receive(t *spot.Turn, env spot.Envelope) error {
	if env.Kind == spot.Request && string(env.Body) == "count" {
		return t.Reply([]byte(strconv.Itoa(s.n)))
	}
	if ms, ok := strings.CutPrefix(string(env.Body), "sleep "); ok {
		d, err := strconv.Atoi(ms)
		if err != nil || d < 0 {
			return fmt.Errorf("demo session: bad sleep %q", ms)
		}
		time.Sleep(min(time.Duration(d)*time.Millisecond, MaxSessionSleep))
	}
	s.n++
	if env.Kind != spot.Request {
		return nil
	}
	return t.Reply([]byte(fmt.Sprintf("session %s #%d on generation %d", t.ID(), s.n, t.Generation())))
}

// SessionFactory builds sessions. They do not move (DisableRelocation):
// a session is cheap to start again.
func SessionFactory() spot.Factory {
	return spot.Factory{
		StableType: SessionType,
		Kind:       spot.KindInstanceSpot,
		Policy:     spot.PolicyDisabled,
		New: func(context.Context, spot.CreateRequest) (spot.Handler, error) {
			return &Session{}, nil
		},
	}
}
