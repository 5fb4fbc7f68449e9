package redis

import (
	"context"
	"fmt"
	"strings"
)

// CheckDurability reads the server settings the Location Store's
// guarantees rest on and returns a warning for each one not met
// (docs/store-redis.md "Settings the guarantees need"):
//
//   - maxmemory-policy must be noeviction: an evicted owner-lease,
//     authority or counter key is data loss (a counter starting again
//     reissues generations, §3.2);
//   - persistence (appendonly yes, or RDB save rules) must be on: a
//     restart without it empties the namespace.
//
// An error means the settings could not be read (CONFIG may be disabled or
// denied by an ACL, as on many managed services); it is no evidence either
// way.
func (s *Store) CheckDurability(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	get := func(name string) (string, error) {
		m, err := s.client.ConfigGet(ctx, name).Result()
		if err != nil {
			return "", fmt.Errorf("CONFIG GET %s: %w", name, err)
		}
		return m[name], nil
	}
	var warns []string
	policy, err := get("maxmemory-policy")
	if err != nil {
		return nil, err
	}
	if policy != "noeviction" {
		warns = append(warns, fmt.Sprintf("Redis maxmemory-policy is %q, not \"noeviction\": under memory pressure Redis may evict owner leases, authority records or generation counters — data loss that meshnode can only detect after the fact", policy))
	}
	aof, err := get("appendonly")
	if err != nil {
		return nil, err
	}
	save, err := get("save")
	if err != nil {
		return nil, err
	}
	if aof != "yes" && strings.TrimSpace(save) == "" {
		warns = append(warns, "Redis persistence is off (appendonly no, no save rules): a Redis restart empties the namespace, and generations would start again from 1")
	}
	return warns, nil
}
