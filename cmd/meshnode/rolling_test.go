package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/demoapp"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/router/transport/curve"
	"github.com/meshnode/meshnode/spot"
)

// A rolling restart of `meshnode run` processes (docs/OPERATIONS.md "Drain
// and rolling restarts"), watched by an in-process client node of the same
// mesh on the same Redis.

// startClient starts an in-process client node configured by env (the
// same MESHNODE_ variables a process gets, JSON logs); its log lines are
// collected like a process's.
func startClient(t *testing.T, env []string) (*mesh.Node, *proc) {
	t.Helper()
	cfg, err := config.Load(nil, config.LoadOptions{Environ: append(env, "MESHNODE_NODE__OBJECT_ROLE=client")})
	if err != nil {
		t.Fatal(err)
	}
	logs := &proc{name: "client", done: make(chan struct{})}
	r, w := io.Pipe()
	go func() { logs.collect(r); close(logs.done) }()
	n, err := mesh.Start(context.Background(), mesh.Options{Config: cfg, Factories: spot.NewRegistry(), Logger: cfg.Logger(w)})
	if err != nil {
		t.Fatalf("start the client node: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Close(ctx)
		_ = w.Close()
		<-logs.done
	})
	return n, logs
}

// servingRun returns the lifecycle generation of rid's run when n's
// descriptor list shows it serving with a valid lease and n has admitted
// that run (so it can route and place there).
func servingRun(n *mesh.Node, rid string) (uint64, bool) {
	snap, ok := n.LastSnapshot()
	if !ok {
		return 0, false
	}
	for _, e := range snap.Entries {
		d := e.Descriptor
		if hex.EncodeToString(d.RoutingID) != rid || !e.LeaseValid || d.State != record.StateServing {
			continue
		}
		for _, p := range n.Peers() {
			if p.RID.String() == rid && p.LifecycleGeneration == uint64(d.LifecycleGeneration) {
				return p.LifecycleGeneration, true
			}
		}
	}
	return 0, false
}

// owners maps each counter to the RID (hex) its authority record names.
func owners(t *testing.T, ctx context.Context, m *mesh.Manager, refs []mesh.ActorRef) []string {
	t.Helper()
	out := make([]string, len(refs))
	for i, ref := range refs {
		got, err := m.FindActor(ctx, ref.ActorID)
		if err != nil {
			t.Fatalf("find %s: %v", ref.ActorID, err)
		}
		out[i] = hex.EncodeToString(got.NodeRID)
	}
	return out
}

func countOf(list []string, v string) int {
	n := 0
	for _, s := range list {
		if s == v {
			n++
		}
	}
	return n
}

// errClass names the mesh error a refusal wraps, for the retry counts.
func errClass(err error) string {
	for _, e := range []error{mesh.ErrUnavailable, mesh.ErrMoving, mesh.ErrNotFound, mesh.ErrStaleGeneration,
		mesh.ErrDeadlineExceeded, mesh.ErrRequestFailed} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "other"
}

// incSender streams sends round-robin to counters through m: to each
// counter "seq 1", "seq 2", … (each adds 1 and is checked against the last
// one, demoapp.Counter), skipping the counters marked skipped.
type incSender struct {
	m        *mesh.Manager
	refs     []mesh.ActorRef
	skip     []atomic.Bool
	accepted []int64          // per counter; read after wait
	refused  map[string]int   // refusals retried, by error class
	sample   map[string]error // the first refusal of each class
	err      error
	stop     chan struct{}
	once     sync.Once
	done     chan struct{}
}

// maxRefusedFor bounds how long one message may keep being refused: a
// restart makes a counter unreachable for milliseconds, not seconds.
const maxRefusedFor = 10 * time.Second

func startIncSender(ctx context.Context, m *mesh.Manager, refs []mesh.ActorRef) *incSender {
	return continueIncSender(ctx, m, refs, make([]int64, len(refs)))
}

