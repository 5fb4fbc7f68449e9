package redisconn

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Why writes can wait for replicas. Redis acknowledges a write before any
// replica has it, so a failover can promote a replica that never saw
// writes the mesh already acted on (docs/store-redis.md: the providers then
// see the namespace go back in time and stop). WAIT closes that window for
// the writes that wait: it blocks the connection until the given number of
// replicas acknowledged every write sent on it, and Sentinel promotes the
// replica with the most data, so a write that waited survives the failover
// of its master as long as a replica that acknowledged it is promoted.

// Replicas is how many replica acknowledgements each write of a store
// waits for, and for how long at most.
type Replicas struct {
	Acks    int           // 0: writes do not wait
	Timeout time.Duration // > 0 when Acks > 0
}

// MaxReplicaAcks bounds Replicas.Acks: more replicas than this is no
// deployment a single store is meant for, and a typo (1000) would otherwise
// stall every write for the timeout.
const MaxReplicaAcks = 16

// Validate checks r.
func (r Replicas) Validate() error {
	switch {
	case r.Acks < 0 || r.Acks > MaxReplicaAcks:
		return fmt.Errorf("replica acks must be 0..%d, got %d", MaxReplicaAcks, r.Acks)
	case r.Acks > 0 && r.Timeout <= 0:
		return errors.New("replica ack timeout must be positive when replica acks are asked for")
	case r.Timeout < 0:
		return errors.New("replica ack timeout must not be negative")
	}
	return nil
}

// ErrNotReplicated is matched by *NotReplicatedError.
var ErrNotReplicated = errors.New("write not acknowledged by enough replicas")

// NotReplicatedError: the write applied on the master, but fewer replicas
// than asked acknowledged it within the timeout, so a failover could still
// lose it. The providers return it inside their ProviderError (the store is
// then "unavailable", the outcome of the write unknown): the framework
// re-reads, as after any write whose result it does not know (spec §10).
type NotReplicatedError struct {
	Acked, Want int
	Timeout     time.Duration
}

func (e *NotReplicatedError) Error() string {
	return fmt.Sprintf("write applied on the Redis master but acknowledged by %d of the %d replicas asked for within %s "+
		"(is a replica down or lagging? a failover now could lose it)", e.Acked, e.Want, e.Timeout)
}

// Is makes errors.Is(err, ErrNotReplicated) true.
func (e *NotReplicatedError) Is(target error) bool { return target == ErrNotReplicated }

// RunReplicated sends cmds, then WAIT, on one connection of the master
// that serves key (all in one round trip), and returns the number of
// replicas that acknowledged. Each command's own result and error are in
// it; the error returned is WAIT's, or the connection's. A write that must
// not be sent twice should be a NoRetry command: a pipeline holding one is
// not retried by the client.
func RunReplicated(ctx context.Context, c goredis.UniversalClient, key string, r Replicas, cmds ...goredis.Cmder) (int, error) {
	var conn goredis.Cmdable = c
	if cc, ok := c.(*goredis.ClusterClient); ok {
		// WAIT counts the writes of its own connection: it must go to the
		// node that ran cmd, which a keyless command in a Cluster
		// pipeline is not sure to.
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return 0, err
		}
		conn = node
	}
	pipe := conn.Pipeline()
	for _, cmd := range cmds {
		_ = pipe.Process(ctx, cmd)
	}
	// WAIT's timeout is in ms, and 0 would block for good.
	wait := goredis.NewIntCmd(ctx, "wait", r.Acks, max(r.Timeout.Milliseconds(), 1))
	_ = pipe.Process(ctx, wait)
	_, _ = pipe.Exec(ctx) // each command's error is its own
	n, err := wait.Result()
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// Check returns the NotReplicatedError when acked falls short of r.
func (r Replicas) Check(acked int) error {
	if acked >= r.Acks {
		return nil
	}
	return &NotReplicatedError{Acked: acked, Want: r.Acks, Timeout: r.Timeout}
}
