package mesh

import (
	"context"
	"errors"
	"testing"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

// TestUnawaitedReadyTakesOnlyItsMovesWord: a 53 no call awaits ends a
// move's wait for the commit only when it is a failure, for that move's
// relocation id and target attempt, from that move's target, while the
// move runs. A stale one (an older attempt, another relocation), one from
// another peer, a relay-ready, or one arriving after the move ended is not
// taken (the transport counts it late) and leaves the move waiting.
func TestUnawaitedReadyTakesOnlyItsMovesWord(t *testing.T) {
	target, other := transport.RID("target-node-rid!"), transport.RID("another-node-rid")
	rel := router.RelocationID{High: 1, Low: 2}
	const attempt = 7
	failed := func(r router.RelocationID, attempt uint64) *router.RelocationReady {
		return &router.RelocationReady{Correlation: 9, Relocation: r, TargetAttempt: attempt, Outcome: router.RelocationFailed,
			Failure: router.RelocationFailureNotServing, Detail: "node is stopped"}
	}
	tests := []struct {
		name  string
		from  transport.RID
		body  *router.RelocationReady
		ended bool // the move ended before the 53 came
		taken bool
	}{
		{"its target's failure", target, failed(rel, attempt), false, true},
		{"an older attempt of the move", target, failed(rel, attempt-1), false, false},
		{"another relocation", target, failed(router.RelocationID{High: 1, Low: 3}, attempt), false, false},
		{"from another peer", other, failed(rel, attempt), false, false},
		{"a relay-ready", target, &router.RelocationReady{Correlation: 9, Relocation: rel, TargetAttempt: attempt,
			Outcome: router.RelocationRelayReady}, false, false},
		{"after the move ended", target, failed(rel, attempt), true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := &objects{streamed: map[moveAttempt]*sourceMove{}}
			s := &sourceMove{o: o, target: candidate{node: authority.Node{RoutingID: []byte(target)}},
				bind: chunk.Binding{Relocation: rel, TargetAttempt: attempt}}
			s.told, s.tell = context.WithCancelCause(context.Background())
			o.streamStarts(s)
			if tc.ended {
				o.mu.Lock()
				o.moveEndsLocked(s)
				o.mu.Unlock()
			}
			if got := o.unawaitedReady(tc.from, router.NewRecord(tc.body, nil, nil)); got != tc.taken {
				t.Fatalf("taken = %v, want %v", got, tc.taken)
			}
			if told := s.told.Err() != nil; told != tc.taken {
				t.Fatalf("the move's wait ended: %v, want %v", told, tc.taken)
			}
			var said *targetSaid
			if tc.taken && (!errors.As(context.Cause(s.told), &said) || said.Error() != "notServing: node is stopped") {
				t.Fatalf("the move was told %v, want notServing: node is stopped", context.Cause(s.told))
			}
		})
	}
}
