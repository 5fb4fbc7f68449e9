package cli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/marker"
	"github.com/meshnode/meshnode/mesh/query"
	"github.com/meshnode/meshnode/mesh/record"
)

func TestCtlKey(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		// Preimage and digest of authority\0actor\0user:42 as pinned by the
		// project's golden fixture (mesh/record/testdata).
		{"authority", []string{"authority", "actor", "user:42"}, ExitOK, []string{
			`preimage:     "authority\0actor\0user:42"`,
			"store key:    authority:644fc59a0a9bebe3ccd4de43ad6c17d06a3b5df1b5585471f014d6a6091ec750",
			"redis key:    {meshnode}:k:authority:644fc59a",
		}},
		{"namespace flag", []string{"owner-lease", "o1", "--namespace", "prod"}, ExitOK, []string{"redis key:    {prod}:k:owner-lease:"}},
		{"mesh node", []string{"mesh-node", "default", "0a0b"}, ExitOK, []string{`"mesh-node\0default\00a0b"`}},
		{"descriptor journal", []string{"descriptor-journal", "mesh-node"}, ExitOK, []string{`"descriptor-journal\0mesh-node"`, "store key:    descriptor-journal:"}},
		{"journal of another kind", []string{"descriptor-journal", "authority"}, ExitUsage, nil},
		{"removal record", []string{"removed-mesh-node", "default", "0a0b"}, ExitOK, []string{`"removed-mesh-node\0default\00a0b"`, "store key:    removed-mesh-node:"}},
		// The secured row of the pinned example of docs/AUTHORITY.md §2.2.
		{"capacity spot type", []string{"capacity", "game", "0a01", "3", "spotType", "userSpot", "Room", "secured"}, ExitOK, []string{
			`preimage:     "capacity\0game\00a01\03\0spotType\0userSpot\0Room\0secured"`,
			"store key:    capacity:97f7d0a097685a6e4dbac877d435b1878e1cf1c165d87b606c387e6a5712c877",
		}},
		{"capacity actors", []string{"capacity", "game", "0a01", "3", "actors", "active"}, ExitOK, []string{`"capacity\0game\00a01\03\0actors\0active"`}},
		{"capacity: unknown measure", []string{"capacity", "game", "0a01", "3", "actors", "reserved"}, ExitUsage, nil},
		{"capacity: generation not a number", []string{"capacity", "game", "0a01", "x", "actors", "active"}, ExitUsage, nil},
		{"capacity: wrong arity", []string{"capacity", "game", "0a01", "3", "actors"}, ExitUsage, nil},
		{"bad rid", []string{"mesh-node", "default", "xyz"}, ExitUsage, nil},
		{"wrong arity", []string{"authority", "actor"}, ExitUsage, nil},
		{"unknown kind", []string{"session", "x"}, ExitUsage, nil},
		{"bad identity kind", []string{"authority", "Actor", "x"}, ExitUsage, nil},
		{"NUL in id", []string{"authority", "actor", "a\x00b"}, ExitUsage, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), append([]string{"ctl", "key"}, tc.args...), &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.code, errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Fatalf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// ctl record reads what a real Redis Location Store holds.
func TestCtlRecordRedis(t *testing.T) {
	ctx := context.Background()
	st, addr, ns := ctlRedis(t)
	lease := record.OwnerLease{OwnerID: "owner-1", LeaseGeneration: 7, AcquiredAt: 1752000000000, UpdatedAt: 1752000000500}
	val, err := lease.Encode()
	if err != nil {
		t.Fatal(err)
	}
	key, _ := record.OwnerLeaseKey("owner-1")
	ctr := authority.CounterID{Node: authority.Node{MeshName: "game", RoutingID: []byte{0x0a, 0x01}, LifecycleGeneration: 3}, Class: authority.SlotActors}
	capKey, _ := authority.CapacityKey(ctr, authority.MeasureSecured)
	capVal, err := authority.EncodeCapacity(ctr, authority.MeasureSecured, 5)
	if err != nil {
		t.Fatal(err)
	}
	oldKey := "capacity:" + strings.Repeat("0", 64) // a row of the one-row layout (recordVersion 1)
	oldVal := `{"active":2,"class":"actors","lifecycleGeneration":"3","meshName":"game","objectKind":null,"recordVersion":1,"reserved":1,"routingIdHex":"0a01","stableType":null}`
	if res, err := st.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put(key, val),
		locstore.Put(capKey, capVal), locstore.Put(oldKey, []byte(oldVal))}}); err != nil || !res.Applied {
		t.Fatalf("seed: %+v %v", res, err)
	}
	// The framework writes two more kinds beside the records: the
	// namespace marker (its own schema) and ctl list's kept continuation
	// state (no schema); ctl record said "decode: FAILED" for both.
	if _, _, err := marker.Ensure(ctx, st); err != nil {
		t.Fatal(err)
	}
	keptKey := string(query.KeptKind) + ":" + strings.Repeat("ab", 32)
	if res, err := st.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put(keptKey, []byte("cursor"))}}); err != nil || !res.Applied {
		t.Fatalf("seed kept state: %+v %v", res, err)
	}
	// The record a watcher keeps of a descriptor it removed.
	removal := record.RemovedMeshNode{Descriptor: ctlDescriptor("game", []byte{0x0b}, "owner-p"), RemovedAt: 1752000000000,
		RemovedByOwnerID: "owner-w", RemovedByRoutingID: []byte{0x0c}}
	removalVal, err := removal.Encode()
	if err != nil {
		t.Fatal(err)
	}
	removalKey, _ := record.RemovedMeshNodeKey("game", []byte{0x0b})
	if res, err := st.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.PutExpiring(removalKey, removalVal, time.Hour)}}); err != nil || !res.Applied {
		t.Fatalf("seed removal record: %+v %v", res, err)
	}
	flags := []string{"--location_store.provider", "redis", "--location_store.redis.addrs", addr, "--location_store.redis.namespace", ns}
	tests := []struct {
		name string
		key  string
		code int
		want string
	}{
		{"namespace marker", marker.Key, ExitOK, "decode:     ok"},
		{"removal record", removalKey, ExitOK, "decode:     ok"},
		{"kept continuation state", keptKey, ExitOK, "decode:     not a record: ctl list's kept continuation state"},
		{"store key", key, ExitOK, `"leaseGeneration": "7"`},
		{"redis key", "{" + ns + "}:k:" + key, ExitOK, "decode:     ok"},
		{"missing", "owner-lease:00", ExitError, "missing"},
		{"capacity row", capKey, ExitOK, "decode:     ok"},
		{"capacity row of the old layout", oldKey, ExitOK, "unknown recordVersion"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(ctx, append(append([]string{"ctl", "record"}, flags...), tc.key), &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.code, errb.String())
			}
			if !strings.Contains(out.String()+errb.String(), tc.want) {
				t.Fatalf("output lacks %q:\n%s%s", tc.want, out.String(), errb.String())
			}
		})
	}
}

