package redisconn

import goredis "github.com/redis/go-redis/v9"

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
