package mesh

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// A one-way first message to an Instance Spot that a sender places on a
// node which has begun emptying itself (its host command under way) but
// which the sender's list still shows serving is passed on by that node to
// another one, not dropped: before, the refusal reached nobody (one-way,
// §7.3) and 10 to 13 of 20 such messages never ran.
func TestOneWayActivationReachingADrainingNodeIsPassedOn(t *testing.T) {
	c := instanceCluster(t, false, 3)
	ctx := ctxT(t, 60*time.Second)
	c.nodes[1].obj.hostMove.Store(true) // node 1's drain has begun; node 0 has not seen it yet
	defer c.nodes[1].obj.hostMove.Store(false)
	const spots = 20
	var lost []string
	for i := 0; i < spots; i++ {
		id := fmt.Sprintf("s-%d", i)
		if err := c.m(0).SendInstance(ctx, id, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		// The next message finds the Spot (wherever it landed) and its
		// count says whether the first one ran.
		got, err := c.m(0).RequestInstance(ctx, id, []byte("count"))
		if err != nil || string(got) != "count:1" {
			lost = append(lost, fmt.Sprintf("%s: %q %v", id, got, err))
		}
	}
	st := c.nodes[1].ObjectStats()
	if len(lost) > 0 {
		t.Fatalf("%d of %d accepted one-way first messages never ran (passed on %d, dropped %d): %v",
			len(lost), spots, st.InstancePassedOn, st.InstanceDropped, lost)
	}
	if st.InstancePassedOn == 0 {
		t.Fatalf("no first message reached the emptying node: the test did not exercise the pass-on (node 1 stats %+v)", st)
	}
	if st.InstancesActivated != 0 {
		t.Fatalf("the emptying node activated %d Spots", st.InstancesActivated)
	}
}

// A one-way first message to an Instance Spot that reaches a node whose
// shutdown has begun — its drain's Close, or a plain Close, past the point
// where it stopped object work — is passed on to another node offering the
// type, as while the node drained: the node keeps passing cold activations
// on until its transport closes. Before, a closing node passed nothing on:
// the refusal of a one-way message reached nobody and the accepted first
// message never ran (the Spot's next message found it fresh, count:0).
//
// The sender's stale route is the one a sender really keeps: it handed the
// id's cold activation to that node a moment ago (sentActivations), so its
// next cold message for the id goes there too, whatever its list says now.
func TestOneWayActivationReachingAClosingNodeIsPassedOn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drain bool   // a Drain (host command held until Close) or a plain Close
		step  string // where in Close the message arrives
	}{
		{"drain/objects-stopped", true, closeObjectsStopped},
		{"drain/stopped-published", true, closeStoppedPublished},
		{"close/stopped-published", false, closeStoppedPublished},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := instanceCluster(t, false, 3)
			ctx := ctxT(t, 60*time.Second)
			const id = "late-first"
			closing, sender, other := c.nodes[1], c.nodes[0], c.nodes[2]
			cand := instanceCandidate(t, ctx, sender, closing)
			var sendErr error
			reached := false
			closing.obj.hooks.Store(&testHooks{closeStep: func(step string) {
				if step != tc.step || reached {
					return
				}
				reached = true
				// The closing node gets it: refused (and so lost), passed
				// on, or dropped — before Close goes on.
				sendErr = sendFirstTo(t, ctx, sender, closing, id, cand)
			}})
			var err error
			if tc.drain {
				_, err = closing.Drain(ctx, HostRelocateOptions{})
			} else {
				err = closing.Close(ctx)
			}
			if err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			if !reached {
				t.Fatalf("Close never reached %s", tc.step)
			}
			if sendErr != nil {
				t.Fatalf("SendInstance: %v", sendErr)
			}
			st := closing.ObjectStats()
			// The activation it was passed on to may still be under way on
			// the serving node; the sender's next message follows it once
			// the record shows (until then it would follow the first to the
			// node it handed it to, now gone).
			for until := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, found := c.instanceRecord(t, id); found {
					break
				}
				if time.Now().After(until) {
					st := closing.ObjectStats()
					t.Fatalf("the accepted one-way first message never ran: no node activated %s (closing node: passed on %d, refused %d, dropped %d)",
						id, st.InstancePassedOn, st.InstanceRefused, st.InstanceDropped)
				}
			}
			got, err := sender.Manager().RequestInstance(ctx, id, []byte("count"), InstanceType(testInstanceType))
			if err != nil || string(got) != "count:1" {
				t.Fatalf("the accepted one-way first message never ran: next message %q, %v; want count:1 (closing node: passed on %d, refused %d, dropped %d)",
					got, err, st.InstancePassedOn, st.InstanceRefused, st.InstanceDropped)
			}
			if st.InstancePassedOn != 1 || st.InstanceDropped != 0 || st.InstancesActivated != 0 {
				t.Fatalf("closing node: passed on %d, dropped %d, activated %d; want 1, 0, 0", st.InstancePassedOn, st.InstanceDropped, st.InstancesActivated)
			}
			// Exactly one owner: the serving node that activated it.
			a, found := c.instanceRecord(t, id)
			if !found || !other.HostsInstance(id) || c.indexOf(authority.NodeOf(a).RoutingID) != 2 {
				t.Fatalf("record found %v naming node %d, hosted on node 2: %v; want one owner, node 2", found,
					c.indexOf(authority.NodeOf(a).RoutingID), other.HostsInstance(id))
			}
		})
	}
}