// continueIncSender is startIncSender for counters that already took
// accepted[i] sends: it goes on from there.
func continueIncSender(ctx context.Context, m *mesh.Manager, refs []mesh.ActorRef, accepted []int64) *incSender {
	s := &incSender{m: m, refs: refs, skip: make([]atomic.Bool, len(refs)), accepted: slices.Clone(accepted), refused: map[string]int{},
		sample: map[string]error{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for k := 0; ; k++ {
			select {
			case <-s.stop:
				return
			default:
			}
			i := k % len(refs)
			if s.skip[i].Load() {
				continue
			}
			if s.err = s.send(ctx, refs[i], s.accepted[i]+1); s.err != nil {
				return
			}
			s.accepted[i]++
			time.Sleep(200 * time.Microsecond)
		}
	}()
	return s
}

// send sends one "inc", retrying a refusal after a short pause: a refused
// send was not delivered, so the retry cannot double it.
func (s *incSender) send(ctx context.Context, ref mesh.ActorRef, seq int64) error {
	first := time.Now()
	for {
		err := s.m.SendActor(ctx, ref, []byte("seq "+strconv.FormatInt(seq, 10)))
		if err == nil {
			return nil
		}
		c := errClass(err)
		s.refused[c]++
		if s.sample[c] == nil {
			s.sample[c] = err
		}
		if time.Since(first) > maxRefusedFor || ctx.Err() != nil {
			return fmt.Errorf("send to %s refused for %v: %w", ref.ActorID, time.Since(first).Round(time.Millisecond), err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// wait stops the sender and returns why it stopped early, if it did; it
// may be called more than once.
func (s *incSender) wait() error {
	s.once.Do(func() { close(s.stop) })
	<-s.done
	return s.err
}

// getCounter requests "get", retrying refusals like send.
func getCounter(ctx context.Context, m *mesh.Manager, ref mesh.ActorRef) (int64, error) {
	first := time.Now()
	for {
		got, err := m.RequestActor(ctx, ref, []byte("get"))
		if err == nil {
			return strconv.ParseInt(string(got), 10, 64)
		}
		if time.Since(first) > maxRefusedFor || ctx.Err() != nil {
			return 0, fmt.Errorf("get %s: %w", ref.ActorID, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// checkCounters checks that every counter snd did not skip holds exactly
// the sends snd had accepted, each seen once and in order (its "seq"
// answer), and returns the number of sends checked.
func checkCounters(t *testing.T, ctx context.Context, m *mesh.Manager, snd *incSender) int64 {
	t.Helper()
	// A request from the sending node is not ordered behind sends still on
	// their way through a previous owner: read until the value reaches the
	// accepted count or a moment passes; it must then be exactly that.
	time.Sleep(200 * time.Millisecond)
	var total int64
	for i, ref := range snd.refs {
		if snd.skip[i].Load() {
			continue
		}
		want := snd.accepted[i]
		total += want
		var got int64
		for deadline := time.Now().Add(3 * time.Second); ; {
			v, err := getCounter(ctx, m, ref)
			if err != nil {
				t.Fatal(err)
			}
			got = v
			if got >= want || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got != want {
			t.Errorf("%s: get = %d, want %d sends accepted", ref.ActorID, got, want)
		}
		seq, err := m.RequestActor(ctx, ref, []byte("seq"))
		if wantSeq := fmt.Sprintf("%d 0 0 0", want); err != nil || string(seq) != wantSeq {
			t.Errorf("%s: seq = %q, %v; want %q (last, duplicated, reordered, missing)", ref.ActorID, seq, err, wantSeq)
		}
	}
	return total
}

// drainedLine is the stdout line of `meshnode run` after a drain.
var drainedLine = regexp.MustCompile(`^meshnode: drained: (\d+) moved, (\d+) skipped, (\d+) failed, (\d+) not started \((\w+) in `)

// rollMesh is `meshnode run` server processes and an in-process client
// node of mesh "roll" on one Redis, under a fresh namespace.
type rollMesh struct {
	bin, addr, ns string
	rids          []string
	procs         []*proc
	client        *mesh.Node
	args          []string // of `meshnode run`
	all           []*proc
	dead          []bool     // killed servers: not expected to admit a restarted one
	serverEnv     [][]string // each server's CURVE settings (startCurveRollMesh)
}

func startRollMesh(t *testing.T, servers int, args ...string) *rollMesh {
	return startRollMeshOn(t, testredis.Addr(t), servers, args...)
}

// startRollMeshOn is startRollMesh on the Redis at addr.
func startRollMeshOn(t *testing.T, addr string, servers int, args ...string) *rollMesh {
	return startRollMeshWith(t, addr, servers, nil, args...)
}

// startRollMeshWith is startRollMeshOn with clientEnv added to the client
// node's environment.
func startRollMeshWith(t *testing.T, addr string, servers int, clientEnv []string, args ...string) *rollMesh {
	r := newRollMesh(t, addr, args)
	for i := 0; i < servers; i++ {
		r.rids = append(r.rids, fmt.Sprintf("0c000%d", i+1))
	}
	return r.launch(t, clientEnv)
}

// startCurveRollMesh is startRollMeshWith with every link on CURVE: each
// server and the client has its own key pair (so its RID is derived from
// its public key) and every node allows every key, as docs/OPERATIONS.md
// "Link security" tells an operator to set a mesh up.
func startCurveRollMesh(t *testing.T, addr string, servers int, clientEnv []string, args ...string) *rollMesh {
	r := newRollMesh(t, addr, args)
	keys := make([]curve.KeyPair, servers+1) // the last one the client's
	allowed := make([]string, len(keys))
	for i := range keys {
		kp, err := curve.GenerateKeyPair(nil)
		if err != nil {
			t.Fatal(err)
		}
		keys[i], allowed[i] = kp, kp.Public.String()
	}
	env := func(kp curve.KeyPair) []string {
		return []string{"MESHNODE_TRANSPORT__CURVE__ENABLED=true",
			"MESHNODE_TRANSPORT__CURVE__SECRET_KEY=" + kp.Secret.String(),
			"MESHNODE_TRANSPORT__CURVE__ALLOWED_KEYS=" + strings.Join(allowed, ",")}
	}
	for _, kp := range keys[:servers] {
		r.rids = append(r.rids, transport.CurveRID(kp.Public).String())
		r.serverEnv = append(r.serverEnv, env(kp))
	}
	return r.launch(t, append(env(keys[servers]), clientEnv...))
}

func newRollMesh(t *testing.T, addr string, args []string) *rollMesh {
	return &rollMesh{bin: buildMeshnode(t), addr: addr, ns: testredis.Namespace(t), args: append([]string{"run"}, args...)}
}

// launch starts a server for each of r.rids and the client (with
// clientEnv), and waits until every server admitted the others and the
// client sees every server serving.
func (r *rollMesh) launch(t *testing.T, clientEnv []string) *rollMesh {
	for i := range r.rids {
		r.procs = append(r.procs, r.start(t, i, 0))
	}
	r.dead = make([]bool, len(r.rids))
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range r.all {
				p.dump(t)
			}
		}
	})
	waitUntil(t, 20*time.Second, "every server to admit the others", admittedAll(r.procs, r.rids), r.procs...)
	var logs *proc
	r.client, logs = startClient(t, nodeEnv(r.addr, r.ns, "roll", "", clientEnv...))
	r.all = append(r.all, logs)
	waitUntil(t, 20*time.Second, "the client to see every server serving, over an admitted link", func() bool {
		for _, rid := range r.rids {
			if _, ok := servingRun(r.client, rid); !ok || !hasPeer(r.client, rid) {
				return false
			}
		}
		return true
	}, r.procs...)
	return r
}

// hasPeer reports whether n has an admitted link to the node rid (hex):
// placement takes only such candidates, so a test that expects its
// creations spread over every server waits for them (a client whose link
// to one server was still coming up put all ten on the other).
func hasPeer(n *mesh.Node, rid string) bool {
	for _, p := range n.Peers() {
		if hex.EncodeToString(p.RID) == rid {
			return true
		}
	}
	return false
}

// start starts server i's run number run (0: the first).
func (r *rollMesh) start(t *testing.T, i, run int) *proc {
	// ROLLTEST_LOG_LEVEL=debug shows, among others, the messages a server
	// refused and dropped ("one-way message refused") in the dump of a
	// failed run.
	rid, extra := r.rids[i], []string{"MESHNODE_LOG__LEVEL=" + os.Getenv("ROLLTEST_LOG_LEVEL")}
	if r.serverEnv != nil {
		rid, extra = "", append(extra, r.serverEnv[i]...) // CURVE: the RID is the key's
	}
	env := nodeEnv(r.addr, r.ns, "roll", rid, extra...)
	p := startProc(t, r.bin, fmt.Sprintf("n%d.%d", i+1, run), env, r.args...)
	r.all = append(r.all, p)
	return p
}

// restart starts server i again and waits until the client and the other
// servers have admitted its new run and the client sees it serving: the
// rolling-restart step "wait until the restarted node is serving again".
func (r *rollMesh) restart(t *testing.T, i, run int, oldGen uint64) {
	var before []int
	for j, p := range r.procs {
		if j != i && !r.dead[j] {
			before = append(before, p.count("transport: peer admitted", "peer", r.rids[i]))
		}
	}
	r.procs[i] = r.start(t, i, run)
	waitUntil(t, 20*time.Second, fmt.Sprintf("the restarted %s to serve and be admitted", r.procs[i].name), func() bool {
		k := 0
		for j, p := range r.procs {
			if j == i || r.dead[j] {
				continue
			}
			if p.count("transport: peer admitted", "peer", r.rids[i]) <= before[k] || !r.procs[i].seen("transport: peer admitted", "peer", r.rids[j]) {
				return false
			}
			k++
		}
		gen, ok := servingRun(r.client, r.rids[i])
		return ok && gen != oldGen
	}, r.procs...)
}

// The rolling restart keeps every object: three servers are stopped with
// SIGTERM and started again one after the other while a client streams
// increments to 30 counters; each stop drains (the "drained" line counts
// exactly the counters the node owned, exit status 0) and at the end every
// counter holds exactly the increments the client had accepted.
func TestMultiProcessRollingRestartKeepsObjects(t *testing.T) {
	t.Run("null", func(t *testing.T) { rollingRestartKeepsObjects(t, startRollMeshWith) })
	// Each server restarts with its key, so with the same RID, and every
	// link to it is a new CURVE handshake.
	t.Run("curve", func(t *testing.T) { rollingRestartKeepsObjects(t, startCurveRollMesh) })
}

func rollingRestartKeepsObjects(t *testing.T, start func(*testing.T, string, int, []string, ...string) *rollMesh) {
	r := start(t, testredis.Addr(t), 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	m := r.client.Manager()
	const counters = 30
	refs := make([]mesh.ActorRef, counters)
	for i := range refs {
		ref, err := m.CreateActor(ctx, fmt.Sprintf("roll-%d", i), demoapp.CounterType)
		if err != nil {
			t.Fatalf("create counter %d: %v", i, err)
		}
		refs[i] = ref
	}
	own := owners(t, ctx, m, refs)
	for _, rid := range r.rids {
		t.Logf("node %s owns %d counters at the start", rid, countOf(own, rid))
	}

	snd := startIncSender(ctx, m, refs)
	defer func() { _ = snd.wait() }() // a no-op after the test's own wait
	time.Sleep(300 * time.Millisecond)
	for i, rid := range r.rids {
		gen, _ := servingRun(r.client, rid)
		owned := countOf(owners(t, ctx, m, refs), rid)
		p := r.procs[i]
		t0 := time.Now()
		if err := p.stop(t, syscall.SIGTERM); err != nil {
			p.dump(t)
			t.Fatalf("%s exited with %v after SIGTERM, want status 0", p.name, err)
		}
		took := time.Since(t0)
		line, ok := p.stdoutLine("meshnode: drained:")
		if !ok {
			p.dump(t)
			t.Fatalf("%s printed no drained line", p.name)
		}
		t.Logf("%s (owned %d counters) stopped in %v: %s", p.name, owned, took.Round(time.Millisecond), line)
		f := drainedLine.FindStringSubmatch(line)
		if f == nil || f[1] != strconv.Itoa(owned) || f[2] != "0" || f[3] != "0" || f[4] != "0" || f[5] != "completed" {
			p.dump(t)
			t.Fatalf("%s: %q, want %d moved, nothing else, completed", p.name, line, owned)
		}
		if n := countOf(owners(t, ctx, m, refs), rid); n != 0 {
			t.Fatalf("%d counters still name %s after its drain", n, rid)
		}
		r.restart(t, i, 1, gen)
		time.Sleep(200 * time.Millisecond) // traffic to the mesh with the restarted node
	}
	if err := snd.wait(); err != nil {
		t.Fatalf("sender: %v (refusals retried: %v)", err, snd.refused)
	}
	t.Logf("refusals retried by the sender: %v", snd.refused)
	for c, err := range snd.sample {
		t.Logf("  first %s: %v", c, err)
	}

	total := checkCounters(t, ctx, m, snd)
	final := owners(t, ctx, m, refs)
	for _, rid := range r.rids {
		t.Logf("node %s owns %d counters at the end", rid, countOf(final, rid))
	}
	if !t.Failed() {
		t.Logf("%d increments accepted over %d counters, every one counted exactly once", total, counters)
	}
}

// With relocation.drain_on_shutdown=false SIGTERM is the bare §11 shutdown
// of before: the node's owner sweep deletes the authority records of the
// counters it owned, so after its restart they are NotFound (their state
// is lost) and GetOrCreate makes a new generation starting at 0; the other
// node's counters keep their values.
func TestMultiProcessShutdownWithoutDrainRemovesObjects(t *testing.T) {
	r := startRollMesh(t, 2, "--relocation.drain_on_shutdown=false")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := r.client.Manager()
	refs := make([]mesh.ActorRef, 10)
	for i := range refs {
		ref, err := m.CreateActor(ctx, fmt.Sprintf("plain-%d", i), demoapp.CounterType, mesh.WithBody([]byte("7")))
		if err != nil {
			t.Fatal(err)
		}
		refs[i] = ref
		if err := m.SendActor(ctx, ref, []byte("inc")); err != nil {
			t.Fatal(err)
		}
	}
	own := owners(t, ctx, m, refs)
	if countOf(own, r.rids[0]) == 0 || countOf(own, r.rids[1]) == 0 {
		t.Fatalf("placement left a node without counters: %v", own)
	}
	gen, _ := servingRun(r.client, r.rids[0])
	p := r.procs[0]
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		p.dump(t)
		t.Fatalf("%s exited with %v after SIGTERM, want status 0", p.name, err)
	}
	if line, ok := p.stdoutLine("meshnode: drained:"); ok {
		t.Fatalf("%s drained with drain_on_shutdown=false: %s", p.name, line)
	}
	if owned := strconv.Itoa(countOf(own, r.rids[0])); !p.seen("owner sweep", "ours", owned, "deleted", owned) {
		p.dump(t)
		t.Fatalf("%s logged no owner sweep deleting its %s counters", p.name, owned)
	}
	r.restart(t, 0, 1, gen)
	for i, ref := range refs {
		v, err := m.RequestActor(ctx, ref, []byte("get"))
		if own[i] == r.rids[1] {
			if err != nil || string(v) != "8" {
				t.Errorf("%s on the node that kept running: %q, %v; want 8", ref.ActorID, v, err)
			}
			continue
		}
		if !errors.Is(err, mesh.ErrNotFound) {
			t.Errorf("%s of the restarted node: %q, %v; want ErrNotFound (swept)", ref.ActorID, v, err)
			continue
		}
		cr, err := m.GetOrCreateActor(ctx, ref.ActorID, demoapp.CounterType)
		if err != nil || cr.Outcome != mesh.Created || cr.Ref.ObjectGeneration <= ref.ObjectGeneration {
			t.Fatalf("%s again: %+v, %v; want a new generation created", ref.ActorID, cr, err)
		}
		if v, err := m.RequestActor(ctx, cr.Ref, []byte("get")); err != nil || string(v) != "0" {
			t.Errorf("%s recreated: %q, %v; want 0", ref.ActorID, v, err)
		}
	}
}
