package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// Close fails pending requests with ErrPeerDown wrapping ErrClosed, a
// portable one too. Before, a portable request (its failure put off by
// PortableGrace when its session ended) got the reply-slot error, which
// does not match ErrPeerDown.
func TestPortableRequestOnCloseIsPeerDown(t *testing.T) {
	cfgB := testConfig("b", 1)
	hold := make(chan struct{})
	cfgB.Handler = func(ctx context.Context, _ PeerInfo, _ *router.Record, _ func(*router.Record) error) {
		select {
		case <-hold:
		case <-ctx.Done():
		}
	}
	b := startNode(t, cfgB)
	defer close(hold)
	a, err := New(testConfig("a", 1))
	if err != nil {
		t.Fatal(err)
	}
	connectAndWait(t, a, b)
	for _, portable := range []bool{false, true} {
		var opts []CallOption
		if portable {
			opts = append(opts, Portable())
		}
		c, err := a.Start(context.Background(), b.RID(), spotRequest(b.RID(), 1, nil), opts...)
		if err != nil {
			t.Fatal(err)
		}
		if !portable {
			defer func(c *Call) {
				_, err := c.Wait(context.Background())
				if !errIs(err, ErrPeerDown, ErrClosed) {
					t.Errorf("plain request after Close: %v", err)
				}
			}(c)
			continue
		}
		time.Sleep(50 * time.Millisecond)
		_ = a.Close()
		_, err = c.Wait(context.Background())
		if !errIs(err, ErrPeerDown, ErrClosed) {
			t.Fatalf("portable request pending at Close failed with %q: errors.Is(ErrPeerDown)=%v, want ErrPeerDown wrapping ErrClosed",
				err, errors.Is(err, ErrPeerDown))
		}
	}
}