// storeReadingCtl is a valid invocation of every ctl command that reads the
// Location Store (ctlStore).
var storeReadingCtl = [][]string{
	{"topology"},
	{"list", "--kind", "actor"},
	{"locate", "actor", "x"},
	{"record", "owner-lease:00"},
	{"reclaim", "--all", "--dry-run"},
}

// The ctl commands that read the Location Store answer a configuration that
// cannot be loaded as bad usage, named by the command, before opening any
// store.
func TestCtlStoreCommandsBadConfig(t *testing.T) {
	missing := []string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}
	for _, args := range storeReadingCtl {
		t.Run(args[0], func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), append(append([]string{"ctl"}, args...), missing...), &out, &errb)
			if code != ExitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, ExitUsage, errb.String())
			}
			if prefix := "meshnode ctl " + args[0] + ": "; !strings.HasPrefix(errb.String(), prefix) || !strings.Contains(errb.String(), "missing.yaml") {
				t.Fatalf("stderr does not start with %q and name the file:\n%s", prefix, errb.String())
			}
			if out.Len() != 0 {
				t.Fatalf("printed an answer:\n%s", out.String())
			}
		})
	}
}

// The ctl commands that read the Location Store refuse the memory provider:
// a memory store lives inside the process that opened it, so ctl would
// open a fresh, empty one and print an empty topology or "no record" as if
// that were the mesh's answer.
func TestCtlRefusesTheMemoryStore(t *testing.T) {
	mem := []string{"--location_store.provider", "memory"}
	for _, args := range storeReadingCtl {
		t.Run(args[0], func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), append(append([]string{"ctl"}, args...), mem...), &out, &errb)
			if code != ExitError {
				t.Fatalf("exit %d on the memory provider, want %d; stdout:\n%s", code, ExitError, out.String())
			}
			if want := "a memory store exists only inside the process that opened it"; !strings.Contains(errb.String(), want) {
				t.Fatalf("stderr does not say %q:\n%s", want, errb.String())
			}
			if prefix := "meshnode ctl " + args[0] + ": "; !strings.HasPrefix(errb.String(), prefix) {
				t.Fatalf("stderr does not start with %q:\n%s", prefix, errb.String())
			}
			if out.Len() != 0 {
				t.Fatalf("printed an answer from an empty store:\n%s", out.String())
			}
		})
	}
}

