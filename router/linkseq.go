package router

// LinkSequence (command 56, project layout) numbers the one-way application
// messages (21 spotSend, 24 actorSend) that follow it on a connection: the
// next one is message Next of the sending node's link to this peer, and each
// one after it the next number, until the next LinkSequence. A link sends it
// at the start of every connection and wherever its numbers skip (messages
// kept for a peer dropped, requests between them are not numbered), and only
// to a peer whose admission lists CapabilityLinkSequence.
//
// Why: a link that gives a connection up sends again, on its next
// connection to the same peer run, the one-way messages the peer's kernel
// had not acknowledged; which of those the peer had read anyway cannot be
// told from the sender's side in every case (docs/TRANSPORT.md, "A receiver
// stuck for several peer timeouts"). With the numbers the receiver delivers
// each message once: one it already delivered from the peer run is dropped.
//
// Run names the sending process (a random nonzero value it draws at start):
// the receiver keeps what it delivered per peer run, and a process that
// came back with the lifecycle generation of an earlier one (a store that
// lost its data hands generations out again) numbers from the start — its
// messages must not be taken for copies of the earlier process's.
type LinkSequence struct {
	Next uint64 // nonzero
	Run  uint64 // nonzero
}

// Command implements Body.
func (*LinkSequence) Command() Command { return CmdLinkSequence }

func (b *LinkSequence) code(c *codec) {
	c.nz64("next", &b.Next)
	c.nz64("run", &b.Run)
}
