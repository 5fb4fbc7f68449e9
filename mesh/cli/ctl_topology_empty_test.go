package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// ctl topology on a namespace holding no descriptor (emptied, or the wrong
// one) says so plainly on stderr, naming the namespace and the store, and
// hints at a wrong namespace or address (or --mesh, when given); stdout
// stays empty for scripts. Before, it printed a bare header (an operator
// try-out on an emptied namespace).
func TestCtlTopologyOnAnEmptyNamespaceSaysSoRedis(t *testing.T) {
	ctx := context.Background()
	st, addr, ns := ctlRedis(t)
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(ctx, append([]string{"ctl", "topology", "--location_store.provider", "redis",
			"--location_store.redis.addrs", addr, "--location_store.redis.namespace", ns, "--log.level", "error"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	t.Run("empty namespace", func(t *testing.T) {
		code, out, errs := run()
		if code != ExitOK || out != "" {
			t.Fatalf("exit %d, stdout %q; want 0 and nothing", code, out)
		}
		for _, want := range []string{"no node is registered in namespace " + ns, "Redis at " + addr, "location_store.redis.namespace"} {
			if !strings.Contains(errs, want) {
				t.Errorf("stderr %q does not say %q", errs, want)
			}
		}
	})
	// A node of another mesh: --mesh names what is there.
	v, err := ctlDescriptor("game", []byte{0x0c}, "owner-w").Encode()
	if err != nil {
		t.Fatal(err)
	}
	key, _ := record.MeshNodeKey("game", []byte{0x0c})
	if res, err := st.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put(key, v)}}); err != nil || !res.Applied {
		t.Fatalf("seed: %+v %v", res, err)
	}
	t.Run("other mesh", func(t *testing.T) {
		code, out, errs := run("--mesh", "gmae")
		if code != ExitOK || out != "" {
			t.Fatalf("exit %d, stdout %q; want 0 and nothing", code, out)
		}
		for _, want := range []string{`no node of mesh "gmae" is registered in namespace ` + ns, `meshes there: "game"`} {
			if !strings.Contains(errs, want) {
				t.Errorf("stderr %q does not say %q", errs, want)
			}
		}
	})
	t.Run("a node", func(t *testing.T) {
		code, out, errs := run()
		if code != ExitOK || !strings.Contains(out, "0c") || errs != "" {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errs)
		}
	})
}
