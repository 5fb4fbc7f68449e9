package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/meshnode/meshnode/internal/ctxsleep"
	"github.com/meshnode/meshnode/mesh"
)

// demoInstances sends to Instance Spots that do not exist yet (spec §7.1):
// every node sends to every session id at once, one-way and requests
// mixed; the first message to reach a target creates the session there
// (cold activation) and runs first. It then shows where each session
// appeared and checks that each counted every message exactly once.
func demoInstances(ctx context.Context, nodes []*mesh.Node, w io.Writer) error {
	const sessions, perNode = 8, 3
	fmt.Fprintf(w, "\nInstance Spots: %d nodes each send %d messages to %d session ids that do not exist yet\n", len(nodes), perNode, sessions)
	before := make([]uint64, len(nodes))
	for i, n := range nodes {
		before[i] = n.ObjectStats().InstancesActivated
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, sessions*len(nodes)*perNode)
	for s := 0; s < sessions; s++ {
		id := fmt.Sprintf("session-%d", s+1)
		for i, n := range nodes {
			wg.Add(1)
			go func(m *mesh.Manager, i int) {
				defer wg.Done()
				for k := 0; k < perNode; k++ {
					var err error
					if (i+k)%2 == 0 {
						err = m.SendInstance(ctx, id, []byte("hello"))
					} else {
						_, err = m.RequestInstance(ctx, id, []byte("hello"))
					}
					if err != nil {
						errs <- fmt.Errorf("message to %s from node %d: %w", id, i+1, err)
						return
					}
				}
			}(n.Manager(), i)
		}
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	took := time.Since(start)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  session\tcreated on\tmessages counted")
	want := strconv.Itoa(len(nodes) * perNode)
	for s := 0; s < sessions; s++ {
		id := fmt.Sprintf("session-%d", s+1)
		var got []byte
		// One-way messages may still be on their way: ask until they are in
		// (a lost one would never arrive and fail the demo at its deadline).
		for {
			b, err := nodes[0].Manager().RequestInstance(ctx, id, []byte("count"))
			if err != nil {
				return fmt.Errorf("count of %s: %w", id, err)
			}
			if string(b) == want {
				got = b
				break
			}
			n, _ := strconv.Atoi(string(b))
			w, _ := strconv.Atoi(want)
			if n > w {
				return fmt.Errorf("%s counted %s messages, more than the %s sent: a message ran twice", id, b, want)
			}
			if err := ctxsleep.For(ctx, 20*time.Millisecond); err != nil {
				return fmt.Errorf("%s counted %s of %s messages: %w", id, b, want, err)
			}
		}
		host := "?"
		for i, n := range nodes {
			if n.HostsInstance(id) {
				host = "node " + strconv.Itoa(i+1)
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s of %d sent\n", id, host, got, len(nodes)*perNode)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var activated uint64
	for i, n := range nodes {
		activated += n.ObjectStats().InstancesActivated - before[i]
	}
	fmt.Fprintf(w, "  %d cold activations for %d sessions (one factory run each; racing targets delivered to the winner), %d messages in %s\n",
		activated, sessions, sessions*len(nodes)*perNode, took.Round(time.Millisecond))
	if activated != sessions {
		return fmt.Errorf("%d activations for %d sessions", activated, sessions)
	}
	return nil
}
