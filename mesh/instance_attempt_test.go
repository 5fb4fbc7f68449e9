package mesh

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/relocstore"
)

// A cold activation that its first target refuses after it stored the
// activation record (here: the Reserve finds the node's Instance Spot type
// slot taken meanwhile, ErrCapacityExhausted → "not taken", errRouteStale)
// is retried by the sender on another node with the same operation id
// (runInstance keeps c.op). The stored bytes name the target run (and a
// request's reply route id), so the second target stores other bytes than
// the first, whose Delete left a tombstone; until 2026-12-07 the reference
// was fixed by (SpotId, source run, OperationId) alone, the second store
// was a Conflict and the message failed ErrInvalidOperation ("operation id
// reused") although a node with room offered the type. The reference now
// names the attempt (the target run too, activation.Reference), and the
// message runs on the other node (§7.1; docs/INSTANCE-SPOTS.md step 1 and
// "One reference per attempt"). Found by a review (hR1).
func TestActivationRetriedElsewhereAfterRefusalAfterStore(t *testing.T) {
	c := oneInstanceSlotCluster(t)
	ctx := ctxT(t, 60*time.Second)
	const id = "refused-after-store"
	type result struct {
		body []byte
		err  error
	}
	done := make(chan result, 1)
	host := c.refuseFirstAfterStore(t, ctx, id, func() {
		b, err := c.m(0).RequestInstance(ctx, id, []byte("whoami"))
		done <- result{b, err}
	}, nil)
	res := <-done
	if res.err != nil {
		t.Fatalf("request to %s (its first target %d refused it after storing its record; node %d has room): %v (InvalidOperation: %v)",
			id, host, 3-host, res.err, errors.Is(res.err, ErrInvalidOperation))
	}
	if string(res.body) != id {
		t.Fatalf("answered %q", res.body)
	}
}

// oneInstanceSlotCluster is a client (node 0) and two servers, each with
// room for one Instance Spot of the test type.
func oneInstanceSlotCluster(t *testing.T) *cluster {
	return newClusterOn(t, newFixture(t), nil, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Node.Limits.SpotTypes = map[string]int{testInstanceType: 1}
	})
}

// refuseFirstAfterStore runs send on its own goroutine and makes the first
// server that stores the activation record of id refuse it after the store:
// the server's one slot of the type is taken meanwhile (another
// activation's Reserve, made here directly), so the activation's Reserve
// meets ErrCapacityExhausted. It returns that server's index.
// The other server gets otherHooks (nil for none) before the refusal.
func (c *cluster) refuseFirstAfterStore(t *testing.T, ctx context.Context, id string, send func(), otherHooks *testHooks) int {
	t.Helper()
	reached := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	release := make(chan struct{})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo)
	for i, node := range []int{1, 2} {
		var once sync.Once
		r := reached[i]
		c.nodes[node].obj.hooks.Store(&testHooks{activationStep: func(got, step string) {
			if got == id && step == "stored" {
				first := false
				once.Do(func() { first = true; close(r) })
				if first {
					<-release
				}
			}
		}})
	}
	go send()
	host := waitEither(t, reached[0], reached[1])
	n := c.nodes[host]
	c.nodes[3-host].obj.hooks.Store(otherHooks)
	ownerID, leaseGen := n.Owner()
	content := []byte("filler")
	sum := sha256.Sum256(content)
	if _, err := n.obj.exec.Reserve(ctx, authority.ReserveRequest{
		Object: authority.Object{ID: "filler", Kind: record.ObjectInstanceSpot, StableType: testInstanceType},
		Target: authority.Target{Node: authority.Node{MeshName: n.cfg.Node.MeshName, RoutingID: n.run.rid, LifecycleGeneration: n.run.lifecycleGeneration},
			Owner: authority.Owner{ID: ownerID, LeaseGeneration: leaseGen}, Limits: n.obj.instanceLimits(testInstanceType)},
		Creation: record.PendingCreation{ReservationID: "filler-rsv", RequestContentReference: "filler", RequestSHA256: sum, RequestEncodedSize: len(content)},
	}); err != nil {
		t.Fatal(err)
	}
	letGo()
	return host
}

// The one-way variant: SendInstance returned nil once the message left the
// client, so a refusal after the store reaches nobody. Until 2026-12-07 the
// first target counted it dropped and the message never ran anywhere,
// although the other node had room (a review suspected it; the cause is not
// the reference but that nobody tried another node). Now the refusing
// target passes it on to another node offering the type, as a draining
// node does (passOnActivation), and the message runs once.
func TestOneWayActivationRefusedAfterStoreIsPassedOn(t *testing.T) {
	c := oneInstanceSlotCluster(t)
	ctx := ctxT(t, 60*time.Second)
	const id = "one-way-refused-after-store"
	sent := make(chan error, 1)
	host := c.refuseFirstAfterStore(t, ctx, id, func() { sent <- c.m(0).SendInstance(ctx, id, []byte("one")) }, nil)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	// Either the Spot shows Ready (passed on and activated) or the first
	// target counts the message dropped.
	eventually(t, 30*time.Second, "the one-way first message to be activated elsewhere or dropped", func() bool {
		a, found := c.instanceRecord(t, id)
		return (found && a.Allocation.State == record.AllocationActive) || c.nodes[host].ObjectStats().InstanceDropped > 0
	})
	if n := c.nodes[host].ObjectStats().InstanceDropped; n != 0 {
		t.Fatalf("node %d (refused after storing) dropped %d one-way first message(s); node %d had room", host, n, 3-host)
	}
	got, err := c.m(0).RequestInstance(ctx, id, []byte("count"))
	if err != nil || string(got) != "count:1" {
		t.Fatalf("count after the one-way first message: %q, %v (want count:1: it ran once)", got, err)
	}
	if n := c.probe.runCount(id); n != 1 {
		t.Fatalf("%d factory runs, want 1", n)
	}
	// Counted once the send returned, which may come after the Spot's
	// activation elsewhere.
	eventually(t, 10*time.Second, "the pass-on to be counted", func() bool { return c.nodes[host].ObjectStats().InstancePassedOn == 1 })
}

