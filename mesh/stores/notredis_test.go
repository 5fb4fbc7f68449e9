package stores

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	relredis "github.com/meshnode/meshnode/relocstore/redis"
)

// TestOpenAtAnotherService: a store address that is a node's mesh port or
// an HTTP listener fails the open with ErrNotRedis (ErrMeshPort for the
// mesh port, which only times out at the protocol level) and names the key
// to check, not a bare "i/o timeout" or parse error.
func TestOpenAtAnotherService(t *testing.T) {
	web := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(web.Close)
	mesh := testredis.FakePort(t, testredis.ZMTPGreeting)
	for _, tc := range []struct {
		name, addr string
		want       error
		wantText   string
	}{
		{"mesh port", mesh, locredis.ErrMeshPort, mesh + " is a meshnode mesh port"},
		{"HTTP listener", strings.TrimPrefix(web.URL, "http://"), locredis.ErrNotRedis, "does not speak the Redis protocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, _ := newLog(t)
			loc, rel := redisStores(t, tc.addr)
			loc.Redis.OperationTimeout, rel.Redis.OperationTimeout = 300*time.Millisecond, 300*time.Millisecond
			locErr, relErr := openBoth(t, loc, rel, log)
			for _, c := range []struct {
				err    error
				prefix string
			}{{locErr, "location_store"}, {relErr, "relocation_store"}} {
				if !errors.Is(c.err, tc.want) || !errors.Is(c.err, relredis.ErrNotRedis) {
					t.Fatalf("open %s: err = %v, want %v", c.prefix, c.err, tc.want)
				}
				msg := c.err.Error()
				for _, part := range []string{tc.wantText, "check " + c.prefix + ".redis.addrs"} {
					if !strings.Contains(msg, part) {
						t.Errorf("open %s: error %q does not contain %q", c.prefix, msg, part)
					}
				}
			}
		})
	}
}
