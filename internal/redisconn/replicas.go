package redisconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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
//
// Why a write that is not acknowledged in time still counts. It has
// applied on the master; failing it would only make the framework re-read
// (an unknown outcome, spec §10) and go on with what the master holds — the
// same durability, one timeout and one read later for every write while the
// replicas are away (tried: a mesh after a failover that left no replica
// made ~3 creations/s instead of ~700). So the store stops waiting, says
// so once, and checks about once a second (one write waits the full
// timeout) whether the replicas are back. What it wrote meanwhile is what
// a failover can still lose — and the rollback watch then stops the nodes.
// Operators who would rather have no writes at all without a replica set
// min-replicas-to-write on the master: Redis then refuses them.

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

// ValidateWithin is Validate, and the timeout must also leave the store's
// operation timeout room for the write itself.
func (r Replicas) ValidateWithin(opTimeout time.Duration) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Acks > 0 && r.Timeout >= opTimeout {
		return fmt.Errorf("replica ack timeout %v is not below the operation timeout %v, which must also cover the write itself", r.Timeout, opTimeout)
	}
	return nil
}

// ProbeEvery is how often, while the replicas do not keep up, one write
// waits the full timeout to find out whether they are back.
const ProbeEvery = time.Second

// ReplicaWait is the replica wait of one store (its state machine: keeping
// up, or not keeping up with a probe due at some time). Safe for concurrent
// use.
type ReplicaWait struct {
	r     Replicas
	store string // "Location Store", for the log lines
	log   *slog.Logger
	now   func() time.Time

	mu        sync.Mutex
	behind    bool      // the last judged write was acknowledged by fewer than r.Acks
	nextProbe time.Time // while behind: when the next write waits again
	probing   bool      // a probe is under way
}

// NewReplicaWait returns the wait of a store, or nil when r asks for none.
// now is the clock (nil: time.Now).
func NewReplicaWait(r Replicas, store string, log *slog.Logger, now func() time.Time) *ReplicaWait {
	if r.Acks == 0 {
		return nil
	}
	if log == nil {
		log = slog.Default()
	}
	if now == nil {
		now = time.Now
	}
	return &ReplicaWait{r: r, store: store, log: log, now: now}
}

// Plan says whether the next write waits, and for how long; a write that
// waits must report WAIT's answer to Done(true, acked) — or Done(false, 0)
// when it learnt nothing (the write or WAIT failed).
func (w *ReplicaWait) Plan() (wait bool, timeout time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.behind {
		return true, w.r.Timeout
	}
	if w.probing || w.now().Before(w.nextProbe) {
		return false, 0
	}
	w.probing = true
	return true, w.r.Timeout
}

// Done takes the outcome of a write that waited.
func (w *ReplicaWait) Done(answered bool, acked int) {
	w.mu.Lock()
	wasBehind := w.behind
	w.probing = false
	if !answered {
		w.mu.Unlock()
		return
	}
	behind := acked < w.r.Acks
	w.behind = behind
	if behind {
		w.nextProbe = w.now().Add(ProbeEvery)
	}
	w.mu.Unlock()
	switch {
	case behind && !wasBehind:
		w.log.Warn(w.store+": writes are not acknowledged by enough Redis replicas; they go on without waiting "+
			"until a replica acknowledges again (checked every second). A failover meanwhile can lose them — the nodes would then "+
			"stop with STORE DATA LOST. To refuse writes instead, set min-replicas-to-write on the Redis master",
			"replica_acks", w.r.Acks, "acknowledged", acked, "replica_ack_timeout", w.r.Timeout)
	case !behind && wasBehind:
		w.log.Info(w.store+": Redis replicas acknowledge writes again; every write waits for them",
			"replica_acks", w.r.Acks, "acknowledged", acked)
	}
}

// Behind reports whether writes currently go on without waiting.
func (w *ReplicaWait) Behind() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.behind
}

