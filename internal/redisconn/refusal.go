package redisconn

import (
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// Refusal is Redis refusing a write command whatever its arguments, and
// what an operator does about it.
type Refusal struct {
	Hint string
	// Lasting: the refusal holds until an operator acts (memory, disk),
	// so asking again at once does not help. The line is the one go-redis
	// draws for its own retries: it retries READONLY (during a failover it
	// drops the connection that met it, and the next call reaches the new
	// master) and NOREPLICAS (a replica reconnecting), never OOM or
	// MISCONF.
	Lasting bool
}

// writeRefusals are Redis's write refusals, each with its test.
var writeRefusals = []struct {
	is func(error) bool
	Refusal
}{
	{goredis.IsOOMError, Refusal{"Redis is at its maxmemory with the noeviction policy; raise maxmemory or free memory", true}},
	{func(err error) bool { return goredis.HasErrorPrefix(err, "MISCONF") },
		Refusal{"Redis stopped writes after a failed snapshot save (stop-writes-on-bgsave-error); fix its disk or persistence", true}},
	{goredis.IsNoReplicasError, Refusal{"Redis has fewer good replicas than min-replicas-to-write", false}},
	{goredis.IsReadOnlyError, Refusal{"this Redis is a read-only replica: a failover in progress, or the store points at a replica instead of the master (or at Sentinel or Cluster, which follow failovers)", false}},
}

// WriteRefusal reports whether err is Redis refusing a write outright (out
// of memory, a failed save, too few replicas, a read-only replica). Such a
// refusal comes before the refused command changes anything; whether a
// script or pipeline it ended wrote something earlier is for the caller to
// say.
func WriteRefusal(err error) (Refusal, bool) {
	for _, r := range writeRefusals {
		if r.is(err) {
			return r.Refusal, true
		}
	}
	return Refusal{}, false
}

// loginHint is what an operator does when Redis refuses a running node's
// login.
const loginHint = "Redis refused this connection's login: it wants a password or ACL user other than the configured one " +
	"(requirepass or the ACL changed after the store was opened); give the store's redis.username and redis.password what Redis " +
	"now wants (the environment, e.g. MESHNODE_LOCATION_STORE__REDIS__PASSWORD, then restart the node) or restore the server's login: " +
	"the node recovers by itself once Redis accepts the login it has"

// ExplainLogin wraps err in ErrAuth, with what to do, when it is Redis
// refusing a command for want of a login on a store already open — NOAUTH,
// WRONGPASS, or the protocol error an unauthenticated connection meets
// with a command of many arguments ("ERR Protocol error: unauthenticated
// multibulk length", which is what a script call of a running node got
// after requirepass was set: an operator try-out, 2026-12-06, where the
// nodes' log named neither the cause nor the keys). Other errors, and one
// already wrapped in ErrAuth (the open's), are returned unchanged.
func ExplainLogin(err error) error {
	if err == nil || errors.Is(err, ErrAuth) {
		return err
	}
	if LoginRefused(err) {
		return fmt.Errorf("%w: %w (%s; docs/store-redis.md)", ErrAuth, err, loginHint)
	}
	return err
}

// LoginRefused reports whether err is Redis refusing a command for want of
// a login (see ExplainLogin).
func LoginRefused(err error) bool {
	return isAuth(err) || goredis.HasErrorPrefix(err, "Protocol error: unauthenticated")
}

// ErrNoPermission is the cause when the server refused a command of the
// store to its account (NOPERM: the account's ACL rule lacks a command the
// store runs, or a key pattern of its namespace). A provider checks it when
// it opens, running one read script on a key of its namespace, so that a
// rule without +evalsha or +eval fails the open rather than the first use.
var ErrNoPermission = errors.New("the Redis account may not run a command the store needs")

// PermissionDenied reports whether err is Redis refusing a command for
// want of an ACL permission (a command, or a key pattern): NOPERM for a
// command sent, and for one a script ran Redis 7.0's "The user executing
// the script can't run this command or subcommand" (or "can't access at
// least one of the keys mentioned in the command") and Redis 7.2's (and
// Valkey's) "ACL failure in script: User … has no permissions to run the
// 'hset' command" (or "to access the '…' key"). Until review O
// (2026-12-08) only NOPERM and 7.0's command denial were recognised.
// ErrWaitRefused (replica_acks with an account without +wait) is not: it
// says what to add already.
func PermissionDenied(err error) bool {
	if err == nil || errors.Is(err, ErrWaitRefused) {
		return false
	}
	msg := err.Error()
	for _, s := range permissionDenials {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// permissionDenials are the texts of Redis's ACL denials (PermissionDenied).
var permissionDenials = []string{
	"NOPERM",
	"The user executing the script can't ", // 7.0: run this command, access a key or a channel
	"The user executing the script is lacking the permissions", // 7.0: any other denial
	"ACL failure in script: ",                                  // 7.2 and later
}

// PermissionHint says where the rule is.
const PermissionHint = `the account's ACL rule lacks a command or key pattern of the store; docs/store-redis.md, "The least an account needs", gives the rule`

// ExplainPermission wraps err in ErrNoPermission, keeping only Redis's
// reply, when the server refused a command for want of an ACL permission;
// otherwise it returns nil.
func ExplainPermission(err error) error {
	if !PermissionDenied(err) {
		return nil
	}
	var reply goredis.Error
	if errors.As(err, &reply) {
		return fmt.Errorf("%w: %w", ErrNoPermission, reply)
	}
	return fmt.Errorf("%w: %w", ErrNoPermission, err)
}
