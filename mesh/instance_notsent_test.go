package mesh

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router/transport"
)

// A cold activation that never left the sender (a not-sent transport error:
// here the link to the chosen node not admitted, its last session having
// ended with a cause matching context.DeadlineExceeded) is tried on another
// node within the caller's deadline, for a request as for a one-way
// message — the caller's deadline is still far away. The request's error
// was flattened into ErrDeadlineExceeded (any error matching
// context.DeadlineExceeded), which notTaken does not count as "not taken":
// the call failed at once with a deadline that had not passed, while a
// node with room offered the type. requestFailure makes the same
// distinction for a direct request.
func TestActivationNotSentIsTriedElsewhere(t *testing.T) {
	c := newCluster(t, 3, clientRole0) // node 0 a client, two servers
	ctx := ctxT(t, 60*time.Second)
	for _, request := range []bool{true, false} {
		id := fmt.Sprintf("not-sent-%v", request)
		var refused atomic.Int32
		c.nodes[0].obj.hooks.Store(&testHooks{activationSend: func(got string) error {
			if got != id || refused.Add(1) > 1 {
				return nil
			}
			return fmt.Errorf("%w: the chosen node (%w)", transport.ErrNotAdmitted, context.DeadlineExceeded)
		}})
		var err error
		if request {
			_, err = c.m(0).RequestInstance(ctx, id, []byte("whoami"))
		} else {
			err = c.m(0).SendInstance(ctx, id, []byte("hello"))
		}
		if err != nil {
			t.Fatalf("request %v: activation of %s (not sent to its first node; the other has room): %v", request, id, err)
		}
		if n := refused.Load(); n < 2 {
			t.Fatalf("request %v: %d activation sends, want the refused one and another", request, n)
		}
	}
}
