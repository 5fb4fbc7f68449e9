package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/demoapp"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// drainRestart stops server i with SIGTERM, checks its drain moved every
// object it owned (owned of them) and nothing failed, and starts its run
// number run.
func (r *rollMesh) drainRestart(t *testing.T, ctx context.Context, m *mesh.Manager, refs []mesh.ActorRef, i, run int) {
	t.Helper()
	rid := r.rids[i]
	gen, _ := servingRun(r.client, rid)
	owned := countOf(owners(t, ctx, m, refs), rid)
	p := r.procs[i]
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		p.dump(t)
		t.Fatalf("%s exited with %v after SIGTERM, want status 0", p.name, err)
	}
	line, ok := p.stdoutLine("meshnode: drained:")
	f := drainedLine.FindStringSubmatch(line)
	if !ok || f == nil || f[1] != strconv.Itoa(owned) || f[3] != "0" || f[5] != "completed" {
		p.dump(t)
		t.Fatalf("%s (owned %d): %q, want all %d moved, none failed, completed", p.name, owned, line, owned)
	}
	t.Logf("%s: %s", p.name, line)
	r.restart(t, i, run, gen)
}

// listActors runs `meshnode ctl list --kind actor --all` against the mesh's
// store and returns, per actor id, its state and node RID columns.
func (r *rollMesh) listActors(t *testing.T) map[string][2]string {
	t.Helper()
	out := r.ctl(t, "list", "--kind", "actor", "--mesh", "roll", "--all")
	got := map[string][2]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 7 && strings.HasPrefix(f[0], "storm-") {
			got[f[0]] = [2]string{f[3], f[6]} // state, node RID
		}
	}
	return got
}

