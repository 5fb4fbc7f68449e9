package redisconn

import goredis "github.com/redis/go-redis/v9"

// writeRefusals are the errors with which Redis refuses a write command
// whatever its arguments, and what an operator does about each.
var writeRefusals = []struct{ prefix, hint string }{
	{"OOM", "Redis is at its maxmemory with the noeviction policy; raise maxmemory or free memory"},
	{"READONLY", "this Redis is a read-only replica; point the store at the master, or at Sentinel or Cluster, which follow failovers"},
	{"MISCONF", "Redis stopped writes after a failed snapshot save (stop-writes-on-bgsave-error); fix its disk or persistence"},
	{"NOREPLICAS", "Redis has fewer good replicas than min-replicas-to-write"},
}

// WriteRefusal reports whether err is Redis refusing a write outright (out
// of memory, a read-only replica, a failed save, too few replicas), with
// what an operator does about it. Such a refusal comes before the refused
// command changes anything; whether a script or pipeline it ended wrote
// something earlier is for the caller to say.
func WriteRefusal(err error) (hint string, ok bool) {
	for _, r := range writeRefusals {
		if goredis.HasErrorPrefix(err, r.prefix) {
			return r.hint, true
		}
	}
	return "", false
}
