package testredis

import (
	"strings"
	"testing"
	"time"
)

// StoreCommands are the commands the Redis store providers send, their
// scripts included: the least an ACL user needs to run the Location Store
// and the Relocation Store. The providers' contract suites run as a user
// with exactly these rights, so a command added to a provider without
// updating them fails there; removing any one of them fails one suite.
// docs/store-redis.md ("Securing the connection") shows them as an ACL
// rule, and TestStoreACLDocumented keeps the two equal.
var StoreCommands = []string{
	// connection and the scripts themselves
	"ping", "evalsha", "eval", "script|load", "time",
	// sent directly or from the scripts
	"get", "set", "del", "exists", "rename", "strlen", "incrby",
	"hget", "hmget", "hset", "hdel",
	"persist", "pexpire", "pexpireat", "pttl",
	"zadd", "zrem", "zrange", "zrangebyscore", "zrangebylex",
}

// StoreACL returns the ACL SETUSER arguments of a user named name, with
// password, allowed StoreCommands on the keys of the given store
// namespaces only: the rule docs/store-redis.md recommends.
func StoreACL(name, password string, namespaces ...string) []string {
	rule := []string{name, "reset", "on", ">" + password}
	for _, ns := range namespaces {
		rule = append(rule, "~{"+ns+"}:*")
	}
	rule = append(rule, "-@all")
	for _, c := range StoreCommands {
		rule = append(rule, "+"+c)
	}
	return rule
}

// StoreACLWithout is StoreACL without the given commands (lowercase, as
// in StoreCommands), on the keys of one namespace pattern: the rule of
// an account that lacks them.
func StoreACLWithout(name, password, namespace string, without ...string) []string {
	var rule []string
next:
	for _, arg := range StoreACL(name, password, namespace) {
		for _, c := range without {
			if arg == "+"+c {
				continue next
			}
		}
		rule = append(rule, arg)
	}
	return rule
}

// CheckRefusedLogin checks how a store provider reports a refused login: it
// failed within half of its operation timeout (a refusal is known at once,
// not after a timeout), says "authentication failed", and shows none of
// secrets. The provider-specific error kinds are the caller's to check.
func CheckRefusedLogin(t testing.TB, err error, took, timeout time.Duration, secrets ...string) {
	t.Helper()
	if took > timeout/2 {
		t.Errorf("New took %v to fail: a refused login must be reported at once", took)
	}
	if !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("error %q does not say authentication failed", err)
	}
	for _, secret := range secrets {
		if secret != "" && strings.Contains(err.Error(), secret) {
			t.Errorf("error %q shows a password", err)
		}
	}
}
