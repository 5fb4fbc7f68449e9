package storetest

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// RunStress runs the model-checked concurrency stress test against h.
//
// Why this design is sound despite concurrency. Workers run random batches
// (conditions, puts, deletes) over a small key space split three ways:
//
//   - Owned keys (and one "pair" of keys per worker) are written only by
//     their worker, which runs sequentially. Its model of them is therefore
//     exact at every instant between its own calls: any Read of them must
//     equal the model, a batch whose owned conditions the model says hold
//     must be Applied (unless it also has shared conditions), and one whose
//     deliberately false condition the model knows of must be a Conflict that
//     changed nothing. The pair is always written together in one batch with
//     one value, so any snapshot scan must show both keys equal (atomic
//     commits are never seen half-done).
//   - Shared keys are contended. Every mutation of a shared key is
//     conditioned on that key's state as just read, so the applied writes of
//     one key form a chain: version -> next version. Versions are never
//     reused, hence no version may have two applied successors (that would be
//     two winners of one CAS), every issued version must be reachable from
//     the key's creations, and the chain's one open end must be what the key
//     finally holds. Shared keys split into ones that are deleted now and
//     then and ones that never are: for the latter a Missing condition may
//     win exactly once.
//   - Every value is unique. Values of conflicted batches go to a set that
//     no later Read or Scan may ever show; every (version, value) any Read or
//     Scan observed must be one an Applied result reported.
//
// A Conflict of a batch whose shared conditions are all Version conditions
// is spurious if none of those versions ever got a successor and each is
// still the key's final version: a version, once replaced, never returns, so
// all conditions held throughout. Expiry is not exercised here (Run covers
// it); the stress runs on a clock that the test does not move.
func RunStress(t *testing.T, h Harness) {
	t.Helper()
	h.check(t)
	t.Run(h.Name, func(t *testing.T) {
		t.Run("ModelCheckedStress", func(t *testing.T) { stress(t, h) })
	})
}

const (
	stressWorkers = 6
	ownedPerW     = 3
	sharedDel     = 2 // shared keys that are sometimes deleted
	sharedKeep    = 2 // shared keys never deleted
)

func ownedKey(g, i int) string { return fmt.Sprintf("st/o/%02d/%d", g, i) }
func pairKey(g int, ab string) string {
	return fmt.Sprintf("st/p/%02d/%s", g, ab)
}

var sharedKeys = func() []string {
	var ks []string
	for i := range sharedDel {
		ks = append(ks, fmt.Sprintf("st/s/del%d", i))
	}
	for i := range sharedKeep {
		ks = append(ks, fmt.Sprintf("st/s/keep%d", i))
	}
	return ks
}()

func deletable(k string) bool { return strings.HasPrefix(k, "st/s/del") }

type transition struct{ from, to, value string } // "" = Missing

type observation struct{ key, version, value, by string }

type vcond struct{ key, version string }

// world is what all workers learned, guarded by mu.
type world struct {
	mu          sync.Mutex
	committed   map[string]map[string]string // key -> version -> value, from Applied results
	transitions map[string][]transition      // shared key -> applied mutations
	conflicted  map[string]bool              // values of conflicted batches
	obs         []observation
	spurious    [][]vcond // conflicted batches with only Version conditions on shared keys
	errs        []error
}

func (w *world) fail(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, fmt.Errorf(format, args...))
}

func (w *world) failed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.errs) > 0
}

func (w *world) observe(o ...observation) {
	w.mu.Lock()
	w.obs = append(w.obs, o...)
	w.mu.Unlock()
}

type worker struct {
	g     int
	s     locstore.Store
	w     *world
	rng   *rand.Rand
	t     *testing.T
	model map[string]state // owned and pair keys: exact
	old   map[string][]string
	ops   int
	stats map[string]int
}

func (wk *worker) value(key string) []byte {
	pad := strings.Repeat(".", wk.rng.IntN(64))
	return fmt.Appendf(nil, "g%02d op%05d %s %s", wk.g, wk.ops, key, pad)
}

// correct is the condition the exact model says holds for an owned key.
func (wk *worker) correct(k string) locstore.Condition {
	if m := wk.model[k]; m.Found {
		return locstore.IfVersion(k, m.Version)
	}
	return locstore.IfMissing(k)
}

