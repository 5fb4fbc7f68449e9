package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/redisconn"
	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/locstore/storetest"
)

// Credentials of the secured servers below.
const (
	defaultPassword = "default-s3cret"
	appUser         = "meshnode"
	appPassword     = "app-s3cret"
)

// aclNamespace prefixes the namespaces of the ACL user's tests; its rights
// cover "{acl-*}:*" only.
const aclNamespace = "acl-"

// TestContractACLUser runs the whole contract suite as an ACL user with
// only the rights docs/store-redis.md recommends (testredis.StoreACL): if
// the provider sends a command they lack, some case fails with NOPERM.
func TestContractACLUser(t *testing.T) {
	s := testredis.NewSecuredServer(t, testredis.ServerOptions{Password: defaultPassword,
		Users: [][]string{testredis.StoreACL(appUser, appPassword, aclNamespace+"*")}})
	h := harness()
	h.New = func(t *testing.T) locstore.Store {
		st, err := New(context.Background(), Options{Addrs: []string{s.Addr}, Username: appUser, Password: appPassword,
			Namespace: aclNamespace + testredis.Namespace(t), OperationTimeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("New as ACL user %s: %v", appUser, err)
		}
		return st
	}
	storetest.Run(t, h)
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
		{"ACL user, default user's password", appUser, defaultPassword},
		{"unknown user", "nobody", appPassword},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const timeout = 2 * time.Second
			start := time.Now()
			st, err := New(context.Background(), Options{Addrs: []string{s.Addr}, Username: tc.username, Password: tc.password,
				Namespace: testredis.Namespace(t), OperationTimeout: timeout})
			if err == nil {
				st.Close()
				t.Fatal("New succeeded")
			}
			if !errors.Is(err, ErrAuth) || !errors.Is(err, locstore.ErrUnavailable) {
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
	st, err := New(ctx, Options{Addrs: []string{s.TLSAddr}, Username: appUser, Password: appPassword,
		TLSConfig: certs.ClientTLS(t), Namespace: testredis.Namespace(t)})
	if err != nil {
		t.Fatalf("New over TLS: %v", err)
	}
	defer st.Close()
	if res, err := st.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("k", []byte("v"))}}); err != nil || !res.Applied {
		t.Fatalf("Write over TLS: %+v %v", res, err)
	}
	if res, err := st.Read(ctx, "k"); err != nil || string(res.Value) != "v" {
		t.Fatalf("Read over TLS: %+v %v", res, err)
	}

	untrusting := certs.ClientTLS(t)
	untrusting.RootCAs = testredis.NewCerts(t).ClientTLS(t).RootCAs // another CA
	if _, err := New(ctx, Options{Addrs: []string{s.TLSAddr}, Username: appUser, Password: appPassword,
		TLSConfig: untrusting, Namespace: testredis.Namespace(t)}); !errors.Is(err, ErrTLS) {
		t.Fatalf("New with a CA that did not sign the server's certificate: err = %v, want ErrTLS", err)
	}
}

// replica_acks with an account whose ACL rule lacks +wait: the store is
// not opened, and the error says what to add (every write would fail
// later otherwise); with +wait it opens.
func TestReplicaAcksNeedWait(t *testing.T) {
	withWait := append(testredis.StoreACL("waiter", appPassword, "*"), "+wait")
	s := testredis.NewSecuredServer(t, testredis.ServerOptions{Password: defaultPassword,
		Users: [][]string{testredis.StoreACL(appUser, appPassword, "*"), withWait}})
	open := func(user string) (*Store, error) {
		return New(context.Background(), Options{Addrs: []string{s.Addr}, Username: user, Password: appPassword,
			Namespace: testredis.Namespace(t), ReplicaAcks: 1, ReplicaAckTimeout: 100 * time.Millisecond})
	}
	_, err := open(appUser)
	if !errors.Is(err, redisconn.ErrWaitRefused) || !errors.Is(err, locstore.ErrUnavailable) || !strings.Contains(err.Error(), "+wait") {
		t.Fatalf("open with replica_acks as a user without +wait: %v", err)
	}
	st, err := open("waiter")
	if err != nil {
		t.Fatalf("open with replica_acks as a user with +wait: %v", err)
	}
	defer st.Close()
	put(t, st, "k", "v") // no replica: waits the timeout, then counts
}