// ctlDescriptor is a serving server's descriptor of run owner (lease
// generation 1), as published at store time 1752000000000.
func ctlDescriptor(mesh string, rid []byte, owner string) record.MeshNodeDescriptor {
	entry := "entry:1"
	return record.MeshNodeDescriptor{MeshName: mesh, RoutingID: rid, LifecycleGeneration: 1, DescriptorRevision: 1,
		Endpoint: fmt.Sprintf("tcp://%x:1", rid), EntrySpotID: &entry, ObjectRole: record.RoleServer, PlacementWeight: 100,
		State: record.StateServing, OwnerID: owner, LeaseGeneration: 1, UpdatedAt: 1752000000000}
}

// ctl topology shows a run whose watcher removed its descriptor (its lease
// ended while its links were up: paused past lease.ttl, or cut off from
// the store) as removed, from the removal record, instead of not at all;
// a live run as before.
func TestCtlTopologyShowsARemovedRunRedis(t *testing.T) {
	ctx := context.Background()
	st, addr, ns := ctlRedis(t)
	// The watcher (0c) is live: its lease and its descriptor. The paused
	// run (0b) has its descriptor and no lease any more.
	lease, err := record.OwnerLease{OwnerID: "owner-w", LeaseGeneration: 1, AcquiredAt: 1, UpdatedAt: 1}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	leaseKey, _ := record.OwnerLeaseKey("owner-w")
	muts := []locstore.Mutation{locstore.PutExpiring(leaseKey, lease, time.Hour)}
	for _, d := range []record.MeshNodeDescriptor{ctlDescriptor("game", []byte{0x0c}, "owner-w"), ctlDescriptor("game", []byte{0x0b}, "owner-p")} {
		v, err := d.Encode()
		if err != nil {
			t.Fatal(err)
		}
		key, _ := record.MeshNodeKey(d.MeshName, d.RoutingID)
		muts = append(muts, locstore.Put(key, v))
	}
	if res, err := st.Write(ctx, locstore.WriteRequest{Mutations: muts}); err != nil || !res.Applied {
		t.Fatalf("seed: %+v %v", res, err)
	}
	// The watcher removes the paused run's descriptor, as
	// Node.removeDeadWatched does.
	pausedKey, _ := record.MeshNodeKey("game", []byte{0x0b})
	res, err := directory.ReclaimKey(ctx, st, pausedKey, directory.ReclaimOptions{MinAge: time.Nanosecond,
		RemovedBy: &directory.Remover{OwnerID: "owner-w", RoutingID: []byte{0x0c}}})
	if err != nil || res.Deleted != 1 {
		t.Fatalf("watcher removal = %+v, %v", res, err)
	}
	var out, errb bytes.Buffer
	code := Main(ctx, []string{"ctl", "topology", "--mesh", "game", "--location_store.provider", "redis",
		"--location_store.redis.addrs", addr, "--location_store.redis.namespace", ns, "--log.level", "error"}, &out, &errb)
	if code != ExitOK {
		t.Fatalf("exit %d; stderr %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want the header, two rows and the note:\n%s", out.String())
	}
	if f := strings.Fields(lines[1]); f[1] != "0b" || f[3] != "removed" || !strings.Contains(lines[1], "ended (removed ") {
		t.Fatalf("the removed run's row %q:\n%s", lines[1], out.String())
	}
	if f := strings.Fields(lines[2]); f[1] != "0c" || f[3] != "serving" || !strings.Contains(lines[2], " in ") {
		t.Fatalf("the live run's row %q:\n%s", lines[2], out.String())
	}
	if lines[3] != directory.RemovedNote {
		t.Fatalf("last line %q, want the note", lines[3])
	}
}

// ctlRedis opens the Redis Location Store of a test's own namespace on the
// test Redis, closed at cleanup, and returns it with its address and
// namespace (the flags ctl is run with).
func ctlRedis(t *testing.T) (st locstore.Store, addr, ns string) {
	t.Helper()
	addr, ns = testredis.Addr(t), testredis.Namespace(t)
	st, err := locredis.New(context.Background(), locredis.Options{Addrs: []string{addr}, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, addr, ns
}
