package mesh

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// seqType is an Actor that checks per-sender order: "s:<sender>:<n>" and
// "q:<sender>:<n>" must arrive with n = last+1 for their sender. Its state
// (last n per sender, violations, turns) moves with it (PreserveStateWith).
const seqType = "test.seq"

type seqState struct {
	Last       map[string]int `json:"last"`
	Duplicates int            `json:"duplicates"`
	Gaps       int            `json:"gaps"`
	Turns      int            `json:"turns"`
	Hops       int            `json:"hops"` // restores
	// Seen records the first out-of-order arrivals: sender, the last n
	// before, the n that came, and how many restores the object had.
	Seen []string `json:"seen,omitempty"`
}

type seqObj struct {
	mu  sync.Mutex
	st  seqState
	run *atomic.Int32 // instances of this id in a turn right now (all nodes)
	bad *atomic.Int32 // turns that overlapped another instance's turn
}

// seqRunning counts, per object id, the turns in progress on any node: two
// owners dispatching at once would overlap.
type seqRegistry struct {
	mu      sync.Mutex
	running map[string]*atomic.Int32
	overlap atomic.Int32
}

func (r *seqRegistry) counter(id string) *atomic.Int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.running[id]
	if !ok {
		c = new(atomic.Int32)
		r.running[id] = c
	}
	return c
}

