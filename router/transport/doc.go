// Package transport is meshnode's ZeroMQ transport: it moves service
// records (package router's codec) between nodes of one mesh and nothing
// else — it does not interpret owners, objects or generations beyond the
// admission fields it must compare.
//
// Each Node binds one ROUTER at its endpoint and keeps, per peer it talks
// to, one DEALER whose ZMTP identity is the node's RoutingId. Every record a
// node originates towards a peer travels on that DEALER, so records from A
// to B share one TCP connection and arrive in the order A sent them; a
// record received on the ROUTER is answered on the ROUTER, to the sender's
// identity. A connection is usable only after admission (hello → admit |
// reject, comparing mesh name and security identity and refusing stale
// lifecycle generations), stays usable while liveness probes are answered
// (probe every 5 s, down after 15 s without the ack), and requests are
// correlated by a node-wide nonzero u64 with per-request deadlines. A
// request can be sent now and waited for later (Start, Call.Wait), and a
// portable request or reply slot accepts its reply from whichever admitted
// peer ends up answering it (an object that moved, spec §7.3).
//
// The sockets are built on github.com/go-zeromq/zmq4's ZMTP connection
// (handshake and framing) with this package's own accept loop, per-connection
// bounded queues and writer goroutines, and a framing guard, because the
// stock zmq4 ROUTER/DEALER deadlock, stall or crash the process in ways
// documented (with reproductions in zmq4bugs_test.go) in docs/TRANSPORT.md.
package transport
