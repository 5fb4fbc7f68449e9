package mesh

import (
	"fmt"
	"testing"
	"time"
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
