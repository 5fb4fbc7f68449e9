package testredis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Snapshot is a copy of every key under one prefix (DUMP and the time to
// live left), as a backup or a lagging replica holds them.
type Snapshot struct {
	prefix string
	keys   []dumpedKey
}

type dumpedKey struct {
	key, val string
	pttl     time.Duration
}

// TakeSnapshot copies every key of the Redis at addr whose name starts with
// prefix (a store namespace's "{ns}:").
func TakeSnapshot(t testing.TB, addr, prefix string) Snapshot {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	keys, err := c.Keys(ctx, escapeGlob(prefix)+"*").Result()
	if err != nil {
		t.Fatalf("testredis: KEYS %s*: %v", prefix, err)
	}
	s := Snapshot{prefix: prefix}
	for _, k := range keys {
		v, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("testredis: DUMP %s: %v", k, err)
		}
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatalf("testredis: PTTL %s: %v", k, err)
		}
		s.keys = append(s.keys, dumpedKey{k, v, max(ttl, 0)})
	}
	return s
}

// RollBack puts the prefix back as it was in s, in one MULTI/EXEC: what a
// failover to a replica that missed the writes since s (or a restore of an
// older backup) does to a running mesh.
func RollBack(t testing.TB, addr string, s Snapshot) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	keys, err := c.Keys(ctx, escapeGlob(s.prefix)+"*").Result()
	if err != nil {
		t.Fatalf("testredis: KEYS %s*: %v", s.prefix, err)
	}
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if len(keys) > 0 {
			p.Del(ctx, keys...)
		}
		for _, k := range s.keys {
			p.Restore(ctx, k.key, k.pttl, k.val)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testredis: roll back %s: %v", s.prefix, err)
	}
}

func escapeGlob(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(s)
}
