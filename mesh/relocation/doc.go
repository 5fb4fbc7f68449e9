// Package relocation holds the pure state machines of moving one Actor or
// Spot to another node (spec §1.3 steps 1–8, §8.2, §9.1, §9.2, §9.4, §10):
// the source side (secure capacity, capture, record Captured, stream the
// Restore, relay the ingress hold, cut over — or cancel and reopen) and the
// target side (register the temporary queue, check the authority record,
// assemble and verify, restore hidden, answer relay-ready, run the owner
// CAS on cutover or after the relay-ready grace, open dispatch — or remove
// what it prepared).
//
// The machines do no I/O and read no clock. The caller (package mesh) feeds
// them what happened (an Event) and performs the Actions they return, in
// order; each action's outcome comes back as the next event. This is the
// shape of mesh/authority (planners + executor) and mesh/directory: the
// spec's tables become table tests here, and the node-level code stays a
// thin shell.
//
// An event that does not belong to the current state changes nothing and is
// reported as ErrUnexpected: a late answer (a store result, a relay-ready,
// a cutover) never reopens or reactivates a move that has ended.
package relocation
