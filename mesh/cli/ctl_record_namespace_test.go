package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/mesh/record"
)

// A full Redis key names its namespace ({ns}:k:…). ctl record read the
// store key in it from the configured namespace whatever the key said: an
// operator who pasted a key of namespace "orders" from redis-cli while
// ctl was configured for "billing" was shown "missing", or — when both
// namespaces hold that key, two meshes on one Redis — billing's record as
// if it were the one asked for. A key of another namespace is now a usage
// error naming both.
func TestCtlRecordRedisKeyOfAnotherNamespace(t *testing.T) {
	ctx := context.Background()
	st, addr, ns := ctlRedis(t)
	other := ns + "-other"
	st2, err := locredis.New(ctx, locredis.Options{Addrs: []string{addr}, Namespace: other})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	key, _ := record.OwnerLeaseKey("owner-1")
	for _, s := range []struct {
		st  locstore.Store
		gen record.Generation
	}{{st, 7}, {st2, 9}} {
		val, err := record.OwnerLease{OwnerID: "owner-1", LeaseGeneration: s.gen, AcquiredAt: 1752000000000, UpdatedAt: 1752000000500}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if res, err := s.st.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put(key, val)}}); err != nil || !res.Applied {
			t.Fatalf("seed: %+v %v", res, err)
		}
	}
	// ctl is configured for the other namespace; the key is of ns's.
	flags := []string{"--location_store.provider", "redis", "--location_store.redis.addrs", addr, "--location_store.redis.namespace", other}
	var out, errb bytes.Buffer
	code := Main(ctx, append([]string{"ctl", "record"}, append(flags, "{"+ns+"}:k:"+key)...), &out, &errb)
	if code != ExitUsage {
		t.Errorf("exit %d, want %d (usage)\nstdout %s\nstderr %s", code, ExitUsage, out.String(), errb.String())
	}
	if strings.Contains(out.String(), `"leaseGeneration": "9"`) {
		t.Errorf("printed the record of namespace %s for a key of namespace %s:\n%s", other, ns, out.String())
	}
	if msg := errb.String(); !strings.Contains(msg, "{"+ns+"}") || !strings.Contains(msg, other) {
		t.Errorf("stderr %q; want it to name the key's namespace %s and the configured %s", msg, ns, other)
	}
	// Its hint offered "the store key … alone" as the other way to read the
	// key, which reads the configured namespace's record: the wrong one.
	if msg := errb.String(); strings.Contains(msg, key+" alone") && !strings.Contains(msg, "reads namespace "+`"`+other+`"`) {
		t.Errorf("stderr %q offers the store key alone without saying it reads namespace %s's record", msg, other)
	}

	// The same key in the configured namespace reads as before.
	out.Reset()
	errb.Reset()
	if code := Main(ctx, append([]string{"ctl", "record"}, append(flags, "{"+other+"}:k:"+key)...), &out, &errb); code != ExitOK ||
		!strings.Contains(out.String(), `"leaseGeneration": "9"`) {
		t.Errorf("exit %d, stdout %s, stderr %s; want the record of namespace %s", code, out.String(), errb.String(), other)
	}
}