func (s *seqObj) Receive(t *spot.Turn, env spot.Envelope) error {
	if s.run.Add(1) > 1 {
		s.bad.Add(1)
	}
	defer s.run.Add(-1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Turns++
	body := string(env.Body)
	if body == "state" {
		b, _ := json.Marshal(s.st)
		return t.Reply(b)
	}
	parts := strings.Split(body, ":")
	if len(parts) == 3 {
		n, _ := strconv.Atoi(parts[2])
		switch last := s.st.Last[parts[1]]; {
		case n == last+1:
			s.st.Last[parts[1]] = n
		case n <= last:
			s.st.Duplicates++
			s.note(parts[1], last, n)
		default:
			s.st.Gaps++
			s.st.Last[parts[1]] = n
			s.note(parts[1], last, n)
		}
	}
	if env.Kind == spot.Request {
		return t.Reply([]byte("ok:" + parts[len(parts)-1]))
	}
	return nil
}

// note keeps the first few out-of-order arrivals for the failure message.
func (s *seqObj) note(sender string, last, n int) {
	if len(s.st.Seen) < 8 {
		s.st.Seen = append(s.st.Seen, fmt.Sprintf("%s: %d after %d (restore %d)", sender, n, last, s.st.Hops))
	}
}

type seqSnapshot struct{ reg *seqRegistry }

func (a seqSnapshot) Snapshot(h spot.Handler) ([]byte, error) {
	s := h.(*seqObj)
	s.mu.Lock()
	defer s.mu.Unlock()
	return json.Marshal(s.st)
}

func (a seqSnapshot) Restore(_ context.Context, req spot.CreateRequest, state []byte) (spot.Handler, error) {
	var st seqState
	if err := json.Unmarshal(state, &st); err != nil {
		return nil, err
	}
	st.Hops++
	return &seqObj{st: st, run: a.reg.counter(req.ID), bad: &a.reg.overlap}, nil
}

// The §12 relocation invariant: many moves back and forth across three
// nodes while senders stream sequence-numbered Sends and Requests to every
// object. Every accepted message is seen exactly once and in per-sender
// order, every Request gets one answer, no two nodes ever run one object's
// turns at the same time nor serve it at once (sampled continuously), and
// the state survives every hop (≥ 10).
func TestRelocationInvariantUnderTraffic(t *testing.T) {
	t.Run("memory", func(t *testing.T) { runRelocationInvariant(t, nil) })
	t.Run("redis", func(t *testing.T) { runRelocationInvariant(t, newRedisLocation(t)) })
}

// registerSeqType registers the seqType factory on f's registry.
func registerSeqType(t *testing.T, f *fixture) *seqRegistry {
	t.Helper()
	reg := &seqRegistry{running: map[string]*atomic.Int32{}}
	if err := f.reg.Register(spot.Factory{StableType: seqType, Kind: spot.KindActor, Policy: spot.PolicyPreserveState,
		Snapshot: seqSnapshot{reg}, New: func(_ context.Context, req spot.CreateRequest) (spot.Handler, error) {
			return &seqObj{st: seqState{Last: map[string]int{}}, run: reg.counter(req.ID), bad: &reg.overlap}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	return reg
}

func runRelocationInvariant(t *testing.T, loc locstore.Store) {
	f := newFixture(t)
	reg := registerSeqType(t, f)
	c := newClusterOn(t, f, loc, 4, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		// Cached routes age out during the run: besides command 50, a
		// sender meets a new owner by re-reading the store while earlier
		// messages are still passed on by the previous owner, which the
		// route switch barrier keeps in order (route_barrier.go).
		cfg.Routing.RouteCacheMaxAge = 50 * time.Millisecond
		if testing.Verbose() {
			cfg.Log.Level = config.LogInfo
		}
	})
	ctx := ctxT(t, 120*time.Second)
	const objects, minPerSender, hops = 3, 100, 10
	refs := make([]ActorRef, objects)
	for i := range refs {
		ref, err := c.m(0).CreateActor(ctx, fmt.Sprintf("seq-%d", i), seqType)
		if err != nil {
			t.Fatal(err)
		}
		refs[i] = ref
	}
	var wg, senders sync.WaitGroup
	var sendErrs, reqErrs atomic.Int32
	stop := make(chan struct{})
	// sent[i][s] is the last sequence number sender s had accepted for
	// object i when it stopped.
	sent := make([][]int, objects)
	for i := range sent {
		sent[i] = make([]int, len(c.nodes))
	}
	// Senders: node 0 (a client) and every server, one per object each.
	// They keep going until the mover is done (and at least minPerSender),
	// so that every move happens under traffic.
	for i, ref := range refs {
		for s := range c.nodes {
			senders.Add(1)
			go func(i, s int, ref ActorRef) {
				defer senders.Done()
				sender := fmt.Sprintf("n%d", s)
				for n := 1; ; n++ {
					select {
					case <-stop:
						if n > minPerSender {
							sent[i][s] = n - 1
							return
						}
					default:
					}
					for {
						var err error
						if n%10 == 0 {
							var got []byte
							got, err = c.m(s).RequestActor(ctx, ref, []byte(fmt.Sprintf("q:%s:%d", sender, n)))
							if err == nil && string(got) != fmt.Sprintf("ok:%d", n) {
								t.Errorf("request %s:%d answered %q", sender, n, got)
							}
							if err != nil {
								reqErrs.Add(1)
							}
						} else {
							err = c.m(s).SendActor(ctx, ref, []byte(fmt.Sprintf("s:%s:%d", sender, n)))
							if err != nil {
								sendErrs.Add(1)
							}
						}
						if err == nil {
							break
						}
						if ctx.Err() != nil {
							t.Errorf("sender %s object %d: %v", sender, i, err)
							sent[i][s] = n - 1
							return
						}
						time.Sleep(2 * time.Millisecond)
					}
				}
			}(i, s, ref)
		}
	}
	// The watcher: "exactly one owner at any time", sampled continuously —
	// never two nodes dispatching one object (state serving) at once.
	watch := watchOwnership(c, refs, stop)
	// The mover: each object hops `hops` times, each time from its current
	// owner to another server.
	moved := make([]int, objects)
	var relayed int
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(stop)
		r := rand.New(rand.NewSource(1))
		for round := 0; round < hops*3 && ctx.Err() == nil; round++ {
			for i, ref := range refs {
				if moved[i] >= hops {
					continue
				}
				src := ownerIndex(t, c, record.ObjectActor, ref.ActorID)
				dst := 1 + r.Intn(len(c.nodes)-1)
				if dst == src {
					dst = 1 + dst%(len(c.nodes)-1)
				}
				res, err := c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID()))
				if err != nil {
					t.Errorf("move %d of %s: %v", moved[i]+1, ref.ActorID, err)
					return
				}
				if res.Outcome == Moved {
					if !res.Confirmed {
						t.Errorf("move of %s not confirmed", ref.ActorID)
					}
					moved[i]++
					relayed += res.Relayed
				}
			}
		}
	}()
	wg.Wait()
	senders.Wait()
	twoServing, samples := watch()
	if twoServing != 0 {
		t.Errorf("%d of %d samples found two nodes serving one object", twoServing, samples)
	}
	t.Logf("ownership sampled %d times", samples)
	var forwarded uint64
	for _, n := range c.nodes {
		forwarded += n.ObjectStats().FollowForwarded
	}
	// Traffic met the moves: messages were relayed from ingress holds and
	// passed on by previous owners.
	if relayed == 0 || forwarded == 0 {
		t.Errorf("relayed %d, forwarded %d: the moves did not happen under traffic", relayed, forwarded)
	}
	t.Logf("relayed %d, forwarded %d", relayed, forwarded)
	for i, ref := range refs {
		// A sender's last one-way message may still be on its way (passed
		// on by a previous owner) when node 0's state request arrives:
		// nothing orders them. Accepted means delivered eventually.
		st := seqStateOf(t, ctx, c, ref)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			behind := false
			for s := range c.nodes {
				behind = behind || st.Last[fmt.Sprintf("n%d", s)] < sent[i][s]
			}
			if !behind {
				break
			}
			time.Sleep(10 * time.Millisecond)
			st = seqStateOf(t, ctx, c, ref)
		}
		for s := range c.nodes {
			if last := st.Last[fmt.Sprintf("n%d", s)]; last != sent[i][s] {
				t.Errorf("%s: sender n%d last seen %d, sent %d", ref.ActorID, s, last, sent[i][s])
			}
		}
		if st.Duplicates != 0 || st.Gaps != 0 {
			t.Errorf("%s: %d duplicates, %d gaps: %v", ref.ActorID, st.Duplicates, st.Gaps, st.Seen)
		}
		if moved[i] < hops || st.Hops != moved[i] {
			t.Errorf("%s: moved %d times, state restored %d times (want ≥ %d, equal)", ref.ActorID, moved[i], st.Hops, hops)
		}
		t.Logf("%s: %d moves, %d turns, state %+v", ref.ActorID, moved[i], st.Turns, st.Last)
	}
	if n := reg.overlap.Load(); n != 0 {
		t.Errorf("%d turns overlapped another instance's turn (two owners)", n)
	}
	var barriers, late uint64
	for _, n := range c.nodes {
		barriers += n.ObjectStats().RouteBarriers
		late += n.ObjectStats().RouteBarriersTimedOut
	}
	if barriers == 0 {
		t.Error("no sender switched its route with a barrier: the test did not exercise the switch")
	}
	t.Logf("send retries %d, request retries %d, route switch barriers %d (%d unanswered)", sendErrs.Load(), reqErrs.Load(), barriers, late)
	for i, n := range c.nodes {
		st := n.ObjectStats()
		t.Logf("node %d: fence refused %d, follow refused %d, forwarded %d", i, st.FenceRefused, st.FollowRefused, st.FollowForwarded)
	}
}

// watchOwnership samples, until stop closes, how many nodes serve each of
// refs — "exactly one owner at any time": never two nodes dispatching one
// object at once. The returned wait ends the watch and reports the samples
// that found two serving nodes, and all samples.
func watchOwnership(c *cluster, refs []ActorRef, stop <-chan struct{}) (wait func() (twoServing, samples int64)) {
	var two, all atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, ref := range refs {
				serving := 0
				for _, n := range c.nodes {
					if st, ok := n.obj.stateOf(actorKey(ref.ActorID)); ok && st == hostServing {
						serving++
					}
				}
				if serving > 1 {
					two.Add(1)
				}
			}
			all.Add(1)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	return func() (int64, int64) { <-done; return two.Load(), all.Load() }
}
