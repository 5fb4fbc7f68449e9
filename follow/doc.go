// Package follow holds the two routing memories a node keeps between Location
// Store reads (spec §7.3): the route cache of Ready locations a sender uses to
// address messages without reading the store every time, and the Message
// Follow table a previous owner uses to pass on messages that arrive right
// after the object moved away.
//
// Both are pure data structures: no sockets, no store, no goroutines, no
// timers. Time comes from an injected monotonic Clock, and every deadline is
// a reading of that Clock, so the caller (package mesh) must use the same
// Clock it computes owner admission deadlines with.
//
// # Route cache
//
// A Cache entry is a Ready location (type Ready): object key, ObjectGeneration,
// AuthorityOwnerGeneration, opaque StoreVersion, the owner lease (OwnerId,
// LeaseGeneration), the owner's admission deadline as known to the sender,
// and the route (node RID, node run generation, endpoint). Only Ready results
// can be cached because Put accepts nothing else: there is no state field, so
// a Missing, Creating or failed read has no way in (spec §7.3, §7.4, §12). An
// entry lives until min(insert + RouteCacheMaxAge, owner admission deadline)
// and is dropped earlier when a newer authority is observed (Observe), when
// its owner's lease ends (DropOwner), on command 50 messageFollow naming
// exactly that route (DropRoute), or on a delivery failure (Drop). RouteCacheMaxAge 0 disables the cache. The cache
// is bounded (least recently used entries are evicted) and sharded for
// concurrent readers.
//
// # Message Follow table
//
// A Table maps an object that moved away from this node to the source→target
// information recorded when the move completed. For MessageFollowDuration
// after that, Forward tells the caller where to send a message that still
// arrives here and which hop count to put on it. Forwarding is bounded two
// ways: at most MaxHops hops, and the authority owner generation a forwarded
// message is addressed with must strictly increase at every hop, which makes
// a cycle impossible to follow (see Table.Forward). The table never re-reads
// the store; the caller keeps operation ID, ObjectGeneration, payload and
// reply route unchanged when it forwards.
//
// See docs/FOLLOW.md for the rules with examples and the known limits.
package follow
