package storetest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// testReadMany checks the MultiReader extension (and, for a provider
// without it, the package function's one-at-a-time fallback): one result
// per key in order, duplicates answered twice, missing and expired keys
// Missing, one StoreNow, each result equal to what Read says, the bounds,
// and a snapshot that a concurrent batch cannot tear.
func testReadMany(t *testing.T, h Harness) {
	s := h.open(t)
	ctx := context.Background()
	_, multi := s.(locstore.MultiReader)
	t.Logf("%s: MultiReader %v", h.Name, multi)

	va := put(t, s, "rm/a", []byte("alpha"))
	vb := put(t, s, "rm/b", []byte(""))
	res := write(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.PutExpiring("rm/short", []byte("s"), h.ExpiryUnit)}})
	if !res.Applied {
		t.Fatal("expiring put: Conflict")
	}
	h.Advance(t, s, 2*h.ExpiryUnit)
	keys := []string{"rm/b", "rm/missing", "rm/a", "rm/short", "rm/a"}
	got, err := locstore.ReadMany(ctx, s, keys)
	if err != nil {
		t.Fatalf("ReadMany: %v", err)
	}
	if len(got) != len(keys) {
		t.Fatalf("ReadMany returned %d results for %d keys", len(got), len(keys))
	}
	want := []struct {
		found   bool
		value   string
		version string
	}{{true, "", vb}, {false, "", ""}, {true, "alpha", va}, {false, "", ""}, {true, "alpha", va}}
	for i, w := range want {
		r := got[i]
		if r.Found != w.found || (w.found && (string(r.Value) != w.value || r.Version != w.version)) {
			t.Errorf("key %s: %+v, want found=%v value=%q version=%q", keys[i], r, w.found, w.value, w.version)
		}
		if r.StoreNow.IsZero() {
			t.Errorf("key %s: no StoreNow", keys[i])
		}
		if single := read(t, s, keys[i]); single.Found != r.Found || single.Version != r.Version || string(single.Value) != string(r.Value) {
			t.Errorf("key %s: ReadMany %+v, Read %+v", keys[i], r, single)
		}
	}
	if multi {
		for i := range got {
			if !got[i].StoreNow.Equal(got[0].StoreNow) {
				t.Errorf("results at different StoreNow: %v and %v", got[0].StoreNow, got[i].StoreNow)
			}
		}
	}

	// Bounds: no keys, too many, an invalid key — refused before storage.
	over := make([]string, locstore.MaxReadKeys+1)
	for i := range over {
		over[i] = "rm/k" + strconv.Itoa(i)
	}
	_, err = locstore.ReadMany(ctx, s, nil)
	wantArgErr(t, "ReadMany of no keys", err)
	_, err = locstore.ReadMany(ctx, s, over)
	wantArgErr(t, "ReadMany of MaxReadKeys+1 keys", err)
	_, err = locstore.ReadMany(ctx, s, []string{"rm/a", strings.Repeat("k", locstore.MaxKeyBytes+1)})
	wantArgErr(t, "ReadMany with an oversize key", err)
	if got, err := locstore.ReadMany(ctx, s, over[:locstore.MaxReadKeys]); err != nil || len(got) != locstore.MaxReadKeys {
		t.Fatalf("ReadMany of MaxReadKeys keys: %d results, %v", len(got), err)
	}

	if !multi {
		return
	}
	// One observation: a writer moving two keys together in one batch is
	// never seen half-applied.
	put(t, s, "rm/x", []byte("0"))
	put(t, s, "rm/y", []byte("0"))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := []byte(strconv.Itoa(i))
			if _, err := s.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("rm/x", v), locstore.Put("rm/y", v)}}); err != nil {
				t.Errorf("writer: %v", err)
				return
			}
		}
	}()
	deadline := time.Now().Add(300 * time.Millisecond)
	for n := 0; time.Now().Before(deadline) || n < 20; n++ {
		rs, err := s.(locstore.MultiReader).ReadMany(ctx, []string{"rm/x", "rm/y"})
		if err != nil {
			t.Fatal(err)
		}
		if string(rs[0].Value) != string(rs[1].Value) {
			close(stop)
			<-done
			t.Fatalf("torn ReadMany: x=%s y=%s", rs[0].Value, rs[1].Value)
		}
	}
	close(stop)
	<-done
}
