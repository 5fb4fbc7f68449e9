// Package directory is the Location Store side of MeshNode descriptors and
// automatic discovery (spec §4, §6.2, §10, §11): a host publishes its own
// descriptor, every host lists the descriptors of its mesh, and a pure
// planner turns complete lists into connection intents.
//
//   - Publisher writes one host run's descriptor: one conditional batch per
//     publish that is fenced on the host's owner lease, bumps the MeshNode
//     descriptor change counter, appends the descriptor's key to the
//     descriptor journal and puts the descriptor. It issues the descriptor
//     revisions, reports replays as Ignored, takes over a routing id whose
//     previous owner lease is gone and refuses one whose owner is alive or
//     reacquired its lease (ErrRoutingIDInUse).
//   - List reads every MeshNode descriptor as a same-point-in-time list: the
//     change counter before and after a paged scan must match. Each host's
//     owner lease is then read directly; a descriptor whose lease is gone is
//     returned with LeaseValid false and never used for connecting.
//   - Tracker is what a node's discovery rounds use instead: the same
//     complete list, reading only what may have changed since its last
//     round (the change counter; the journal's changed descriptors or the
//     whole list; a lease when new, its state changed or its known expiry
//     came, and with watching only by the run's watchers).
//   - Reclaim deletes descriptors whose owner lease has been gone for long,
//     or at once when they say `stopped`, so that the store does not grow
//     without bound; descriptors are otherwise durable and replaced by
//     takeover (spec §11: never by the owner sweep). ReclaimKey does the
//     same for one key: a stopping node's last step on its own descriptor.
//   - Planner (no I/O, injected monotonic time) keeps the last complete list
//     and the connection intents derived from it, and holds them unchanged
//     through a store failure (StoreFailureGrace, §10).
//   - Rows and RenderTable turn a Snapshot into the topology table printed
//     by "meshnode ctl topology".
//
// See docs/DISCOVERY.md for the batch layouts, the rules and their reasons.
package directory
