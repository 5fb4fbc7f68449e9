package stores

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
)

func TestOpenByName(t *testing.T) {
	ctx := context.Background()
	log := slog.Default()
	addr := testredis.Addr(t)
	redisCfg := func(ns string) config.StoreConfig {
		c := config.StoreConfig{Provider: "redis"}
		c.Redis.Addrs = []string{addr}
		c.Redis.Namespace = ns
		return c
	}
	ns := testredis.Namespace(t)
	tests := []struct {
		name    string
		cfg     config.StoreConfig
		wantNil bool
		wantErr error
	}{
		{"none configured opens nothing", config.StoreConfig{}, true, nil},
		{"memory", config.StoreConfig{Provider: "memory"}, false, nil},
		{"redis", redisCfg(ns), false, nil},
		{"unknown", config.StoreConfig{Provider: "etcd"}, true, ErrUnknownProvider},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ls, err := OpenLocation(ctx, tc.cfg, log)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("OpenLocation err = %v, want %v", err, tc.wantErr)
			}
			if (ls == nil) != tc.wantNil {
				t.Fatalf("OpenLocation store nil = %v, want %v", ls == nil, tc.wantNil)
			}
			if ls != nil {
				defer ls.Close()
				res, err := ls.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("k", []byte("v"))}})
				if err != nil || !res.Applied {
					t.Fatalf("write through opened store: %+v %v", res, err)
				}
			}
			rs, err := OpenRelocation(ctx, tc.cfg, log)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("OpenRelocation err = %v, want %v", err, tc.wantErr)
			}
			if (rs == nil) != tc.wantNil {
				t.Fatalf("OpenRelocation store nil = %v, want %v", rs == nil, tc.wantNil)
			}
			if rs != nil {
				defer rs.Close()
				if _, err := rs.Put(ctx, "ref", []byte("payload"), 0); err != nil {
					t.Fatalf("put through opened store: %v", err)
				}
			}
		})
	}
	if err := RegisterLocation("memory", nil); err == nil {
		t.Fatal("duplicate registration accepted")
	}
}
