package mesh

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// A stopping node still answers after its halt: a moved request whose turn
// ends while §11 stops object work, a queued one the runtime's close
// answers with ErrRuntimeDown, a request or route switch barrier passed on
// to it and refused there (node stopped) — all through Reply, to the
// requester's portable call, while the transport is up. Sent with the
// halt's context, each failed at once (WARN `moved request's reply not
// sent … context canceled`) and the requester waited out its own
// deadline (an operator try-out: a route switch waited 10 s for a barrier
// a node stopped with drain_on_shutdown=false had refused).
func TestMovedRequestAnsweredAfterTheHalt(t *testing.T) {
	// reply answers through Reply as the runtime does; want is its record.
	reply := func(body []byte, err error) func(*testing.T, *Node, *Node, replyRoute) *router.Record {
		return func(_ *testing.T, _, stopping *Node, route replyRoute) *router.Record {
			stopping.obj.Reply(route.encode(), body, err)
			return replyRecord(route.fam, route.corr, body, err)
		}
	}
	for _, tc := range []struct {
		name   string
		answer func(t *testing.T, requester, stopping *Node, route replyRoute) *router.Record // nil: any refusal
	}{
		{"a turn that ended at the halt", reply([]byte("ran here"), nil)},
		{"queued when the runtime closed", reply(nil, spot.ErrRuntimeDown)},
		{"passed on and refused by the stopped node", reply(nil, wrapErr(ErrUnavailable, ErrClosed, "node stopped"))},
		{"a route switch barrier passed on and refused", func(t *testing.T, requester, stopping *Node, route replyRoute) *router.Record {
			// The requester's barrier, passed on by another node (a
			// previous owner, 0303) that the stopping node admits no
			// more: the real refusal path (inbound, answerOrigin).
			meta, err := router.EncodeMetadata([]router.MetadataEntry{{Key: controlKey, Value: controlBarrier}})
			if err == nil {
				meta, err = withOrigin(meta, origin{rid: requester.RID(), gen: route.gen})
			}
			if err != nil {
				t.Fatal(err)
			}
			run := stopping.run
			_, lg := stopping.Owner()
			fence := router.ActorRouteFence{Actor: router.ActorRef{ActorID: "x-538", ObjectGeneration: 1},
				TargetNodeRID: run.rid, TargetNodeGeneration: run.lifecycleGeneration,
				ExpectedAuthorityOwnerGeneration: 1, ExpectedOwnerLeaseGeneration: lg}
			rec := router.NewRecord(&router.ActorRequest{Correlation: route.corr, Operation: opIDOf(NewOperationID()), TargetActor: fence}, meta, nil)
			from := transport.PeerInfo{RID: transport.RID{0x03, 0x03}, LifecycleGeneration: 1}
			stopping.obj.inbound(from, familyActor, "x-538", 1, run.rid, run.lifecycleGeneration, 1, lg, route.corr, rec,
				func(*router.Record) error {
					t.Error("answered to the node that passed the barrier on, not to its requester")
					return nil
				})
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			logs := f.logNode(1)
			c := newClusterOn(t, f, nil, 2, nil)
			requester, stopping := c.nodes[0], c.nodes[1]
			slot := requester.tr.ExpectReply() // a portable call: answered by whichever node ran it
			defer slot.Cancel()
			route := replyRoute{fam: familyActor, gen: requester.run.lifecycleGeneration, corr: slot.Correlation(), rid: requester.RID()}

			var got, want *router.Record
			var waitErr error
			answered := false
			stopping.obj.hooks.Store(&testHooks{closeStep: func(step string) {
				if step != closeObjectsStopped {
					return
				}
				if stopping.obj.halt.Err() == nil {
					t.Error("object work stopped, the halt not done: the test does not show the case")
				}
				want = tc.answer(t, requester, stopping, route)
				answered = true
				if strings.Contains(logs.String(), "moved request's reply not sent") {
					t.Errorf("the answer was not sent:\n%s", logs.String())
					return
				}
				// The transport is up: the answer is on its way (a
				// failure's bound only).
				got, waitErr = slot.Wait(ctxT(t, 10*time.Second))
			}})
			if err := stopping.Close(ctxT(t, 30*time.Second)); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if !answered || t.Failed() {
				if !answered {
					t.Fatal("Close never reached the point where object work had stopped")
				}
				return
			}
			if waitErr != nil {
				t.Fatalf("the requester never got the answer: %v", waitErr)
			}
			g, ok := got.Body.(*router.Reply)
			switch {
			case !ok:
				t.Fatalf("answer %+v, want a reply", got.Body)
			case want == nil:
				if g.Result == router.ResultOK {
					t.Fatalf("answer %+v, want a refusal", g)
				}
			default:
				w := want.Body.(*router.Reply)
				if g.Result != w.Result || g.FailureCode != w.FailureCode {
					t.Fatalf("answer %+v, want %+v", g, w)
				}
				if want.Payload != nil && (got.Payload == nil || !bytes.Equal(got.Payload.Data, want.Payload.Data)) {
					t.Fatalf("answer payload %+v, want %+v", got.Payload, want.Payload)
				}
			}
		})
	}
}
