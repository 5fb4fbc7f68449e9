package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// ReplyInbound answers a node run on the connection its link holds to this
// node, and only that run; it sends replies only.
func TestReplyInbound(t *testing.T) {
	a := startNode(t, testConfig("a", 1))
	b := startNode(t, testConfig("b", 4))
	connectAndWait(t, b, a) // b's link to a; a has no link to b
	slot := b.ExpectReply()
	defer slot.Cancel()
	reply := router.NewRecord(&router.Reply{Correlation: slot.Correlation(), Result: router.ResultOK}, nil, payload([]byte("x")))
	tests := []struct {
		name string
		peer RID
		gen  uint64
		rec  *router.Record
		want error
	}{
		{"not a reply", b.RID(), 4, seqSend(b.RID(), 1, nil), ErrInvalidRecord},
		{"no connection from that RID", RID("node-c"), 1, reply, ErrUnknownPeer},
		{"another run of the RID", b.RID(), 3, reply, ErrUnknownPeer},
		{"the run whose link holds the connection", b.RID(), 4, reply, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := a.ReplyInbound(tt.peer, tt.gen, tt.rec); !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("ReplyInbound = %v, want %v", err, tt.want)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := slot.Wait(ctx); err != nil {
		t.Fatalf("the reply sent on b's link did not complete its slot: %v", err)
	}
}
