package cli

import (
	"bytes"
	"context"
	"fmt"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	locmemory "github.com/meshnode/meshnode/locstore/memory"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/admin"
	"github.com/meshnode/meshnode/mesh/demoapp"
	relmemory "github.com/meshnode/meshnode/relocstore/memory"
	"github.com/meshnode/meshnode/spot"
)

const testAdminToken = "cli-admin-token-0123456789"

// adminMesh starts two server nodes on shared memory stores, each with an
// admin listener on loopback and testAdminToken.
func adminMesh(t *testing.T) []*mesh.Node {
	t.Helper()
	nodes, _ := adminMeshLogged(t)
	return nodes
}

// adminMeshLogged is adminMesh with each node's log.
func adminMeshLogged(t *testing.T) ([]*mesh.Node, []*syncbuf.Buffer) {
	t.Helper()
	loc, err := locmemory.New()
	if err != nil {
		t.Fatal(err)
	}
	reloc, err := relmemory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loc.Close(); reloc.Close() })
	reg := spot.NewRegistry()
	if err := demoapp.Register(reg); err != nil {
		t.Fatal(err)
	}
	var nodes []*mesh.Node
	var logs []*syncbuf.Buffer
	for i := 0; i < 2; i++ {
		cfg := config.Default()
		cfg.Node.MeshName = "adm"
		cfg.Node.RoutingID = fmt.Sprintf("0a0%d", i+1)
		cfg.Lease.RenewInterval, cfg.Lease.RenewTimeout, cfg.Lease.TTL, cfg.Lease.FencingMargin = 500*time.Millisecond, 400*time.Millisecond, 4*time.Second, time.Second
		cfg.Admin = config.AdminConfig{Listen: "127.0.0.1:0", Token: testAdminToken}
		cfg.LocationStore.Provider, cfg.RelocationStore.Provider = config.ProviderMemory, config.ProviderMemory
		logs = append(logs, new(syncbuf.Buffer))
		n, err := mesh.Start(context.Background(), mesh.Options{Config: cfg, Factories: reg, Location: loc, Relocation: reloc,
			DiscoveryInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs[i], nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close(context.Background()) })
		nodes = append(nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := n.WaitPeers(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	return nodes, logs
}

func TestCtlStatusAndRelocate(t *testing.T) {
	nodes := adminMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Counters on node 1 only: node 2 does not take new objects meanwhile.
	m := nodes[0].Manager()
	deadline := time.Now().Add(10 * time.Second)
	created := 0
	for i := 0; created < 5; i++ {
		ref, err := m.CreateActor(ctx, fmt.Sprintf("c-%d", i), demoapp.CounterType)
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if string(ref.NodeRID) == string(nodes[0].RID()) {
			created++
		}
	}
	url := "http://" + nodes[0].AdminAddr()
	t.Setenv(config.EnvName("admin.token"), testAdminToken)

	var out, errb bytes.Buffer
	if code := Main(ctx, []string{"ctl", "status", url}, &out, &errb); code != ExitOK {
		t.Fatalf("ctl status: exit %d: %s", code, errb.String())
	}
	t.Logf("status:\n%s", out.String())
	for _, want := range []string{"state serving", "ready yes", "actor", demoapp.CounterType, "peers admitted: 1", "host command: none running"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ctl status output lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	errb.Reset()
	code := Main(ctx, []string{"ctl", "relocate", url, "--request-id", "cli-1", "--poll", "20ms"}, &out, &errb)
	if code != ExitOK {
		t.Fatalf("ctl relocate: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	t.Logf("relocate:\n%s", out.String())
	for _, want := range []string{"relocate cli-1 started", "progress:", "relocate cli-1 ended: completed", "OUTCOME", "moved", "moved to:", "TARGET"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ctl relocate output lacks %q:\n%s", want, out.String())
		}
	}
	if h := nodes[0].ObjectStats().Hosted; h != 1 { // the Entry Spot stays
		t.Fatalf("node 1 still hosts %d objects", h)
	}
	// The same request id follows the same (finished) command.
	out.Reset()
	if code := Main(ctx, []string{"ctl", "relocate", url, "--request-id", "cli-1"}, &out, &errb); code != ExitOK ||
		!strings.Contains(out.String(), "following (already started)") {
		t.Fatalf("repeated request id: exit %d:\n%s", code, out.String())
	}
}

// A drain through the admin listener stops the node and its listener; the
// caller still gets the outcome, also when the drain is over before its
// first poll (nothing to move: it used to end with "lost contact with the
// node" and exit 1).
func TestCtlDrainReportsTheOutcome(t *testing.T) {
	nodes, logs := adminMeshLogged(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Setenv(config.EnvName("admin.token"), testAdminToken)
	var out, errb bytes.Buffer
	start := time.Now()
	code := Main(ctx, []string{"ctl", "relocate", "http://" + nodes[1].AdminAddr(), "--drain", "--request-id", "d-1", "--poll", "300ms"}, &out, &errb)
	if code != ExitOK {
		t.Fatalf("ctl relocate --drain: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"drain d-1 started", "drain d-1 ended: completed", "OUTCOME"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	select {
	case <-nodes[1].Done():
	case <-ctx.Done():
		t.Fatal("the drained node did not stop")
	}
	// The listener waited for the result to be read, not for its bound.
	if strings.Contains(logs[1].String(), "admin listener: no one read the drain's result") {
		t.Errorf("the listener lingered to its bound instead of closing once the result was read (%v)", time.Since(start))
	}
}

// A caller that reads the drain's state only after its moves are over
// still finds the listener up, with the result; the node stops right after
// that read.
func TestAdminDrainLingersUntilTheResultIsRead(t *testing.T) {
	nodes, logs := adminMeshLogged(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Setenv(config.EnvName("admin.token"), testAdminToken)
	c, err := newAdminClient(nodes[1].AdminAddr())
	if err != nil {
		t.Fatal(err)
	}
	var j admin.Job
	if _, err := c.do(ctx, "POST", "/v1/relocate", admin.RelocateRequest{RequestID: "late", Drain: true}, &j); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // an empty node's moves are long over
	for {
		var got admin.Job
		if _, err := c.do(ctx, "GET", "/v1/relocate/late", nil, &got); err != nil {
			t.Fatalf("the listener went before the drain's result was read: %v", err)
		}
		if got.Result != nil {
			if got.Result.End != "completed" || got.Progress.End != "completed" {
				t.Fatalf("drain result %+v", got)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-nodes[1].Done():
	case <-ctx.Done():
		t.Fatal("the node did not stop")
	}
	if strings.Contains(logs[1].String(), "admin listener: no one read the drain's result") {
		t.Fatal("the node stopped at the linger's bound, not once the result was read")
	}
}

// The refusals an operator meets: no or a wrong token, a node that is not
// there, bad arguments.
func TestCtlAdminRefusals(t *testing.T) {
	nodes := adminMesh(t)
	url := "http://" + nodes[0].AdminAddr()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		token string
		args  []string
		code  int
		want  string
	}{
		{"no token", "", []string{"ctl", "status", url}, ExitError, "set MESHNODE_ADMIN__TOKEN"},
		{"wrong token", "wrong-token-0123456789", []string{"ctl", "status", url}, ExitError, "does not match"},
		{"wrong token relocate", "wrong-token-0123456789", []string{"ctl", "relocate", url}, ExitError, "unauthorized"},
		{"nobody there", testAdminToken, []string{"ctl", "status", "127.0.0.1:1"}, ExitError, "connection refused"},
		{"no url", testAdminToken, []string{"ctl", "status"}, ExitUsage, "want exactly one <admin-url>"},
		{"bad flag", testAdminToken, []string{"ctl", "relocate", url, "--poll", "x"}, ExitUsage, "--poll"},
		{"bad scheme", testAdminToken, []string{"ctl", "status", "ftp://x"}, ExitUsage, "want http://host:port"},
		// The endpoint's URL instead of the listener's: was a 404.
		{"url with a path", testAdminToken, []string{"ctl", "status", url + "/v1/status"}, ExitUsage, "want the listener's address alone"},
		{"relocate url with a path", testAdminToken, []string{"ctl", "relocate", url + "/v1/relocate"}, ExitUsage, "want the listener's address alone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(config.EnvName("admin.token"), tc.token)
			var out, errb bytes.Buffer
			if code := Main(ctx, tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errb.String(), tc.code, tc.want)
			}
		})
	}
	var out, errb bytes.Buffer
	for _, cmd := range []string{"status", "relocate"} {
		out.Reset()
		if code := Main(ctx, []string{"ctl", cmd, "--help"}, &out, &errb); code != ExitOK || !strings.Contains(out.String(), "usage: meshnode ctl "+cmd) {
			t.Fatalf("ctl %s --help: exit %d %q", cmd, code, out.String())
		}
	}
}

// ctl status names each store whose writes wait for replicas and whether
// they keep up; nothing for a node without replica_acks.
func TestPrintStatusStores(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stores []admin.StoreReplicas
		want   []string
		not    string
	}{
		{"none", nil, nil, "replica_acks"},
		{"keeping up", []admin.StoreReplicas{{Store: "location"}}, []string{"location store (replica_acks): replicas keep up"}, "BEHIND"},
		{"behind", []admin.StoreReplicas{{Store: "location"}, {Store: "relocation", Behind: true}},
			[]string{"location store (replica_acks): replicas keep up", "relocation store (replica_acks): REPLICAS BEHIND"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printStatus(&b, admin.Status{Ready: true, Stores: tc.stores}); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("lacks %q:\n%s", w, b.String())
				}
			}
			if tc.not != "" && strings.Contains(b.String(), tc.not) {
				t.Errorf("has %q:\n%s", tc.not, b.String())
			}
		})
	}
}

// ctl status says why the lease renewals are failing, and nothing about
// them while they succeed.
func TestPrintStatusLeaseRenewError(t *testing.T) {
	for _, tc := range []struct {
		renewErr string
		want     bool
	}{{"", false}, {"locstore redis write: OOM … raise maxmemory", true}} {
		var b bytes.Buffer
		if err := printStatus(&b, admin.Status{Ready: true, LeaseRenewError: tc.renewErr}); err != nil {
			t.Fatal(err)
		}
		line := "lease renewals failing: " + tc.renewErr
		if got := strings.Contains(b.String(), "lease renewals failing"); got != tc.want || tc.want && !strings.Contains(b.String(), line) {
			t.Errorf("renew error %q:\n%s", tc.renewErr, b.String())
		}
	}
}

// The objects not moved are counted by outcome and reason, most first;
// moved and skipped objects are not.
func TestNotMovedWhy(t *testing.T) {
	full, gone := "no Serving node has capacity left", "target stopped"
	for _, tc := range []struct {
		name string
		objs []admin.ObjectOutcome
		want [][]string
	}{
		{"none", []admin.ObjectOutcome{{ID: "a", Outcome: "moved"}, {ID: "b", Outcome: "skipped"}}, [][]string{}},
		{"one reason", []admin.ObjectOutcome{{ID: "a", Outcome: "failed", Reason: full}, {ID: "b", Outcome: "failed", Reason: full}},
			[][]string{{"failed", "2", full}}},
		{"most first, then by outcome and reason", []admin.ObjectOutcome{
			{ID: "a", Outcome: "failed", Reason: gone}, {ID: "b", Outcome: "notStarted", Reason: "deadline"},
			{ID: "c", Outcome: "failed", Reason: full}, {ID: "d", Outcome: "failed", Reason: full},
			{ID: "e", Outcome: "moved"}, {ID: "f", Outcome: "failed", Reason: full},
		}, [][]string{{"failed", "3", full}, {"failed", "1", gone}, {"notStarted", "1", "deadline"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := notMovedWhy(tc.objs); !slices.EqualFunc(got, tc.want, slices.Equal[[]string]) {
				t.Errorf("notMovedWhy = %v, want %v", got, tc.want)
			}
		})
	}
}

// The moved objects are counted by target, most first, ties by RoutingId;
// objects not moved are not counted.
func TestMovedTo(t *testing.T) {
	objs := []admin.ObjectOutcome{
		{ID: "a", Outcome: "moved", Target: "bb"}, {ID: "b", Outcome: "moved", Target: "aa"},
		{ID: "c", Outcome: "moved", Target: "cc"}, {ID: "d", Outcome: "moved", Target: "cc"},
		{ID: "e", Outcome: "failed", Target: "dd"}, {ID: "f", Outcome: "skipped"},
	}
	got := movedTo(objs)
	want := [][]string{{"cc", "2"}, {"aa", "1"}, {"bb", "1"}}
	if !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Fatalf("movedTo = %v, want %v", got, want)
	}
	if rows := movedTo(nil); len(rows) != 0 {
		t.Fatalf("movedTo(nil) = %v", rows)
	}
}

// A host command refused at its start (a SIGTERM drain already runs on the
// node, as found in a try-out) is reported as failed with its reason, not
// as "ended: open" above a table of zeros.
func TestPrintOutcomeOfACommandRefusedAtItsStart(t *testing.T) {
	j := admin.Job{ID: "r1", State: admin.JobFailed, Result: &admin.Result{End: "open"},
		Error: "mesh: a host command is already running on this node: a drain (the node is stopping)"}
	var out, errb bytes.Buffer
	if code := printOutcome(&out, &errb, j); code != ExitError {
		t.Fatalf("exit %d, want %d", code, ExitError)
	}
	if want := "relocate r1 failed before it looked at any object"; !strings.Contains(out.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, out.String())
	}
	for _, bad := range []string{"ended: open", "OUTCOME"} {
		if strings.Contains(out.String(), bad) {
			t.Errorf("stdout says %q:\n%s", bad, out.String())
		}
	}
	if !strings.Contains(errb.String(), "meshnode ctl relocate: mesh: a host command is already running on this node: a drain") {
		t.Errorf("stderr lacks the reason: %q", errb.String())
	}
}

// ctl status names the host command running, also one not started through
// the admin listener (no job id: a SIGTERM drain, the application's call).
func TestPrintStatusHostCommand(t *testing.T) {
	p := admin.Progress{Total: 10, Moved: 4, Running: 2, Pending: 4}
	for _, tc := range []struct {
		name string
		job  *admin.Job
		want string
	}{
		{"none", nil, "host command: none running"},
		{"through the listener", &admin.Job{ID: "r1", State: admin.JobRunning, Progress: p},
			"host command r1 (relocate) running: 4/10 moved, 0 failed, 0 skipped, 6 remaining"},
		{"a SIGTERM drain", &admin.Job{Drain: true, State: admin.JobRunning, Progress: p},
			"host command (drain, started on the node: SIGTERM or the application) running: 4/10 moved, 0 failed, 0 skipped, 6 remaining"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printStatus(&b, admin.Status{Ready: true, HostCommand: tc.job}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), tc.want) {
				t.Errorf("lacks %q:\n%s", tc.want, b.String())
			}
		})
	}
}

