package mesh

import (
	"testing"
	"time"
)

// While an object moves, arrivals are neither refused nor run: they enter
// the ingress hold in arrival order (issue #10 ground work, §1.3 step 3), and
// Destroy stays typed ErrMoving. Reopened, the hold runs in order and the
// held request is answered.
func TestMovingObjectHoldsArrivalsInOrder(t *testing.T) {
	c := clientAndServer(t)
	ctx := ctxT(t, 20*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "held", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	owner := c.nodes[1]
	h, ok := owner.obj.hostedFor(actorKey("held"))
	if !ok {
		t.Fatal("not hosted on node 1")
	}
	owner.obj.setMoving(actorKey("held"), true)
	h.obj.Hold()
	for i := 0; i < 3; i++ {
		if err := c.m(0).SendActor(ctx, ref, []byte("one-way")); err != nil {
			t.Fatalf("send while moving: %v", err)
		}
	}
	answer := make(chan string, 1)
	go func() {
		b, err := c.m(0).RequestActor(ctx, ref, []byte("count"))
		if err != nil {
			answer <- "error: " + err.Error()
			return
		}
		answer <- string(b)
	}()
	// Four envelopes queue behind the closed dispatch; none ran.
	deadline := time.Now().Add(10 * time.Second)
	for h.obj.Queued() != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("queued %d, want 4 held", h.obj.Queued())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := c.m(0).Destroy(ctx, ref); !errorsIsAny(err, ErrMoving) {
		t.Fatalf("Destroy while moving = %v, want ErrMoving", err)
	}
	owner.obj.setMoving(actorKey("held"), false)
	h.obj.Release()
	// In order: the request saw the three sends before it.
	if got := <-answer; got != "count:3" {
		t.Fatalf("held request answered %q, want count:3", got)
	}
}
