package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/demoapp"
)

// Capacity limits set on the command line bound placement across
// processes (§4): three `meshnode run` servers with --node.limits.actors 3
// take exactly nine counters, three each; the tenth creation fails with
// ErrCapacityExhausted naming the full nodes. A server drained while the
// others are full cannot move its counters: the drain says so, and once it
// is gone and restarted its room is placed again.
func TestMultiProcessCapacityLimits(t *testing.T) {
	r := startRollMesh(t, 3, "--node.limits.actors", "3")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	m := r.client.Manager()
	var refs []mesh.ActorRef
	for i := range 9 {
		ref, err := m.CreateActor(ctx, fmt.Sprintf("cap-%d", i), demoapp.CounterType)
		if err != nil {
			t.Fatalf("create counter %d of 9: %v", i, err)
		}
		refs = append(refs, ref)
	}
	own := owners(t, ctx, m, refs)
	for _, rid := range r.rids {
		if n := countOf(own, rid); n != 3 {
			t.Fatalf("server %s owns %d counters, want 3 (owners %v)", rid, n, own)
		}
	}
	_, err := m.CreateActor(ctx, "cap-9", demoapp.CounterType)
	if !errors.Is(err, mesh.ErrCapacityExhausted) || !errors.Is(err, mesh.ErrUnavailable) || !strings.Contains(err.Error(), "(3 full") {
		t.Fatalf("tenth creation: %v, want ErrCapacityExhausted with 3 full nodes", err)
	}
	t.Logf("tenth creation: %v", err)

	// Server 1 drains while the others are full: nothing can move, and
	// the operator is told on stdout and in the log.
	p := r.procs[0]
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		p.dump(t)
		t.Fatalf("%s exited with %v after SIGTERM, want status 0 (the shutdown completed)", p.name, err)
	}
	line, _ := p.stdoutLine("meshnode: drained:")
	if f := drainedLine.FindStringSubmatch(line); f == nil || f[1] != "0" || f[3] != "3" ||
		!strings.HasSuffix(line, "; 3 removed by the shutdown, their state is lost (the log says why each stayed)") {
		p.dump(t)
		t.Fatalf("drain line %q, want 0 moved, 3 failed, 3 removed", line)
	}
	if n := p.count("host relocation: object stays on this node"); n != 3 {
		p.dump(t)
		t.Fatalf("%d objects logged as staying, want 3", n)
	}
	r.dead[0] = true

	// The two left are full; server 1's next run brings room for three.
	if _, err := m.CreateActor(ctx, "cap-9", demoapp.CounterType); !errors.Is(err, mesh.ErrCapacityExhausted) {
		t.Fatalf("creation with two full servers left: %v, want ErrCapacityExhausted", err)
	}
	r.procs[0] = r.start(t, 0, 1)
	r.dead[0] = false
	waitUntil(t, 20*time.Second, "the restarted server to serve for the client", func() bool {
		_, ok := servingRun(r.client, r.rids[0])
		return ok
	}, r.procs...)
	for i := 9; i < 12; i++ {
		ref, err := m.CreateActor(ctx, fmt.Sprintf("cap-%d", i), demoapp.CounterType)
		if err != nil || hex.EncodeToString(ref.NodeRID) != r.rids[0] {
			t.Fatalf("create counter %d after the restart: on %x, %v; want on the restarted %s", i, ref.NodeRID, err, r.rids[0])
		}
	}
}
