package redisconn

import goredis "github.com/redis/go-redis/v9"

// Refusal is Redis refusing a write command whatever its arguments, and
// what an operator does about it.
type Refusal struct {
	Hint string
	// Lasting: the refusal holds until an operator acts (memory, disk,
	// replicas), so asking again at once does not help. A read-only
	// replica is not lasting: during a failover the client drops the
	// connection that met it (go-redis closes a connection on READONLY)
	// and the next call reaches the new master.
	Lasting bool
}

// writeRefusals are the error prefixes of Redis's write refusals.
var writeRefusals = []struct {
	prefix string
	Refusal
}{
	{"OOM", Refusal{"Redis is at its maxmemory with the noeviction policy; raise maxmemory or free memory", true}},
	{"MISCONF", Refusal{"Redis stopped writes after a failed snapshot save (stop-writes-on-bgsave-error); fix its disk or persistence", true}},
	{"NOREPLICAS", Refusal{"Redis has fewer good replicas than min-replicas-to-write", true}},
	{"READONLY", Refusal{"this Redis is a read-only replica: a failover in progress, or the store points at a replica instead of the master (or at Sentinel or Cluster, which follow failovers)", false}},
}

// WriteRefusal reports whether err is Redis refusing a write outright (out
// of memory, a failed save, too few replicas, a read-only replica). Such a
// refusal comes before the refused command changes anything; whether a
// script or pipeline it ended wrote something earlier is for the caller to
// say.
func WriteRefusal(err error) (Refusal, bool) {
	for _, r := range writeRefusals {
		if goredis.HasErrorPrefix(err, r.prefix) {
			return r.Refusal, true
		}
	}
	return Refusal{}, false
}