// The storm (issue 11): three `meshnode run` servers on Redis; a client
// streams sequence-numbered sends to 24 counters while the servers are
// drained (SIGTERM) and restarted in turn, so the counters move back and
// forth, and one server is killed with SIGKILL in the middle of it, after
// which the others keep draining and restarting (right after the kill the
// dead server still looks serving, so a drain's move to it fails and the
// counter is moved elsewhere). At the end every counter
// that was not on the killed server saw each accepted send exactly once
// and in order, and the killed server's counters are reported, not
// silently lost: `meshnode ctl list` shows each of them unavailable on the
// killed server's RID; `meshnode ctl reclaim` then removes exactly their
// records (their state died with the process) and their Ids can be created
// again.
func TestMultiProcessStormWithKill(t *testing.T) {
	r := startRollMesh(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	m := r.client.Manager()
	refs := make([]mesh.ActorRef, 24)
	for i := range refs {
		ref, err := m.CreateActor(ctx, fmt.Sprintf("storm-%d", i), demoapp.CounterType)
		if err != nil {
			t.Fatalf("create counter %d: %v", i, err)
		}
		refs[i] = ref
	}
	snd := startIncSender(ctx, m, refs)
	defer func() { _ = snd.wait() }() // a no-op after the test's own wait
	time.Sleep(200 * time.Millisecond)
	for i := range r.procs {
		r.drainRestart(t, ctx, m, refs, i, 1)
	}
	r.drainRestart(t, ctx, m, refs, 0, 2)

	// Kill server 2 while the sends flow. The sender stops sending to its
	// counters first: what it sent them before died with the process.
	const victim = 1
	own := owners(t, ctx, m, refs)
	var lost []string
	for i, o := range own {
		if o == r.rids[victim] {
			snd.skip[i].Store(true)
			lost = append(lost, refs[i].ActorID)
		}
	}
	if len(lost) == 0 {
		t.Fatalf("the killed server owns no counter: %v", own)
	}
	time.Sleep(20 * time.Millisecond)
	p := r.procs[victim]
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	r.dead[victim] = true
	t.Logf("%s killed with %d counters", p.name, len(lost))

	// The storm goes on at once: the node killed a moment ago still looks
	// serving (its lease runs on), so a drain may first pick it as a target
	// and must then move those counters elsewhere.
	r.drainRestart(t, ctx, m, refs, 2, 2)
	r.drainRestart(t, ctx, m, refs, 0, 3)
	retried := 0
	for _, p := range r.all {
		retried += p.count("host relocation: move failed on its target; trying another node")
	}
	t.Logf("moves retried on another node after failing on theirs: %d", retried)
	if err := snd.wait(); err != nil {
		t.Fatalf("sender: %v (refusals retried: %v)", err, snd.refused)
	}
	t.Logf("refusals retried by the sender: %v", snd.refused)
	total := checkCounters(t, ctx, m, snd)

	// The killed server's counters: reported unavailable on its RID once
	// its lease has ended.
	var list map[string][2]string
	waitUntil(t, 10*time.Second, "ctl list to show the killed server's counters unavailable", func() bool {
		list = r.listActors(t)
		for _, id := range lost {
			if list[id] != [2]string{"unavailable", r.rids[victim]} {
				return false
			}
		}
		return true
	})
	for _, ref := range refs {
		e, ok := list[ref.ActorID]
		switch {
		case !ok:
			t.Errorf("%s is missing from ctl list", ref.ActorID)
		case e[0] != "ready" && e[1] != r.rids[victim]:
			t.Errorf("%s on %s is %s, want ready", ref.ActorID, e[1], e[0])
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("%d sends to %d counters counted exactly once and in order; the killed server's %d counters reported unavailable: %v",
		total, len(refs)-len(lost), len(lost), lost)

	// The operator reclaims them (docs/OPERATIONS.md "A node died"): a dry
	// run lists exactly them, the real run removes exactly them, and their
	// Ids can be created again (their state started afresh).
	dry := r.ctl(t, "reclaim", "--all", "--dry-run")
	if want := fmt.Sprintf("%d would reclaim;", len(lost)); !strings.Contains(dry, want) {
		t.Fatalf("ctl reclaim --dry-run: want %q in\n%s", want, dry)
	}
	// A live counter named alone: nothing to reclaim, and said so.
	for _, ref := range refs {
		if e := list[ref.ActorID]; e[0] == "ready" {
			out := r.ctl(t, "reclaim", "actor", ref.ActorID, "--dry-run")
			if want := fmt.Sprintf("actor %q: its owner's lease is live; nothing to reclaim", ref.ActorID); !strings.Contains(out, want) {
				t.Fatalf("ctl reclaim of a live object: want %q in\n%s", want, out)
			}
			break
		}
	}
	out := r.ctl(t, "reclaim", "--all")
	if want := fmt.Sprintf("%d reclaimed;", len(lost)); !strings.Contains(out, want) {
		t.Fatalf("ctl reclaim: want %q in\n%s", want, out)
	}
	for _, id := range lost {
		if !strings.Contains(out, fmt.Sprintf("reclaimed actor %q", id)) {
			t.Errorf("ctl reclaim did not name %s:\n%s", id, out)
		}
	}
	r.checkNothingReserved(t, ctx)
	list = r.listActors(t)
	for _, id := range lost {
		if _, ok := list[id]; ok {
			t.Errorf("%s still listed after ctl reclaim", id)
		}
		res, err := m.GetOrCreateActor(ctx, id, demoapp.CounterType)
		if err != nil || res.Outcome != mesh.Created {
			t.Errorf("GetOrCreate %s after reclaim: %+v, %v; want Created", id, res, err)
		}
	}
}

// checkNothingReserved fails the test when capacity is left reserved once
// every move and creation has ended: a relocation reservation row left
// behind, or a live run's counter holding reserved slots (a leak would
// shrink that node's room for as long as it runs).
func (r *rollMesh) checkNothingReserved(t *testing.T, ctx context.Context) {
	t.Helper()
	st, err := locredis.New(ctx, locredis.Options{Addrs: []string{r.addr}, Namespace: r.ns})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	page, err := st.Scan(ctx, locstore.ScanRequest{Prefix: record.KindPrefix(authority.KindRelocationReservation), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range page.Items {
		rv, err := authority.DecodeReservation(it.Value)
		t.Errorf("relocation reservation left behind: %+v (%v)", rv, err)
	}
	snap, err := directory.List(ctx, st, "roll", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range snap.Entries {
		d := e.Descriptor
		if !e.LeaseValid {
			continue
		}
		id := authority.CounterID{Class: authority.SlotActors,
			Node: authority.Node{MeshName: d.MeshName, RoutingID: d.RoutingID, LifecycleGeneration: uint64(d.LifecycleGeneration)}}
		rows, err := authority.ReadCounters(ctx, st, []authority.CounterID{id})
		if err != nil {
			t.Fatal(err)
		}
		if u := rows[0].Usage; u.Reserved != 0 {
			t.Errorf("node %x holds %d reserved actor slots with nothing in flight (%d active)", d.RoutingID, u.Reserved, u.Active)
		}
	}
}

// ctl runs `meshnode ctl args...` against the mesh's store and returns its
// standard output; a non-zero exit fails the test.
func (r *rollMesh) ctl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(r.bin, append([]string{"ctl"}, args...)...)
	cmd.Env = append(cmd.Environ(), nodeEnv(r.addr, r.ns, "roll", "")...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("ctl %v: %v\n%s%s", args, err, out.String(), errb.String())
	}
	return out.String()
}

// A server killed with SIGKILL in the middle of its own drain leaves the
// moves it had in flight half done, and their targets holding slots
// reserved for them; only a source releases its reservations, so nobody
// would. Once its lease has ended, `meshnode ctl reclaim --all` releases
// them (and removes the records of the objects that had not moved: their
// state died with the process), and no capacity is left reserved.
func TestMultiProcessKillDuringDrainLeavesNothingReserved(t *testing.T) {
	r := startRollMesh(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	m := r.client.Manager()
	const objects = 3000
	errs := make(chan error, 8)
	next := make(chan int, objects)
	for i := range objects {
		next <- i
	}
	close(next)
	for range 8 {
		go func() {
			for i := range next {
				if _, err := m.CreateActor(ctx, fmt.Sprintf("drain-%d", i), demoapp.CounterType); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	victim := r.procs[0]
	if err := victim.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Killed in full flow: ~900 more to go, 16 in flight.
	waitUntil(t, 20*time.Second, "the drain to be under way", func() bool { return victim.count("relocation ended") >= 100 }, victim)
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	r.dead[0] = true
	atKill := victim.count("relocation ended")
	<-victim.done
	t.Logf("killed after %d moves had ended (%d in its log by the end)", atKill, victim.count("relocation ended"))
	if _, drained := victim.stdoutLine("meshnode: drained:"); drained {
		t.Fatal("the drain finished before the kill")
	}
	// Once its lease has ended (2 s here) a dry run sees its objects that
	// stayed; the run releases the reservations of its moves caught
	// between securing their target's room and sending the Restore (a
	// target that has the payload still commits: the owner change does not
	// check the source's lease). Timing decides how many: 0 or 1 in about
	// equal parts here, so this check catches a leak in about half the
	// runs; TestReclaimSweepReleasesADeadSourcesRelocationReservation (mesh)
	// makes one every time.
	waitUntil(t, 20*time.Second, "ctl reclaim to see the killed source's objects", func() bool {
		return !strings.Contains(r.ctl(t, "reclaim", "--all", "--dry-run"), " 0 of a dead owner")
	}, r.procs[1:]...)
	out := r.ctl(t, "reclaim", "--all")
	t.Logf("ctl reclaim: released %d relocation reservations; %s",
		strings.Count(out, "released the relocation reservation"), lastLine(out))
	r.checkNothingReserved(t, ctx)
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