// Run sends cmds on one connection of the master that serves key, in one
// round trip, followed by WAIT when Plan says this write waits. Each
// command's own result and error are in it; the error returned is the
// first command's error, else WAIT's. A write that must not be sent twice
// should be a NoRetry command: a pipeline holding one is not retried by the
// client.
//
// WAIT's timeout is the configured one cut to what ctx's deadline leaves,
// less a reserve for the round trip (WithinDeadline): the client reads
// WAIT's reply under that deadline, so a longer WAIT would make the call
// fail at the deadline with an unknown outcome although the master applied
// the write. A wait cut short that did not get the acknowledgements says
// nothing about the replicas (the operator's timeout is what judges them),
// so it does not change the state unless it was cut by less than a
// quarter; the write counts, as any write whose WAIT timed out.
func (w *ReplicaWait) Run(ctx context.Context, c goredis.UniversalClient, key string, cmds ...goredis.Cmder) error {
	wait, timeout := w.Plan()
	cut := false
	if wait {
		timeout, cut = WithinDeadline(ctx, timeout)
	}
	var conn goredis.Cmdable = c
	if cc, ok := c.(*goredis.ClusterClient); ok && wait {
		// WAIT counts the writes of its own connection: it must go to the
		// node that ran cmds, which a keyless command in a Cluster
		// pipeline is not sure to.
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			w.Done(false, 0)
			return err
		}
		conn = node
	}
	pipe := conn.Pipeline()
	for _, cmd := range cmds {
		_ = pipe.Process(ctx, cmd)
	}
	var waitCmd *goredis.IntCmd
	if wait {
		// WAIT's timeout is in ms, and 0 would block for good.
		waitCmd = goredis.NewIntCmd(ctx, "wait", w.r.Acks, max(timeout.Milliseconds(), 1))
		_ = pipe.Process(ctx, waitCmd)
	}
	_, _ = pipe.Exec(ctx) // each command's error is its own
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			if wait {
				w.Done(false, 0)
			}
			return err
		}
	}
	if !wait {
		return nil
	}
	n, err := waitCmd.Result()
	if err != nil {
		w.Done(false, 0)
		return fmt.Errorf("WAIT for replicas: %w", err)
	}
	// A wait the caller's deadline cut well short judges the replicas only
	// when they did acknowledge: not acknowledging within a fraction of
	// replica_ack_timeout is not being behind. One cut by little (the
	// operation timeout barely above replica_ack_timeout) judges as a
	// whole one would.
	w.Done(!cut || int(n) >= w.r.Acks || 4*timeout >= 3*w.r.Timeout, int(n))
	return nil
}

// ErrWaitRefused is the cause when the server refuses WAIT to this account
// (an ACL rule without +wait): replica_acks cannot work, so the store is
// not opened rather than failing every write later.
var ErrWaitRefused = errors.New("the Redis account may not run WAIT, which replica_acks needs (add +wait to its ACL rule)")

// CheckWait asks the master that serves key for WAIT 0 (answered at once)
// and returns ErrWaitRefused when the account may not run it.
func CheckWait(ctx context.Context, c goredis.UniversalClient, key string) error {
	var conn interface {
		Do(ctx context.Context, args ...any) *goredis.Cmd
	} = c
	if cc, ok := c.(*goredis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		conn = node
	}
	err := conn.Do(ctx, "wait", 0, 1).Err()
	if goredis.HasErrorPrefix(err, "NOPERM") {
		return fmt.Errorf("%w: %w", ErrWaitRefused, err)
	}
	return err
}

// deadlineReserve bounds the part of a caller's remaining time that a
// write keeps for its own round trip and script (WithinDeadline): a
// quarter of what is left, at most this.
const deadlineReserve = 50 * time.Millisecond

// serverTick is how late Redis may answer a WAIT that timed out: it checks
// blocked clients' timeouts on its cron tick, every 1000/hz ms — 100 ms at
// the default hz 10 (measured on Redis 7.0 with no replica acknowledging:
// WAIT 10 answered after 98 ms, WAIT 150 after 200 ms, WAIT 300 after
// 395 ms). Acknowledgements end a WAIT at once; only a timeout is late.
const serverTick = 100 * time.Millisecond

// WithinDeadline returns how long WAIT may block for a write under ctx:
// timeout, or less when ctx's deadline comes first — what is left of it
// less a reserve for the round trip (a quarter, at most deadlineReserve)
// and for Redis answering a timed-out WAIT late (serverTick), in whole
// milliseconds and at least one (WAIT 0 would block for good). cut reports
// that it is less than timeout. With less than ~150 ms left a WAIT whose
// replicas do not answer can still outlast the deadline (the call then
// fails with an unknown outcome); while they acknowledge, a short WAIT
// ends as soon as they have.
func WithinDeadline(ctx context.Context, timeout time.Duration) (wait time.Duration, cut bool) {
	dl, has := ctx.Deadline()
	if !has {
		return timeout, false
	}
	left := time.Until(dl)
	left -= min(left/4, deadlineReserve) + serverTick
	if left >= timeout {
		return timeout, false
	}
	return max(left.Truncate(time.Millisecond), time.Millisecond), true
}
