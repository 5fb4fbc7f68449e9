// Package query is the operational object query of spec §7.4: look up where
// one Actor or Spot is (Locate, by ActorId or SpotId) and read the
// authority records of one object kind as pages (List). It is for operators
// and tools ("meshnode ctl locate", "meshnode ctl list"): its answers are a
// status view, never a message target list or a placement input, and
// nothing here is cached — Missing, Creating and store errors are answered
// afresh on every call (§7.4 last bullet).
//
// Both read the Location Store only (authority rows and owner leases) and
// write nothing, except List's rare kept continuation state (kept.go). Every answer is one of the §7.4 states:
//
//	stored state                      Locate                 List
//	no record                         found == false         no entry
//	Reserved (creating)               StateCreating entry    StateCreating entry
//	Active, owner lease valid         StateReady entry       StateReady entry
//	Active, owner lease gone          StateUnavailable entry StateUnavailable entry
//	store query failure               ErrUnavailable error   ErrUnavailable error, no entries
//
// "Owner lease gone" means the owner-lease record named by the authority's
// ownerId is missing, expired by the store's clock, unreadable, or of
// another LeaseGeneration than the authority's ownerLeaseGeneration. The
// lease is read directly by OwnerId (§3.1), once per distinct owner per
// call.
//
// List pages come from one Location Store snapshot scan of the "authority:"
// key prefix, so a cycle (first page to the page whose Next is empty) sees
// every row as it was when the first page was read, each key once: no ID is
// returned twice, and a change completed during the cycle shows up in the
// next cycle (§6.2, §7.4). Every page holds 1..Limit entries (only a
// listing in which nothing matches is one empty page), and its continuation
// token is at most 4,096 bytes (§12): it wraps the store's scan cursor, or
// names state kept in the store when that does not fit. See "Paging,
// snapshots and continuations" in docs/OPERATIONS.md for the format,
// bounds and expiry rules.
//
// The store key of an authority row is a SHA-256 digest (docs/RECORDS.md
// §1.3), so List takes each entry's ID from the record's objectId member
// and checks that the row really is stored under that Id's key; a row that
// is not (copied or misfiled) is skipped like an undecodable one.
package query
