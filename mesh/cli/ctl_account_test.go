package cli

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/testredis"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// docACLRule returns the arguments of the "redis-cli ACL SETUSER
// meshnode-ctl ..." command docs/OPERATIONS.md gives for ctl, from the user
// name on, split as a shell would (single quotes only, which is all it
// uses).
func docACLRule(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	const start = "redis-cli ACL SETUSER meshnode-ctl "
	i := strings.Index(string(doc), start)
	if i < 0 {
		t.Fatalf("docs/OPERATIONS.md has no %q command", start)
	}
	var cmd strings.Builder
	for _, line := range strings.Split(string(doc[i:]), "\n") {
		body, more := strings.CutSuffix(strings.TrimSpace(line), `\`)
		cmd.WriteString(body + " ")
		if !more {
			break
		}
	}
	var args []string
	var cur strings.Builder
	quoted, inArg := false, false
	for _, r := range cmd.String() {
		switch {
		case r == '\'':
			quoted, inArg = !quoted, true
		case r == ' ' && !quoted:
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if quoted || len(args) < 4 {
		t.Fatalf("cannot split the documented command %q", cmd.String())
	}
	return args[3:]
}

// The ctl commands that read a Redis Location Store work with the account
// docs/OPERATIONS.md "A Redis account for ctl" gives them — read from the
// document, so the two cannot drift apart — including a multi-page scan and
// a list page that keeps continuation state; a plain read-only account is
// refused with a pointer to that section. A node stopped in order is gone
// from the topology at once.
func TestCtlRedisAccount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, ns := testredis.Addr(t), testredis.Namespace(t)
	admin := goredis.NewClient(&goredis.Options{Addr: addr})
	defer admin.Close()

	const password = "ctl-test-password"
	user, readOnly := "ctl-"+ns, "ro-"+ns
	setuser := []any{"ACL", "SETUSER"}
	for i, a := range docACLRule(t) {
		switch {
		case i == 0:
			a = user
		case strings.HasPrefix(a, ">"):
			a = ">" + password
		}
		setuser = append(setuser, strings.ReplaceAll(a, "{meshnode}", "{"+ns+"}"))
	}
	if err := admin.Do(ctx, setuser...).Err(); err != nil {
		t.Fatalf("the documented ACL rule: %v\n%v", err, setuser)
	}
	if err := admin.Do(ctx, "ACL", "SETUSER", readOnly, "on", ">"+password, "resetkeys", "-@all", "+@read", "+ping", "~{"+ns+"}:*").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user, readOnly) })

	// Seven actor rows in key order; the fifth is of another type, so a
	// "--type Player --limit 4" listing's look-ahead meets the next match
	// on the snapshot's last scan page and keeps it (docs: Kept rows).
	st, err := locredis.New(ctx, locredis.Options{Addrs: []string{addr}, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keyOf := func(id string) string {
		pre, err := record.AuthorityPreimage(record.IdentityActor, id)
		if err != nil {
			t.Fatal(err)
		}
		return record.Key(pre)
	}
	var objs []queryObj
	for i := range 7 {
		objs = append(objs, queryObj{fmt.Sprintf("row%d", i), record.ObjectActor, record.AllocationActive, "Player", "node-1"})
	}
	slices.SortFunc(objs, func(a, b queryObj) int { return strings.Compare(keyOf(a.id), keyOf(b.id)) })
	objs[4].typ = "Npc"
	seedQueryRows(t, st, objs, map[string]record.Generation{"node-1": 5})

	// A node publishes its descriptor on the same namespace.
	cfg := config.Default()
	cfg.Node.MeshName = "acl"
	cfg.Node.ObjectRole = config.RoleClient
	cfg.LocationStore.Provider = config.ProviderRedis
	cfg.LocationStore.Redis.Addrs, cfg.LocationStore.Redis.Namespace = []string{addr}, ns
	cfg.Log.Level = config.LogError
	node, err := mesh.Start(ctx, mesh.Options{Config: cfg, Factories: spot.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close(context.Background())
	rid := hex.EncodeToString(node.RID())

	t.Setenv(config.EnvName("location_store.redis.password"), password)
	run := func(account string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		args = append(append([]string{"ctl"}, args...), "--location_store.provider", "redis",
			"--location_store.redis.addrs", addr, "--location_store.redis.namespace", ns,
			"--location_store.redis.username", account, "--log.level", "error")
		code := Main(ctx, args, &out, &errb)
		return code, out.String(), errb.String()
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"topology", []string{"topology"}, rid},
		{"locate", []string{"locate", "actor", "row0"}, " ready "},
		{"record", []string{"record", keyOf("row0")}, "decode:     ok"},
		{"list over several scan pages, keeping state", []string{"list", "--kind", "actor", "--type", "Player", "--limit", "4", "--all"},
			"6 entries in 2 page(s), complete"},
	} {
		t.Run("documented account: "+tc.name, func(t *testing.T) {
			code, out, errs := run(user, tc.args...)
			if code != ExitOK || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want 0 and %q\nstdout %s\nstderr %s", code, tc.want, out, errs)
			}
		})
	}
	if n, err := admin.Keys(ctx, "{"+ns+"}:k:query-continuation:*").Result(); err != nil || len(n) == 0 {
		t.Fatalf("the listing kept no continuation state (%v): the test no longer covers that write", err)
	}
	t.Run("read-only account", func(t *testing.T) {
		code, out, errs := run(readOnly, "topology")
		if code != ExitError || out != "" || !strings.Contains(errs, `docs/OPERATIONS.md, "A Redis account for ctl"`) {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errs)
		}
	})
	t.Run("a node stopped in order leaves the topology", func(t *testing.T) {
		if err := node.Close(ctx); err != nil {
			t.Fatal(err)
		}
		code, out, errs := run(user, "topology")
		if code != ExitOK || strings.Contains(out, rid) {
			t.Fatalf("exit %d, stopped node %s still listed\nstdout %s\nstderr %s", code, rid, out, errs)
		}
	})
}

// A permission error of any Redis version points at "A Redis account for
// ctl": until review O (2026-12-08) ctl looked for NOPERM and Redis 7.0's
// "can't run this command" itself, and Redis 7.2's words for a command or
// key a script was denied got no pointer.
func TestCtlPermissionErrorPointsAtTheAccountSection(t *testing.T) {
	for _, msg := range []string{
		"NOPERM User ro has no permissions to run the 'evalsha' command",
		"ERR The user executing the script can't run this command or subcommand script: 3112be…, on @user_script:165.",
		"ERR ACL failure in script: User ro has no permissions to run the 'set' command script: 3112be…, on @user_script:165.",
		"ERR ACL failure in script: User ro has no permissions to access the '{m}:cursorkey' key script: 3112be…, on @user_script:9.",
	} {
		var errb bytes.Buffer
		code := storeFailed(&errb, "meshnode ctl list", fmt.Errorf("locstore redis scan: %s", msg))
		if code != ExitError || !strings.Contains(errb.String(), `docs/OPERATIONS.md, "A Redis account for ctl"`) {
			t.Errorf("%s: exit %d, stderr %q: want exit %d and the pointer", msg, code, errb.String(), ExitError)
		}
	}
}
