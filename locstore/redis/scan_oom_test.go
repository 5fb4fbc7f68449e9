package redis

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
)

// Under maxmemory (noeviction) Redis refuses writes, and reads go on
// (docs/store-redis.md). A Scan is a read of the SPI: it goes on too, one
// page or several, from a Store that scanned before and from a new one.
// Before, a Store that had not scanned yet (ctl list, a restarted node)
// could not scan at all — its first Scan ran SETNX {ns}:cursorkey, a
// deny-oom command Redis refuses even when the key exists — and a scan of
// more than one page could not register its snapshot; both failed as
// ErrWriteRefused.
func TestScanUnderMaxmemoryGoesOn(t *testing.T) {
	srv := testredis.NewServer(t)
	ctx := context.Background()
	raw := rawClient(t, srv.Addr)
	ns := "scanoom"
	s1 := openStore(t, srv.Addr, ns, nil)
	for i := range 5 {
		put(t, s1, fmt.Sprintf("k%d", i), "v")
	}
	if _, err := s1.Scan(ctx, locstore.ScanRequest{Limit: 100}); err != nil { // creates the cursor key
		t.Fatal(err)
	}
	if err := raw.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	defer raw.ConfigSet(ctx, "maxmemory", "0")
	if _, err := s1.Read(ctx, "k1"); err != nil {
		t.Fatalf("read under OOM: %v", err)
	}
	// A multi-page scan by the Store that already scanned.
	_, err1 := s1.Scan(ctx, locstore.ScanRequest{Limit: 2})
	// A fresh Store (ctl list, a restarted node): even a one-page scan.
	s2 := openStore(t, srv.Addr, ns, nil)
	_, err2 := s2.Scan(ctx, locstore.ScanRequest{Limit: 100})
	if err1 != nil || err2 != nil {
		t.Fatalf("scans under OOM fail although reads go on:\n multi-page: %v (ErrWriteRefused %v)\n fresh store one page: %v (ErrWriteRefused %v)",
			err1, errors.Is(err1, locstore.ErrWriteRefused), err2, errors.Is(err2, locstore.ErrWriteRefused))
	}
}
