package redis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/redisconn"
	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/relocstore"
	relocredis "github.com/meshnode/meshnode/relocstore/redis"
	"github.com/meshnode/meshnode/relocstore/storetest"
)

// Credentials of the secured servers below.
const (
	defaultPassword = "default-s3cret"
	appUser         = "meshnode"
	appPassword     = "app-s3cret"
)

// TestContractACLUser runs the whole contract suite as an ACL user with
// only the rights docs/store-redis.md recommends (testredis.StoreACL): if
// the provider sends a command they lack, some case fails with NOPERM.
func TestContractACLUser(t *testing.T) {
	s := testredis.NewSecuredServer(t, testredis.ServerOptions{Password: defaultPassword,
		Users: [][]string{testredis.StoreACL(appUser, appPassword, "acl-*")}})
	storetest.Run(t, storetest.Harness{
		Name: relocredis.ProviderName,
		New: func(t *testing.T) relocstore.Store {
			return newStore(t, relocredis.Options{Addrs: []string{s.Addr}, Username: appUser, Password: appPassword,
				Namespace: "acl-" + testredis.Namespace(t), OperationTimeout: 30 * time.Second})
		},
		Advance: func(t *testing.T, s relocstore.Store, d time.Duration) {
			relocredis.AdvanceClock(s.(*relocredis.Store), d)
		},
		ExpiryUnit: time.Second,
	})
}

// TestOpenRefusedLogin: New fails at once, with ErrAuth, when the server
// refuses the credentials, and never shows the password.
func TestOpenRefusedLogin(t *testing.T) {
	s := testredis.NewSecuredServer(t, testredis.ServerOptions{Password: defaultPassword,
		Users: [][]string{testredis.StoreACL(appUser, appPassword, "*")}})
	tests := []struct {
		name               string
		username, password string
	}{
		{"no password", "", ""},
		{"wrong password", "", "wrong-s3cret"},
		{"ACL user, wrong password", appUser, "wrong-s3cret"},
		{"unknown user", "nobody", appPassword},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const timeout = 2 * time.Second
			start := time.Now()
			st, err := relocredis.New(context.Background(), relocredis.Options{Addrs: []string{s.Addr},
				Username: tc.username, Password: tc.password, Namespace: testredis.Namespace(t), OperationTimeout: timeout})
			if err == nil {
				st.Close()
				t.Fatal("New succeeded")
			}
			if !errors.Is(err, relocredis.ErrAuth) || !errors.Is(err, relocstore.ErrUnavailable) {
				t.Fatalf("New err = %v, want ErrAuth and ErrUnavailable", err)
			}
			testredis.CheckRefusedLogin(t, err, time.Since(start), timeout, tc.password, defaultPassword, appPassword)
		})
	}
}

// TestOpenTLS: with TLSConfig every connection is TLS; the server here
// also requires a client certificate and the ACL user's password.
func TestOpenTLS(t *testing.T) {
	ctx := context.Background()
	certs := testredis.NewCerts(t)
	s := testredis.NewSecuredServer(t, testredis.ServerOptions{Password: defaultPassword,
		Users: [][]string{testredis.StoreACL(appUser, appPassword, "*")}, TLS: certs.ServerTLS(true)})
	st := newStore(t, relocredis.Options{Addrs: []string{s.TLSAddr}, Username: appUser, Password: appPassword,
		TLSConfig: certs.ClientTLS(t)})
	defer st.Close()
	payload := []byte("payload over TLS")
	if _, err := st.Put(ctx, "ref", payload, 0); err != nil {
		t.Fatalf("Put over TLS: %v", err)
	}
	got, err := st.Read(ctx, "ref")
	if err != nil || !got.Found || string(got.Bytes) != string(payload) {
		t.Fatalf("Read over TLS: %+v %v", got, err)
	}

	untrusting := certs.ClientTLS(t)
	untrusting.RootCAs = testredis.NewCerts(t).ClientTLS(t).RootCAs // another CA
	if _, err := relocredis.New(ctx, relocredis.Options{Addrs: []string{s.TLSAddr}, Username: appUser, Password: appPassword,
		TLSConfig: untrusting, Namespace: testredis.Namespace(t)}); !errors.Is(err, relocredis.ErrTLS) {
		t.Fatalf("New with a CA that did not sign the server's certificate: err = %v, want ErrTLS", err)
	}
}

