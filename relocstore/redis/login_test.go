package redis_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/relocstore"
	relocredis "github.com/meshnode/meshnode/relocstore/redis"
)

// Redis starting to require a password while the store is open: each call
// fails with ErrAuth and what to do (before, only Redis's "NOAUTH
// Authentication required."), and the store works again once Redis
// accepts its login.
func TestLoginRefusedWhileOpenIsNamed(t *testing.T) {
	srv := testredis.NewServer(t)
	ctx := t.Context()
	s := newStore(t, relocredis.Options{Addrs: []string{srv.Addr}})
	if _, err := s.Put(ctx, "ref", []byte("payload"), time.Minute); err != nil {
		t.Fatal(err)
	}
	raw := rawClient(t, srv.Addr)
	if err := raw.ConfigSet(ctx, "requirepass", "now-required").Err(); err != nil {
		t.Fatal(err)
	}
	if err := raw.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Read(ctx, "ref")
	if !errors.Is(err, relocredis.ErrAuth) || !errors.Is(err, relocstore.ErrUnavailable) || !strings.Contains(err.Error(), "requirepass") {
		t.Fatalf("read while Redis refuses the login: %v; want ErrAuth saying what to do", err)
	}
	if err := raw.Do(ctx, "AUTH", "now-required").Err(); err != nil {
		t.Fatal(err)
	}
	if err := raw.ConfigSet(ctx, "requirepass", "").Err(); err != nil {
		t.Fatal(err)
	}
	if rr, err := s.Read(ctx, "ref"); err != nil || string(rr.Bytes) != "payload" {
		t.Fatalf("read once Redis accepts the login again: %+v, %v", rr, err)
	}
}