// An account whose rule grants the scripts but not a command the write
// script writes with (here HSET): the open's read check passes, and the
// write fails with ErrPermission (so a node's lease acquire stops at once
// instead of retrying) and ErrNoPermission, saying where the rule is.
// Before (operator try-out, 2026-12-07) it was an ordinary failure with
// Redis's "ERR The user executing the script can't run this command or
// subcommand" alone, and a node retried its acquire until stopped.
func TestWriteWithoutPermissionIsNamed(t *testing.T) {
	rule := testredis.StoreACLWithout(appUser, appPassword, "*", "hset")
	s := testredis.NewSecuredServer(t, testredis.ServerOptions{Password: defaultPassword, Users: [][]string{rule}})
	st, err := New(context.Background(), Options{Addrs: []string{s.Addr}, Username: appUser, Password: appPassword,
		Namespace: testredis.Namespace(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer st.Close()
	_, err = st.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("k", []byte("v"))}})
	if !errors.Is(err, locstore.ErrPermission) || !errors.Is(err, ErrNoPermission) || errors.Is(err, locstore.ErrWriteRefused) {
		t.Fatalf("write err = %v, want ErrPermission and ErrNoPermission (not ErrWriteRefused)", err)
	}
	if !strings.Contains(err.Error(), "The least an account needs") {
		t.Errorf("write err %q does not say where the rule is", err)
	}
}

// An account whose key patterns leave out one key of the namespace a
// script touches without being given it (here {ns}:exp, which an expiring
// write adds to): Redis (7.0) stops the script with "ERR The user
// executing the script can't access at least one of the keys mentioned in
// the command", a key-pattern denial as lasting as a missing command. The
// write fails with ErrPermission and ErrNoPermission, as for a command the
// rule lacks — until review O (2026-12-08) only the command denial was
// recognised, and a node retried such an owner-lease acquire until it was
// stopped.
func TestWriteWithoutKeyPermissionIsNamed(t *testing.T) {
	ns := testredis.Namespace(t)
	var rule []string
	for _, arg := range testredis.StoreACL(appUser, appPassword, ns) {
		if arg == "~{"+ns+"}:*" {
			for _, k := range []string{"k:*", "h:*", "hv:*", "seq", "idx", "snaps", "snap:*", "cursorkey"} {
				rule = append(rule, "~{"+ns+"}:"+k)
			}
			continue
		}
		rule = append(rule, arg)
	}
	s := testredis.NewSecuredServer(t, testredis.ServerOptions{Password: defaultPassword, Users: [][]string{rule}})
	st, err := New(context.Background(), Options{Addrs: []string{s.Addr}, Username: appUser, Password: appPassword,
		Namespace: ns})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer st.Close()
	put(t, st, "durable", "v") // touches no key outside the rule
	_, err = st.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{
		locstore.PutExpiring("expiring", []byte("v"), time.Minute)}})
	if !errors.Is(err, locstore.ErrPermission) || !errors.Is(err, ErrNoPermission) || errors.Is(err, locstore.ErrWriteRefused) {
		t.Fatalf("expiring write err = %v, want ErrPermission and ErrNoPermission (not ErrWriteRefused)", err)
	}
	if !strings.Contains(err.Error(), "The least an account needs") {
		t.Errorf("write err %q does not say where the rule is", err)
	}
}

// An account without +eval: the open fails with ErrNoPermission also when
// the server has the store's scripts cached already (another node, or an
// earlier run, loaded them), so that the open's EVALSHA alone would pass.
// Until review O (2026-12-08) it then opened and served — until the script
// cache was emptied (a Redis restart, a failover to a replica, SCRIPT
// FLUSH): every call then fell back to EVAL and failed with NOPERM, on
// every node using the account at once.
func TestOpenWithoutEvalWhenScriptsAreCached(t *testing.T) {
	var rule []string
	for _, arg := range testredis.StoreACL(appUser, appPassword, "*") {
		if arg != "+eval" {
			rule = append(rule, arg)
		}
	}
	s := testredis.NewSecuredServer(t, testredis.ServerOptions{Password: defaultPassword, Users: [][]string{rule}})
	ns := testredis.Namespace(t)
	// The default user's store loads the scripts (EVAL caches them).
	full, err := New(context.Background(), Options{Addrs: []string{s.Addr}, Password: defaultPassword, Namespace: ns})
	if err != nil {
		t.Fatalf("New as the default user: %v", err)
	}
	put(t, full, "k", "v")
	full.Close()
	st, err := New(context.Background(), Options{Addrs: []string{s.Addr}, Username: appUser, Password: appPassword, Namespace: ns})
	if err == nil {
		st.Close()
		t.Fatal("New succeeded with an account without +eval")
	}
	if !errors.Is(err, ErrNoPermission) {
		t.Fatalf("New err = %v, want ErrNoPermission", err)
	}
}
