package mesh

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// A drain refused because a host command holds hostMove waits for it even
// when it cannot read the command's name: beginHostMove sets hostMove before
// hostCmd, and a refusal in between (or a command ending between the refusal
// and the look) read hostCmd nil. Before, awaitHostCommand took that for a
// refusal by the lease gate and returned at once, and the drain went on to
// the shutdown without holding hostMove — under the command still running.
func TestAwaitHostCommandWithoutItsName(t *testing.T) {
	n := &Node{obj: &objects{}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	n.obj.hostMove.Store(true) // set by beginHostMove; hostCmd not yet
	ended := make(chan time.Time, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		ended <- time.Now()
		n.obj.hostMove.Store(false)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !n.awaitHostCommand(ctx) {
		t.Fatal("awaitHostCommand did not wait for the command holding hostMove")
	}
	select {
	case <-ended:
	default:
		t.Fatal("awaitHostCommand returned while the command still held hostMove")
	}
}