// The sender's next message for the id goes where it handed the first
// (sentActivations): to the node that refused the first after its store
// and passed it on. If that node had room again by then (here: the
// reservation that filled it is returned), activating the Spot itself with
// the second message would race the first, passed on a moment earlier; it
// follows the first to the node it went to instead, and runs behind it.
func TestMessageAfterAPassedOnActivationFollowsIt(t *testing.T) {
	c := oneInstanceSlotCluster(t)
	ctx := ctxT(t, 60*time.Second)
	const id = "follows-the-passed-on"
	stored := make(chan struct{})
	hold := make(chan struct{})
	var holdOnce, storedOnce sync.Once
	t.Cleanup(func() { holdOnce.Do(func() { close(hold) }) })
	// The other server holds the passed-on activation after its store.
	other := &testHooks{activationStep: func(got, step string) {
		if got == id && step == "stored" {
			storedOnce.Do(func() { close(stored) })
			<-hold
		}
	}}
	sent := make(chan error, 1)
	host := c.refuseFirstAfterStore(t, ctx, id, func() { sent <- c.m(0).SendInstance(ctx, id, []byte("one")) }, other)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	select {
	case <-stored:
	case <-ctx.Done():
		t.Fatal("the first message was not passed on")
	}
	// The host has room again.
	n := c.nodes[host]
	ownerID, leaseGen := n.Owner()
	if _, err := n.obj.exec.Abort(ctx, authority.AbortRequest{Object: authority.Object{ID: "filler", Kind: record.ObjectInstanceSpot, StableType: testInstanceType},
		ReservationID: "filler-rsv", Owner: &authority.Owner{ID: ownerID, LeaseGeneration: leaseGen}}); err != nil {
		t.Fatal(err)
	}
	reached := make(chan struct{})
	var reachedOnce sync.Once
	n.obj.hooks.Store(&testHooks{activationStep: func(got, step string) {
		if got == id && (step == stepFollowsPassedOn || step == "committed") {
			reachedOnce.Do(func() { close(reached) })
		}
	}})
	answer := make(chan []byte, 1)
	go func() {
		got, err := c.m(0).RequestInstance(ctx, id, []byte("count"))
		if err != nil {
			t.Error(err)
		}
		answer <- got
	}()
	// Let the passed-on activation go on once the second message, at the
	// host, either followed it or activated the Spot there itself.
	select {
	case <-reached:
	case <-ctx.Done():
		t.Fatal("the second message did not reach the host")
	}
	holdOnce.Do(func() { close(hold) })
	if got := string(<-answer); got != "count:1" {
		t.Fatalf("the second message answered %q: want count:1 (it ran after the first)", got)
	}
}

// A target whose read-back of the activation record it just stored fails
// with the provider's integrity error (relocstore.ErrIntegrity: the bytes
// it holds are not the ones stored) does not take the activation: it
// deletes that record and refuses "not taken", and the sender tries
// another node, which stores the record under a reference of its own.
// Until 2026-12-07 the integrity error was a plain ErrUnavailable: the
// message failed at once ("the node that received it could not serve it")
// although another node could take it.
func TestActivationReadBackCorruptIsTriedElsewhere(t *testing.T) {
	c := instanceCluster(t, false, 3)
	bent := &relocBentOnce{Store: c.nodes[1].reloc} // the servers share one store
	c.nodes[1].reloc, c.nodes[2].reloc = bent, bent
	ctx := ctxT(t, 60*time.Second)
	const id = "bent-on-read-back"
	got, err := c.m(0).RequestInstance(ctx, id, []byte("whoami"))
	if err != nil || string(got) != id {
		t.Fatalf("request: %q, %v (a read-back was corrupt: %v)", got, err, bent.ref() != "")
	}
	ref := bent.ref()
	if ref == "" {
		t.Fatal("no read-back was made corrupt")
	}
	if !c.payloadGone(t, ref) {
		t.Fatalf("the refused attempt's record %s is still stored", ref)
	}
}

// relocBentOnce fails the first Read of an activation record with the
// provider's integrity error, as the Redis provider does for bytes that no
// longer match their digest.
type relocBentOnce struct {
	relocstore.Store
	mu   sync.Mutex
	bent string
}

func (r *relocBentOnce) Read(ctx context.Context, ref string) (relocstore.ReadResult, error) {
	r.mu.Lock()
	first := r.bent == "" && strings.HasPrefix(ref, activationRefPrefix)
	if first {
		r.bent = ref
	}
	r.mu.Unlock()
	if first {
		return relocstore.ReadResult{}, &relocstore.ProviderError{Provider: "test", Op: "read",
			Err: fmt.Errorf("%w: SHA-256 differs", relocstore.ErrIntegrity)}
	}
	return r.Store.Read(ctx, ref)
}

func (r *relocBentOnce) ref() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bent
}