// wrong is a condition the exact model says fails for an owned key.
func (wk *worker) wrong(k string) locstore.Condition {
	m := wk.model[k]
	olds := wk.old[k]
	switch {
	case m.Found && (len(olds) == 0 || wk.rng.IntN(2) == 0):
		return locstore.IfMissing(k)
	case len(olds) > 0:
		return locstore.IfVersion(k, olds[wk.rng.IntN(len(olds))]) // a replaced version never returns
	default:
		return locstore.IfVersion(k, "never-issued-"+k)
	}
}

func (wk *worker) write(req locstore.WriteRequest) (locstore.WriteResult, bool) {
	res, err := wk.s.Write(wk.t.Context(), req)
	if err != nil {
		wk.w.fail("worker %d op %d: Write: %v", wk.g, wk.ops, err)
		return res, false
	}
	if res.Applied && len(res.Versions) != len(req.Mutations) {
		wk.w.fail("worker %d op %d: %d versions for %d mutations", wk.g, wk.ops, len(res.Versions), len(req.Mutations))
		return res, false
	}
	return res, true
}

// record stores the outcome of a batch in the world and the model.
func (wk *worker) record(req locstore.WriteRequest, res locstore.WriteResult, sharedFrom map[string]string) {
	wk.w.mu.Lock()
	defer wk.w.mu.Unlock()
	for i, m := range req.Mutations {
		if !res.Applied {
			if m.Kind == locstore.MutPut {
				wk.w.conflicted[string(m.Value)] = true
			}
			continue
		}
		to := res.Versions[i]
		if m.Kind == locstore.MutPut {
			vs := wk.w.committed[m.Key]
			if vs == nil {
				vs = map[string]string{}
				wk.w.committed[m.Key] = vs
			}
			if prev, dup := vs[to]; dup {
				wk.w.errs = append(wk.w.errs, fmt.Errorf("key %q: version %q issued twice (values %q, %q)", m.Key, to, prev, m.Value))
			}
			vs[to] = string(m.Value)
		}
		if from, shared := sharedFrom[m.Key]; shared {
			wk.w.transitions[m.Key] = append(wk.w.transitions[m.Key], transition{from: from, to: to, value: string(m.Value)})
			continue
		}
		if prev := wk.model[m.Key]; prev.Found {
			wk.old[m.Key] = append(wk.old[m.Key], prev.Version)
		}
		if m.Kind == locstore.MutPut {
			wk.model[m.Key] = state{Found: true, Value: string(m.Value), Version: to}
		} else {
			wk.model[m.Key] = state{}
		}
	}
}

// verify reads keys the worker owns and compares them with the exact model.
func (wk *worker) verify(keys ...string) bool {
	for _, k := range keys {
		r, err := wk.s.Read(wk.t.Context(), k)
		if err != nil {
			wk.w.fail("worker %d op %d: Read %q: %v", wk.g, wk.ops, k, err)
			return false
		}
		if got := stateOf(r); got != wk.model[k] {
			wk.w.fail("worker %d op %d: owned key %q reads %v, model %v", wk.g, wk.ops, k, got, wk.model[k])
			return false
		}
	}
	return true
}

func (wk *worker) ownedKeys() []string {
	ks := []string{pairKey(wk.g, "a"), pairKey(wk.g, "b")}
	for i := range ownedPerW {
		ks = append(ks, ownedKey(wk.g, i))
	}
	return ks
}

// ownedBatch: conditions and mutations on owned keys only. The model knows
// the outcome exactly.
func (wk *worker) ownedBatch() bool {
	n := 1 + wk.rng.IntN(ownedPerW)
	perm := wk.rng.Perm(ownedPerW)[:n]
	falseAt := -1
	if wk.rng.IntN(6) == 0 {
		falseAt = wk.rng.IntN(n)
	}
	var req locstore.WriteRequest
	var keys []string
	for j, i := range perm {
		k := ownedKey(wk.g, i)
		keys = append(keys, k)
		switch {
		case j == falseAt:
			req.Conditions = append(req.Conditions, wk.wrong(k))
		case wk.rng.IntN(2) == 0:
			req.Conditions = append(req.Conditions, wk.correct(k))
		}
		switch r := wk.rng.IntN(10); {
		case r < 6:
			req.Mutations = append(req.Mutations, locstore.Put(k, wk.value(k)))
		case r < 9:
			req.Mutations = append(req.Mutations, locstore.Delete(k))
		}
	}
	if len(req.Conditions)+len(req.Mutations) == 0 {
		req.Conditions = append(req.Conditions, wk.correct(keys[0]))
	}
	res, ok := wk.write(req)
	if !ok {
		return false
	}
	if want := falseAt < 0; res.Applied != want {
		wk.w.fail("worker %d op %d: owned batch Applied=%v, the exact model says %v (conditions %v)", wk.g, wk.ops, res.Applied, want, req.Conditions)
		return false
	}
	wk.record(req, res, nil)
	if res.Applied {
		wk.stats["owned applied"]++
		return true
	}
	wk.stats["owned conflict (expected)"]++
	return wk.verify(keys...)
}

