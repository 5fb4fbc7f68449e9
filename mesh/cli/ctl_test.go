package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	locredis "github.com/meshnode/meshnode/locstore/redis"
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
	addr, ns := testredis.Addr(t), testredis.Namespace(t)
	st, err := locredis.New(ctx, locredis.Options{Addrs: []string{addr}, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lease := record.OwnerLease{OwnerID: "owner-1", LeaseGeneration: 7, AcquiredAt: 1752000000000, UpdatedAt: 1752000000500}
	val, err := lease.Encode()
	if err != nil {
		t.Fatal(err)
	}
	key, _ := record.OwnerLeaseKey("owner-1")
	if res, err := st.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put(key, val)}}); err != nil || !res.Applied {
		t.Fatalf("seed: %+v %v", res, err)
	}
	flags := []string{"--location_store.provider", "redis", "--location_store.redis.addrs", addr, "--location_store.redis.namespace", ns}
	tests := []struct {
		name string
		key  string
		code int
		want string
	}{
		{"store key", key, ExitOK, `"leaseGeneration": "7"`},
		{"redis key", "{" + ns + "}:k:" + key, ExitOK, "decode:     ok"},
		{"missing", "owner-lease:00", ExitError, "missing"},
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
