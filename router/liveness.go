package router

// LivenessProbe (command 5) asks the peer to echo ProbeID. A node sends one
// every 5 s on an admitted connection and keeps at most one outstanding.
type LivenessProbe struct {
	ProbeID uint64 // nonzero, connection-local
}

// LivenessAck (command 6) echoes a probe's id exactly.
type LivenessAck struct {
	ProbeID uint64 // nonzero
}

// Command implements Body.
func (*LivenessProbe) Command() Command { return CmdLivenessProbe }

// Command implements Body.
func (*LivenessAck) Command() Command { return CmdLivenessAck }

func (b *LivenessProbe) code(c *codec) { c.nz64("probeId", &b.ProbeID) }
func (b *LivenessAck) code(c *codec)   { c.nz64("probeId", &b.ProbeID) }
