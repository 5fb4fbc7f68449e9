package mesh

import "context"

// crashLease stops the lease renewing without releasing the record, as a
// killed process would.
func (n *Node) crashLease() { n.lease.Close() }

// crash stops everything without the §11 shutdown steps.
//
// The objects stop last, without waiting for anything (a context ended on
// entry), as in a killed process: with the transport and lease gone they
// can only fail. Left running, their retry loops (a reservation return, an
// Instance Spot's end of use, each answered "owner lease released") went
// on warning for the rest of the test binary, every crashed node of every
// test, and loaded the machine the later tests ran on.
func (n *Node) crash() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.stopNode()
	n.wg.Wait()
	n.lease.Close()
	_ = n.tr.Close()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	n.obj.stopWithin(ended)
	close(n.done)
}
