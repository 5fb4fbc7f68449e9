package redis

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
)

// Redis starting to require a password while the store is open (an
// operator sets requirepass on a running server): each call fails with
// ErrAuth and what to do, not only Redis's "NOAUTH Authentication
// required." or, for a script call of many arguments, "ERR Protocol error:
// unauthenticated multibulk length" (what a try-out's nodes logged); and
// the store works again once Redis accepts its login.
func TestLoginRefusedWhileOpenIsNamed(t *testing.T) {
	srv := testredis.NewServer(t)
	ctx := context.Background()
	s := openStore(t, srv.Addr, "login", nil)
	put(t, s, "a", "before")
	raw := rawClient(t, srv.Addr)
	if err := raw.ConfigSet(ctx, "requirepass", "now-required").Err(); err != nil {
		t.Fatal(err)
	}
	// Redis keeps connections that were open before; a restart or a
	// dropped connection meets the password.
	if err := raw.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrAuth) || !errors.Is(err, locstore.ErrUnavailable) || !strings.Contains(err.Error(), "requirepass") {
			t.Errorf("%s while Redis refuses the login: %v; want ErrAuth saying what to do", what, err)
		}
	}
	_, err := s.Read(ctx, "a")
	check("read", err)
	long := make([]locstore.Mutation, 8)
	for i := range long {
		long[i] = locstore.Put("k"+strings.Repeat("x", i), []byte("v"))
	}
	_, err = s.Write(ctx, locstore.WriteRequest{Mutations: long})
	check("write of 8 rows", err)
	if err := raw.Do(ctx, "AUTH", "now-required").Err(); err != nil {
		t.Fatal(err)
	}
	if err := raw.ConfigSet(ctx, "requirepass", "").Err(); err != nil {
		t.Fatal(err)
	}
	if rr, err := s.Read(ctx, "a"); err != nil || string(rr.Value) != "before" {
		t.Fatalf("read once Redis accepts the login again: %q, %v", rr.Value, err)
	}
}