// pairBatch writes both pair keys with one value (or deletes both).
func (wk *worker) pairBatch() bool {
	a, b := pairKey(wk.g, "a"), pairKey(wk.g, "b")
	req := locstore.WriteRequest{Conditions: []locstore.Condition{wk.correct(a), wk.correct(b)}}
	if wk.rng.IntN(4) == 0 {
		req.Mutations = []locstore.Mutation{locstore.Delete(a), locstore.Delete(b)}
	} else {
		v := wk.value("pair")
		req.Mutations = []locstore.Mutation{locstore.Put(a, v), locstore.Put(b, v)}
	}
	res, ok := wk.write(req)
	if !ok {
		return false
	}
	if !res.Applied {
		wk.w.fail("worker %d op %d: pair batch with conditions the exact model says hold got Conflict", wk.g, wk.ops)
		return false
	}
	wk.record(req, res, nil)
	wk.stats["pair applied"]++
	return true
}

// sharedBatch: read-then-CAS on one or two contended keys, sometimes with a
// Version condition on a further shared key and an owned mutation.
func (wk *worker) sharedBatch() bool {
	perm := wk.rng.Perm(len(sharedKeys))
	n := 1 + wk.rng.IntN(2)
	extra := wk.rng.IntN(3) == 0 && n < len(sharedKeys)
	var req locstore.WriteRequest
	from := map[string]string{}
	var vconds []vcond
	onlyVersion := true
	for j, i := range perm[:n+btoi(extra)] {
		k := sharedKeys[i]
		r, err := wk.s.Read(wk.t.Context(), k)
		if err != nil {
			wk.w.fail("worker %d op %d: Read %q: %v", wk.g, wk.ops, k, err)
			return false
		}
		if r.Found {
			wk.w.observe(observation{k, r.Version, string(r.Value), "read"})
		}
		if j == n { // the extra key: a condition only, and only on a present key
			if r.Found {
				req.Conditions = append(req.Conditions, locstore.IfVersion(k, r.Version))
				vconds = append(vconds, vcond{k, r.Version})
			}
			continue
		}
		if r.Found {
			req.Conditions = append(req.Conditions, locstore.IfVersion(k, r.Version))
			vconds = append(vconds, vcond{k, r.Version})
			from[k] = r.Version
		} else {
			req.Conditions = append(req.Conditions, locstore.IfMissing(k))
			onlyVersion = false
			from[k] = ""
		}
		if r.Found && deletable(k) && wk.rng.IntN(4) == 0 {
			req.Mutations = append(req.Mutations, locstore.Delete(k))
		} else {
			req.Mutations = append(req.Mutations, locstore.Put(k, wk.value(k)))
		}
	}
	runtime.Gosched() // widen the read-to-write window: more contention
	var owned string
	if wk.rng.IntN(2) == 0 {
		owned = ownedKey(wk.g, wk.rng.IntN(ownedPerW))
		req.Conditions = append(req.Conditions, wk.correct(owned))
		req.Mutations = append(req.Mutations, locstore.Put(owned, wk.value(owned)))
	}
	res, ok := wk.write(req)
	if !ok {
		return false
	}
	wk.record(req, res, from)
	if res.Applied {
		wk.stats["shared applied"]++
		return true
	}
	wk.stats["shared conflict"]++
	if onlyVersion {
		wk.w.mu.Lock()
		wk.w.spurious = append(wk.w.spurious, vconds)
		wk.w.mu.Unlock()
	}
	if owned != "" {
		return wk.verify(owned)
	}
	return true
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (wk *worker) readCheck() bool {
	wk.stats["reads"]++
	k := sharedKeys[wk.rng.IntN(len(sharedKeys))]
	r, err := wk.s.Read(wk.t.Context(), k)
	if err != nil {
		wk.w.fail("worker %d op %d: Read %q: %v", wk.g, wk.ops, k, err)
		return false
	}
	if r.Found {
		wk.w.observe(observation{k, r.Version, string(r.Value), "read"})
	}
	owned := wk.ownedKeys()
	return wk.verify(owned[wk.rng.IntN(len(owned))])
}

func (wk *worker) run(ops int) {
	for wk.ops = 0; wk.ops < ops; wk.ops++ {
		if wk.w.failed() {
			return
		}
		var ok bool
		switch p := wk.rng.IntN(100); {
		case p < 30:
			ok = wk.ownedBatch()
		case p < 40:
			ok = wk.pairBatch()
		case p < 80:
			ok = wk.sharedBatch()
		default:
			ok = wk.readCheck()
		}
		if ok && wk.ops%25 == 24 {
			ok = wk.verify(wk.ownedKeys()...)
		}
		if !ok {
			return
		}
	}
}

// scanner runs whole snapshot scans until stop closes, checking the pair
// invariant on every completed snapshot and recording what it saw.
func scanner(t *testing.T, s locstore.Store, w *world, rng *rand.Rand, stop <-chan struct{}) (scans, expired int) {
	for {
		select {
		case <-stop:
			return scans, expired
		default:
		}
		limit := 1 + rng.IntN(40)
		var items []locstore.Item
		cursor := ""
		for {
			p, err := s.Scan(t.Context(), locstore.ScanRequest{Prefix: "st/", Limit: limit, Cursor: cursor})
			if err != nil {
				w.fail("scanner: %v", err)
				return scans, expired
			}
			if p.Expired {
				expired++
				items, cursor = nil, ""
				continue
			}
			if len(p.Items) > limit {
				w.fail("scanner: page of %d items, limit %d", len(p.Items), limit)
				return scans, expired
			}
			for _, it := range p.Items {
				if n := len(items); n > 0 && items[n-1].Key >= it.Key {
					w.fail("scanner: %q after %q", it.Key, items[n-1].Key)
					return scans, expired
				}
				items = append(items, it)
			}
			if p.Next == "" {
				break
			}
			cursor = p.Next
		}
		scans++
		byKey := map[string]locstore.Item{}
		var obs []observation
		for _, it := range items {
			byKey[it.Key] = it
			obs = append(obs, observation{it.Key, it.Version, string(it.Value), "scan"})
		}
		w.observe(obs...)
		for g := range stressWorkers {
			a, okA := byKey[pairKey(g, "a")]
			b, okB := byKey[pairKey(g, "b")]
			if okA != okB || string(a.Value) != string(b.Value) {
				w.fail("scanner: snapshot shows half a batch: pair %d a=%v %q, b=%v %q", g, okA, a.Value, okB, b.Value)
				return scans, expired
			}
		}
	}
}

func stress(t *testing.T, h Harness) {
	s := h.open(t)
	ops := 300
	if testing.Short() {
		ops = 100
	}
	seed := uint64(time.Now().UnixNano())
	w := &world{
		committed:   map[string]map[string]string{},
		transitions: map[string][]transition{},
		conflicted:  map[string]bool{},
	}
	workers := make([]*worker, stressWorkers)
	start := make(chan struct{}) // released together, so they overlap
	var wg sync.WaitGroup
	for g := range workers {
		wk := &worker{
			g: g, s: s, w: w, t: t,
			rng:   rand.New(rand.NewPCG(seed, uint64(g))),
			model: map[string]state{},
			old:   map[string][]string{},
			stats: map[string]int{},
		}
		workers[g] = wk
		wg.Go(func() {
			<-start
			wk.run(ops)
		})
	}
	stop := make(chan struct{})
	scanDone := make(chan [2]int)
	go func() {
		sc, ex := scanner(t, s, w, rand.New(rand.NewPCG(seed, 999)), stop)
		scanDone <- [2]int{sc, ex}
	}()
	close(start)
	wg.Wait()
	close(stop)
	sc := <-scanDone
	for _, err := range w.errs {
		t.Errorf("seed %d: %v", seed, err)
	}
	if t.Failed() {
		return
	}

	// Owned keys: the exact model, afterwards.
	total := map[string]int{}
	for _, wk := range workers {
		for _, k := range wk.ownedKeys() {
			if got := stateOf(read(t, s, k)); got != wk.model[k] {
				t.Errorf("seed %d: owned key %q reads %v, model %v", seed, k, got, wk.model[k])
			}
		}
		for k, v := range wk.stats {
			total[k] += v
		}
	}

	// Everything observed was committed, nothing conflicted was observed.
	for _, o := range w.obs {
		if w.conflicted[o.value] {
			t.Errorf("seed %d: %s of %q shows %q, written by a batch that got Conflict", seed, o.by, o.key, trunc(o.value))
		} else if v, ok := w.committed[o.key][o.version]; !ok || v != o.value {
			t.Errorf("seed %d: %s of %q shows version %q value %q; Applied results say %q (known %v)", seed, o.by, o.key, o.version, trunc(o.value), trunc(v), ok)
		}
	}

	// Shared keys: each chain is a single history ending in the final state.
	final := map[string]state{}
	for _, k := range sharedKeys {
		final[k] = stateOf(read(t, s, k))
		checkChain(t, seed, k, w.transitions[k], final[k], w.committed[k])
	}
	for _, conds := range w.spurious {
		held := true
		for _, c := range conds {
			if hasSuccessor(w.transitions[c.key], c.version) || final[c.key].Version != c.version {
				held = false
				break
			}
		}
		if held {
			t.Errorf("seed %d: Conflict although every condition %v held throughout (no version ever replaced)", seed, conds)
		}
	}
	t.Logf("%s: seed %d, %d workers x %d ops: %v; %d observations checked; scanner %d snapshots (%d Expired restarts)",
		h.Name, seed, stressWorkers, ops, total, len(w.obs), sc[0], sc[1])
}

func hasSuccessor(trs []transition, v string) bool {
	for _, tr := range trs {
		if tr.from == v {
			return true
		}
	}
	return false
}

// checkChain verifies the applied mutations of one shared key form one
// history from Missing to the final state (see RunStress).
func checkChain(t *testing.T, seed uint64, key string, trs []transition, final state, committed map[string]string) {
	t.Helper()
	succ := map[string]transition{}
	created := 0
	fromMissing, toMissing := 0, 0
	for _, tr := range trs {
		if tr.from == "" {
			fromMissing++
		} else {
			if prev, dup := succ[tr.from]; dup {
				t.Errorf("seed %d: %q: two applied writes on version %q (-> %q and -> %q): two CAS winners", seed, key, tr.from, prev.to, tr.to)
				return
			}
			succ[tr.from] = tr
		}
		if tr.to == "" {
			toMissing++
		} else {
			created++
		}
	}
	if !deletable(key) && (toMissing > 0 || fromMissing > 1) {
		t.Errorf("seed %d: %q is never deleted, yet %d Missing conditions won (want at most 1)", seed, key, fromMissing)
	}
	visited := map[string]bool{}
	var ends []string
	for _, tr := range trs {
		if tr.from != "" {
			continue
		}
		for cur := tr.to; cur != ""; {
			if visited[cur] {
				t.Errorf("seed %d: %q: version %q reached twice: the history is not a chain", seed, key, cur)
				return
			}
			visited[cur] = true
			nxt, ok := succ[cur]
			if !ok {
				ends = append(ends, cur)
				break
			}
			cur = nxt.to
		}
	}
	if len(visited) != created {
		t.Errorf("seed %d: %q: %d versions created but only %d reachable from its creations", seed, key, created, len(visited))
	}
	finalMissing := btoi(!final.Found)
	if fromMissing != toMissing+1-finalMissing {
		t.Errorf("seed %d: %q: %d creations, %d deletes, final %v: inconsistent", seed, key, fromMissing, toMissing, final)
	}
	switch {
	case len(ends) > 1:
		t.Errorf("seed %d: %q: %d open ends %q: several writes won on one state", seed, key, len(ends), ends)
	case len(ends) == 1 && (!final.Found || final.Version != ends[0] || final.Value != committed[ends[0]]):
		t.Errorf("seed %d: %q holds %v; the applied history ends at version %q", seed, key, final, ends[0])
	case len(ends) == 0 && final.Found:
		t.Errorf("seed %d: %q holds %v; the applied history ends deleted", seed, key, final)
	}
}
