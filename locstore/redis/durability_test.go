package redis

import (
	"context"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/internal/testredis"
)

// CheckDurability names each setting the guarantees need that the server
// lacks, read from the real server's configuration.
func TestCheckDurability(t *testing.T) {
	ctx := context.Background()
	addr := testredis.Addr(t)
	s := openStore(t, addr, testredis.Namespace(t), nil)
	raw := rawClient(t, addr)
	saved := map[string]string{}
	for _, k := range []string{"maxmemory-policy", "appendonly", "save"} {
		v, err := raw.ConfigGet(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		saved[k] = v[k]
	}
	t.Cleanup(func() {
		for k, v := range saved {
			_ = raw.ConfigSet(context.Background(), k, v).Err()
		}
	})
	set := func(k, v string) {
		t.Helper()
		if err := raw.ConfigSet(ctx, k, v).Err(); err != nil {
			t.Fatalf("CONFIG SET %s %s: %v", k, v, err)
		}
	}
	for _, tc := range []struct {
		name            string
		policy, aof, sv string
		want            []string
	}{
		{"durable", "noeviction", "yes", "", nil},
		{"rdb only", "noeviction", "no", "3600 1", nil},
		{"evicting", "allkeys-lru", "yes", "", []string{`maxmemory-policy is "allkeys-lru"`}},
		{"no persistence", "noeviction", "no", "", []string{"persistence is off"}},
		{"neither", "volatile-ttl", "no", "", []string{`maxmemory-policy is "volatile-ttl"`, "persistence is off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set("maxmemory-policy", tc.policy)
			set("appendonly", tc.aof)
			set("save", tc.sv)
			warns, err := s.CheckDurability(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(warns) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", warns, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(warns[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, warns[i], w)
				}
			}
		})
	}
}
