package mesh

// crashLease stops the lease renewing without releasing the record, as a
// killed process would.
func (n *Node) crashLease() { n.lease.Close() }

// crash stops everything without the §11 shutdown steps.
func (n *Node) crash() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.stopNode()
	n.wg.Wait()
	n.lease.Close()
	_ = n.tr.Close()
	close(n.done)
}