// Instance Spots a host command skipped (it never moves them) are counted
// apart from objects whose policy disables relocation. Before, ctl
// relocate listed a node's 10 sessions as "skipped (relocation disabled)"
// (an operator try-out).
func TestPrintOutcomeCountsInstanceSpotsApart(t *testing.T) {
	objs := []admin.ObjectOutcome{
		{Kind: "actor", ID: "a", Outcome: "moved", Target: "02"}, {Kind: "actor", ID: "b", Outcome: "skipped"},
		{Kind: "instanceSpot", ID: "s1", Outcome: "skipped"}, {Kind: "instanceSpot", ID: "s2", Outcome: "skipped"},
	}
	for _, tc := range []struct {
		name string
		objs []admin.ObjectOutcome
		want []string // table rows, spaces squeezed
		rows int      // rows of the OUTCOME table, header included
	}{
		{"sessions and a disabled actor", objs, []string{"skipped (relocation disabled) 1",
			"skipped (Instance Spots, never moved) 2", "total 4"}, 8},
		{"no Instance Spot: no row for them", objs[:2], []string{"skipped (relocation disabled) 1", "total 2"}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := admin.Progress{Total: len(tc.objs)}
			for _, o := range tc.objs {
				if o.Outcome == "moved" {
					p.Moved++
				} else {
					p.Skipped++
				}
			}
			j := admin.Job{ID: "r1", State: admin.JobDone, Result: &admin.Result{End: "completed", Progress: p, Objects: tc.objs}}
			var out, errb bytes.Buffer
			if code := printOutcome(&out, &errb, j); code != ExitOK {
				t.Fatalf("exit %d, want %d: %s", code, ExitOK, errb.String())
			}
			var rows []string
			for _, l := range strings.Split(out.String(), "\n") {
				rows = append(rows, strings.Join(strings.Fields(l), " "))
			}
			for _, w := range tc.want {
				if !slices.Contains(rows, w) {
					t.Errorf("no row %q in:\n%s", w, out.String())
				}
			}
			if at := slices.Index(rows, "OUTCOME OBJECTS"); at < 0 || at+tc.rows > len(rows) || !strings.HasPrefix(rows[at+tc.rows-1], "total ") {
				t.Errorf("the OUTCOME table is not %d rows:\n%s", tc.rows, out.String())
			}
		})
	}
}
