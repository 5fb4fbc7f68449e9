package transport

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
)

// A peer that closes its connection with one-way messages unread — a node
// stopping (§11), whose transport closes last — leaves the sender with
// messages its kernel never acknowledged. They are kept for the peer run's
// return, which is not a loss yet: that is logged at INFO. Only when they
// are dropped (the run did not return within KeepUnsent, or a restarted
// run came) are they lost, and that line is the WARN, counted in
// Stats.Unsent. Before, the keeping itself was a WARN ("the peer closed the
// connection before acknowledging one-way messages; they are kept for its
// return"), which every step of a rolling restart logged for a run that
// would never return, followed by the WARN of their loss.
func TestPeerClosingWithUnacknowledgedMessagesWarnsOnlyOfTheirLoss(t *testing.T) {
	var logs syncbuf.Buffer
	a, fake, release := stalledLink(t, queueBounds[0], func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.KeepUnsent = 300 * time.Millisecond
	})
	fillQueue(t, a, fake.rid, queueBounds[0].size)

	// The peer closes its connection with what the sender wrote unread in
	// its socket: its kernel resets the connection.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		fake.rt.close()
	}()
	waitFor(t, 10*time.Second, "the sender to keep what the peer never acknowledged", func() bool {
		return strings.Contains(logs.String(), `msg="transport: the peer closed the connection before acknowledging one-way messages; they are kept for its return"`)
	})
	release()
	<-closed

	text := logs.String()
	m := regexp.MustCompile(`level=(\w+) msg="transport: the peer closed the connection before acknowledging one-way messages; they are kept for its return".* kept=(\d+)`).FindStringSubmatch(text)
	if m == nil || m[2] == "0" {
		t.Fatalf("no line keeping unacknowledged messages:\n%s", text)
	}
	if m[1] != "INFO" {
		t.Errorf("keeping messages for the peer's return logged at %s, want INFO (nothing is lost yet):\n%s", m[1], text)
	}

	// The run does not return: now they are lost, and that is the WARN.
	waitFor(t, 10*time.Second, "the kept messages to be dropped", func() bool { return a.Stats().Unsent > 0 })
	u := a.Stats().Unsent
	text = logs.String()
	if !strings.Contains(text, `level=WARN msg="transport: one-way messages kept for a peer dropped (lost)"`) ||
		!strings.Contains(text, fmt.Sprintf(`peer=%s peer_gen=%d count=%d why="it did not come back in time"`, fake.rid, fake.gen, u)) {
		t.Errorf("no WARN of the loss of %d:\n%s", u, text)
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "kept for its return") {
			t.Errorf("a WARN for messages kept, not lost: %s", line)
		}
	}
}
