package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/mesh/directory"
)

// proc is one meshnode process whose JSON log lines (stderr) and stdout
// lines are collected.
type proc struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	logs   []map[string]any
	stdout []string
	done   chan struct{} // both outputs read to the end
}

func (p *proc) collect(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		p.mu.Lock()
		p.logs = append(p.logs, m)
		p.mu.Unlock()
	}
}

func (p *proc) collectStdout(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		p.mu.Lock()
		p.stdout = append(p.stdout, sc.Text())
		p.mu.Unlock()
	}
}

// stdoutLine returns the first stdout line starting with prefix.
func (p *proc) stdoutLine(prefix string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.stdout {
		if strings.HasPrefix(l, prefix) {
			return l, true
		}
	}
	return "", false
}

// stop sends sig and returns the process's exit error once it ended and
// its output was read (nil: exit status 0).
func (p *proc) stop(t *testing.T, sig os.Signal) error {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	<-p.done
	return p.cmd.Wait()
}

// seenWith reports whether a log line has msg and its value of key
// contains part.
func (p *proc) seenWith(msg, key, part string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.logs {
		if m["msg"] == msg && strings.Contains(fmt.Sprint(m[key]), part) {
			return true
		}
	}
	return false
}

// seen reports whether a log line has msg and every key=value given.
func (p *proc) seen(msg string, kv ...string) bool { return p.count(msg, kv...) > 0 }

// count returns how many log lines have msg and every key=value given.
func (p *proc) count(msg string, kv ...string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, m := range p.logs {
		if m["msg"] != msg {
			continue
		}
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			if fmt.Sprint(m[kv[i]]) != kv[i+1] {
				ok = false
				break
			}
		}
		if ok {
			n++
		}
	}
	return n
}

func (p *proc) dump(t *testing.T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.logs {
		b, _ := json.Marshal(m)
		t.Logf("%s: %s", p.name, b)
	}
	for _, l := range p.stdout {
		t.Logf("%s stdout: %s", p.name, l)
	}
}

func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool, procs ...*proc) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			for _, p := range procs {
				p.dump(t)
			}
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// buildMeshnode builds the binary of this package into a temporary folder.
// MESHNODE_TEST_SERVER_BINARY names another build instead — an older
// release, for a mixed-version check of the multi-process tests (the test
// process, on this code, is the client; docs/OPERATIONS.md "Operator
// try-out 9"); the test logs it.
func buildMeshnode(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("MESHNODE_TEST_SERVER_BINARY"); bin != "" {
		t.Logf("MESHNODE_TEST_SERVER_BINARY: the servers run %s, not this code", bin)
		return bin
	}
	bin := filepath.Join(t.TempDir(), "meshnode")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// nodeEnv is the configuration of a node of mesh on the Redis at addr under
// namespace ns, with short lease timing, as MESHNODE_ variables (extra ones
// appended, overriding); rid "" means a random RID.
func nodeEnv(addr, ns, mesh, rid string, extra ...string) []string {
	return append([]string{
		"MESHNODE_NODE__MESH_NAME=" + mesh,
		"MESHNODE_NODE__ROUTING_ID=" + rid,
		"MESHNODE_NODE__ENDPOINT=tcp://127.0.0.1:0",
		"MESHNODE_LOCATION_STORE__PROVIDER=redis",
		"MESHNODE_LOCATION_STORE__REDIS__ADDRS=" + addr,
		"MESHNODE_LOCATION_STORE__REDIS__NAMESPACE=" + ns,
		"MESHNODE_RELOCATION_STORE__PROVIDER=redis",
		"MESHNODE_RELOCATION_STORE__REDIS__ADDRS=" + addr,
		"MESHNODE_RELOCATION_STORE__REDIS__NAMESPACE=" + ns + "-reloc",
		// 300ms + 200ms < 2s - 500ms (§5)
		"MESHNODE_LEASE__RENEW_INTERVAL=300ms",
		"MESHNODE_LEASE__RENEW_TIMEOUT=200ms",
		"MESHNODE_LEASE__TTL=2s",
		"MESHNODE_LEASE__FENCING_MARGIN=500ms",
		"MESHNODE_LOG__FORMAT=json",
		"MESHNODE_LOG__LEVEL=info",
	}, extra...)
}

// startProc starts bin with args and env added to this process's
// environment, collecting its output; the cleanup kills it.
func startProc(t *testing.T, bin, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.collect(stderr) }()
	go func() { defer wg.Done(); p.collectStdout(stdout) }()
	go func() { wg.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done; _ = p.cmd.Wait() })
	return p
}