// replica_acks with an account whose ACL rule lacks +wait: the store is not
// opened, and the error says what to add.
func TestReplicaAcksNeedWait(t *testing.T) {
	s := testredis.NewSecuredServer(t, testredis.ServerOptions{Password: defaultPassword,
		Users: [][]string{testredis.StoreACL(appUser, appPassword, "*")}})
	_, err := relocredis.New(t.Context(), relocredis.Options{Addrs: []string{s.Addr}, Username: appUser, Password: appPassword,
		Namespace: testredis.Namespace(t), ReplicaAcks: 1, ReplicaAckTimeout: 100 * time.Millisecond})
	if !errors.Is(err, redisconn.ErrWaitRefused) || !errors.Is(err, relocstore.ErrUnavailable) || !strings.Contains(err.Error(), "+wait") {
		t.Fatalf("open with replica_acks as a user without +wait: %v", err)
	}
}

// An account without +eval or without +script|load: the open fails with
// ErrNoPermission also when the server has the store's scripts cached
// already (another node loaded them), so that the open's EVALSHA alone
// would pass. Until review O (2026-12-08) it then opened and served, and
// every call failed with NOPERM once the script cache was emptied (a Redis
// restart, a failover, SCRIPT FLUSH), on every node at once.
func TestOpenWithoutEvalWhenScriptsAreCached(t *testing.T) {
	for _, lacking := range []string{"+eval", "+script|load"} {
		t.Run(lacking, func(t *testing.T) {
			var rule []string
			for _, arg := range testredis.StoreACL(appUser, appPassword, "*") {
				if arg != lacking {
					rule = append(rule, arg)
				}
			}
			s := testredis.NewSecuredServer(t, testredis.ServerOptions{Password: defaultPassword, Users: [][]string{rule}})
			ns := testredis.Namespace(t)
			// The default user's store loads the scripts.
			full := newStore(t, relocredis.Options{Addrs: []string{s.Addr}, Password: defaultPassword, Namespace: ns})
			ctx := context.Background()
			if _, err := full.Put(ctx, "r", []byte("x"), time.Minute); err != nil {
				t.Fatalf("Put as the default user: %v", err)
			}
			full.Close()
			st, err := relocredis.New(ctx, relocredis.Options{Addrs: []string{s.Addr}, Username: appUser, Password: appPassword, Namespace: ns})
			if err == nil {
				st.Close()
				t.Fatalf("New succeeded with an account without %s", lacking)
			}
			if !errors.Is(err, relocredis.ErrNoPermission) {
				t.Fatalf("New err = %v, want ErrNoPermission", err)
			}
		})
	}
}

// An account whose ACL rule grants the scripts but lacks a command the
// write scripts run: New fails with ErrNoPermission naming the command.
// Before (operator try-out), the open's read check passed, the node
// started, and the first Instance Spot activation failed. An account with
// the whole rule opens, and the check leaves nothing behind: no key, no
// change (rdb_changes_since_last_save).
func TestOpenWithoutWritePermission(t *testing.T) {
	full := testredis.StoreACL(appUser, appPassword, "*")
	missing := []string{"hset", "set", "del", "rename", "pexpireat", "exists", "strlen"}
	users := [][]string{full}
	for _, c := range missing {
		users = append(users, testredis.StoreACLWithout("no-"+c, appPassword, "*", c))
	}
	s := testredis.NewSecuredServer(t, testredis.ServerOptions{Password: defaultPassword, Users: users})
	for _, c := range missing {
		t.Run(c, func(t *testing.T) {
			st, err := relocredis.New(t.Context(), relocredis.Options{Addrs: []string{s.Addr}, Username: "no-" + c,
				Password: appPassword, Namespace: testredis.Namespace(t)})
			if err == nil {
				st.Close()
				t.Fatalf("New as a user without +%s succeeded", c)
			}
			if !errors.Is(err, relocredis.ErrNoPermission) || !errors.Is(err, relocstore.ErrUnavailable) ||
				!strings.Contains(err.Error(), "'"+c+"'") {
				t.Fatalf("New as a user without +%s: %v; want ErrNoPermission naming %q", c, err, c)
			}
		})
	}
	raw := goredis.NewClient(&goredis.Options{Addr: s.Addr, Password: defaultPassword})
	defer raw.Close()
	ctx := t.Context()
	changes := func() string {
		info, err := raw.Info(ctx, "persistence").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if strings.HasPrefix(line, "rdb_changes_since_last_save:") {
				return line
			}
		}
		t.Fatalf("no rdb_changes_since_last_save in\n%s", info)
		return ""
	}
	before := changes()
	st := newStore(t, relocredis.Options{Addrs: []string{s.Addr}, Username: appUser, Password: appPassword})
	defer st.Close()
	if n, err := raw.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("after New: %d keys (%v), want none", n, err)
	}
	if after := changes(); after != before {
		t.Errorf("New changed the data set: %s before, %s after", before, after)
	}
}
