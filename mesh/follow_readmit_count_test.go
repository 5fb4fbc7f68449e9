package mesh

import (
	"sync"
	"testing"
	"time"
)

// A message for an earlier stay of an object hosted here again, whose
// follow chain is cut at a run that ended, is readmitted with the object's
// current fence; when that readmit meets the object in a cutover, the
// message waits for it and is admitted again from the start. Its follow
// refusal is counted once, as for the other waits notAdmitted returns:
// before 2026-12-07 every round counted it again, so one message showed as
// two refusals.
func TestReadmitWaitingForACutoverCountsOneFollowRefusal(t *testing.T) {
	ctx, a, prev, _, ref := movedToARunThatEnded(t, true)
	key := actorKey(ref.ActorID)
	// At the first pass-on attempt (the earlier stay's record, to the run
	// that ended) the object here enters a cutover: the readmit that
	// follows waits for it.
	var once sync.Once
	cutover := make(chan chan struct{}, 1)
	prev.obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id != ref.ActorID || step != stepFollowPassOn {
			return
		}
		once.Do(func() {
			prev.obj.mu.Lock()
			defer prev.obj.mu.Unlock()
			h, ok := prev.obj.hosted[key]
			if !ok || h.state != hostServing {
				t.Error("the object is not serving on prev")
				close(cutover)
				return
			}
			h.beginCutoverLocked()
			cutover <- h.cutoverDone
		})
	}})
	before := prev.ObjectStats()
	answered := make(chan error, 1)
	// On a's cached route (the earlier stay).
	go func() {
		_, err := a.Manager().RequestActor(ctx, ref, []byte("req"))
		answered <- err
	}()
	var done chan struct{}
	select {
	case done = <-cutover:
	case <-ctx.Done():
		t.Fatal("prev never tried to pass the request on")
	}
	if done == nil {
		t.FailNow()
	}
	// The cutover ends with the object kept here: the request is admitted
	// again, and readmitted.
	eventually(t, 10*time.Second, "the request to wait for the cutover", func() bool {
		return prev.obj.cutoverQueues.Load() > 0
	})
	prev.obj.mu.Lock()
	h := prev.obj.hosted[key]
	h.state = hostServing
	h.endCutoverLocked()
	prev.obj.mu.Unlock()
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if got := prev.ObjectStats().FollowRefused - before.FollowRefused; got != 1 {
		t.Fatalf("prev counted %d follow refusals for one request, want 1", got)
	}
}