// admittedAll: every process logged the admission of every other's RID.
func admittedAll(ps []*proc, rids []string) func() bool {
	return func() bool {
		for i, p := range ps {
			for j := range ps {
				if i != j && !p.seen("transport: peer admitted", "peer", rids[j]) {
					return false
				}
			}
		}
		return true
	}
}

// The built binary, three processes, a real Redis: they find each other;
// kill -9 one and the others drop it once its lease expires; restart it and
// it returns with a new lifecycle generation and LeaseGeneration.
func TestMultiProcessDiscoveryKillRestart(t *testing.T) {
	addr, ns := testredis.Addr(t), testredis.Namespace(t)
	bin := buildMeshnode(t)
	env := func(rid string) []string { return nodeEnv(addr, ns, "mp", rid) }
	start := func(name, rid string) *proc { return startProc(t, bin, name, env(rid), "run") }
	rids := []string{"0a0001", "0a0002", "0a0003"}
	procs := []*proc{start("n1", rids[0]), start("n2", rids[1]), start("n3", rids[2])}
	waitUntil(t, 20*time.Second, "every process to admit the other two", admittedAll(procs, rids), procs...)

	ctx := context.Background()
	st, err := locredis.New(ctx, locredis.Options{Addrs: []string{addr}, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	entry := func(rid string) (directory.Entry, bool) {
		snap, err := directory.List(ctx, st, "mp", 100)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		for _, e := range snap.Entries {
			if hex.EncodeToString(e.Descriptor.RoutingID) == rid {
				return e, true
			}
		}
		return directory.Entry{}, false
	}
	before, ok := entry(rids[2])
	if !ok || !before.LeaseValid {
		t.Fatalf("n3 not listed with a valid lease: %+v", before)
	}

	// kill -9: no shutdown, the lease record stays until it expires.
	_ = procs[2].stop(t, syscall.SIGKILL)
	killedAt := time.Now()
	dropped := func() bool {
		return procs[0].seen("discovery", "action", "disconnect", "peer", rids[2]) &&
			procs[1].seen("discovery", "action", "disconnect", "peer", rids[2])
	}
	waitUntil(t, 15*time.Second, "n1 and n2 to drop n3 after its lease expired", dropped, procs[:2]...)
	t.Logf("n3 dropped %v after kill -9 (lease TTL 2s)", time.Since(killedAt).Round(10*time.Millisecond))
	if e, _ := entry(rids[2]); e.LeaseValid {
		t.Fatal("store still shows n3's lease valid after the others dropped it")
	}

	// Restart with the same RID: takeover of its descriptor, new generations.
	n3 := start("n3b", rids[2])
	waitUntil(t, 20*time.Second, "the restarted n3 and the others to admit each other", func() bool {
		return n3.seen("transport: peer admitted", "peer", rids[0]) && n3.seen("transport: peer admitted", "peer", rids[1]) &&
			procs[0].count("transport: peer admitted", "peer", rids[2]) >= 2 && procs[1].count("transport: peer admitted", "peer", rids[2]) >= 2
	}, procs[0], procs[1], n3)
	after, ok := entry(rids[2])
	if !ok || !after.LeaseValid {
		t.Fatalf("restarted n3 not listed with a valid lease: %+v", after)
	}
	if after.Descriptor.LifecycleGeneration == before.Descriptor.LifecycleGeneration ||
		after.Descriptor.LeaseGeneration == before.Descriptor.LeaseGeneration ||
		after.Descriptor.OwnerID == before.Descriptor.OwnerID {
		t.Fatalf("restart kept its run identity: before %+v after %+v", before.Descriptor, after.Descriptor)
	}

	// ctl topology through the binary shows the three live nodes.
	ctl := exec.Command(bin, "ctl", "topology", "--mesh", "mp")
	ctl.Env = append(os.Environ(), env("")...)
	out, err := ctl.CombinedOutput()
	if err != nil {
		t.Fatalf("ctl topology: %v\n%s", err, out)
	}
	for _, rid := range rids {
		if !strings.Contains(string(out), rid) {
			t.Fatalf("ctl topology lacks %s:\n%s", rid, out)
		}
	}
	t.Logf("ctl topology:\n%s", out)

	// SIGTERM: orderly shutdown, exit status 0.
	for _, p := range []*proc{procs[0], procs[1], n3} {
		if err := p.stop(t, syscall.SIGTERM); err != nil {
			p.dump(t)
			t.Fatalf("%s exited with %v after SIGTERM", p.name, err)
		}
	}
}