// What reaches a closing node once it has ended its pass-ons (its lease
// and transport go next) cannot be sent on: a one-way first message is
// then counted dropped (and logged), not only "refused".
func TestOneWayActivationReachingANodeAfterItsPassOnsEndedIsCountedDropped(t *testing.T) {
	c := instanceCluster(t, false, 3)
	ctx := ctxT(t, 60*time.Second)
	const id = "too-late"
	closing, sender := c.nodes[1], c.nodes[0]
	cand := instanceCandidate(t, ctx, sender, closing)
	var sendErr error
	reached := false
	closing.obj.hooks.Store(&testHooks{closeStep: func(step string) {
		if step != closeStoppedPublished || reached {
			return
		}
		reached = true
		closing.obj.endPassOns(ctx) // as the teardown does next
		sendErr = sendFirstTo(t, ctx, sender, closing, id, cand)
	}})
	if err := closing.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !reached || sendErr != nil {
		t.Fatalf("hook reached %v, SendInstance %v", reached, sendErr)
	}
	if st := closing.ObjectStats(); st.InstanceDropped != 1 || st.InstancePassedOn != 0 {
		t.Fatalf("closing node: dropped %d, passed on %d, refused %d; want the late one-way message counted dropped",
			st.InstanceDropped, st.InstancePassedOn, st.InstanceRefused)
	}
}

// sendFirstTo sends id's first one-way message from sender with its route
// to the node being closed (cand: the sender's sentActivations entry, as
// after handing the id's activation there) and waits for that node to
// handle it — refused, passed on or dropped.
func sendFirstTo(t *testing.T, ctx context.Context, sender, closing *Node, id string, cand candidate) error {
	t.Helper()
	sender.obj.sentActivations.sent(id, testInstanceType, "objects", cand)
	before := closing.ObjectStats()
	err := sender.Manager().SendInstance(ctx, id, []byte("hello"), InstanceType(testInstanceType))
	eventually(t, 10*time.Second, "the closing node handling the first message", func() bool {
		st := closing.ObjectStats()
		return st.InstanceRefused+st.InstancePassedOn+st.InstanceDropped >
			before.InstanceRefused+before.InstancePassedOn+before.InstanceDropped
	})
	return err
}

// instanceCandidate is the placement of a test Instance Spot on node on,
// as sender's placement makes it (before on begins to close).
func instanceCandidate(t *testing.T, ctx context.Context, sender, on *Node) candidate {
	t.Helper()
	cand, err := sender.obj.place(ctx, placeRequest{kind: record.ObjectInstanceSpot, stableType: testInstanceType,
		mesh: "objects", only: on.RID()})
	if err != nil {
		t.Fatal(err)
	}
	return cand
}
