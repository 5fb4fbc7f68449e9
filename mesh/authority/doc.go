// Package authority plans the changes of an Actor's or Spot's authority
// record (spec §6.1: Reserve, Commit, Abort, Preserve, NewOwner, Delete) and
// of the per-node capacity counters that go with them (§3.3, §4), each as
// one conditional all-or-nothing Location Store batch. The relocation of one
// Actor or Spot (§8) adds a capacity reservation keyed by its Reservation
// ID (SecureCapacity, ReleaseCapacity) and the stage changes of the
// authority row's relocation progress (RecordCaptured, RecordPrepared, the
// relocation form of NewOwner, CompleteRelocation).
//
// The planners are pure: they take what the framework read (a Snapshot of
// the authority row, the store-wide ObjectGeneration counter, owner leases
// and capacity counter rows, each with the version it was read at) plus the
// operation's parameters, and return a Plan holding the locstore.WriteRequest
// and the records it will leave behind — or a typed error decided before the
// store is called. Every row a plan changes or relies on is conditioned on
// the version it was read at (IfVersion) or on its absence (IfMissing), so a
// plan either applies exactly as planned or not at all. That is what keeps
// capacity from ever being exceeded and an object from being created twice
// under concurrency: two plans made from the same read cannot both apply.
//
// The Executor is the thin I/O around the planners: read, plan, write, and
// on a Conflict or a lost result re-read and decide again (§10). Its methods
// (executor.go, reads.go, sweep.go, …) and ReadCounters (a placement's read
// of capacity counters) are the only code of the package that talks to a
// store.
//
// Capacity is counted per MeshNode run (mesh name, RoutingId and descriptor
// lifecycleGeneration) in project-specific counter records, and an Actor or
// Spot creation's final result (§7 "stored final result") is a
// creation-operation-terminal-v1 record written in the same batch as the
// Commit or Abort that decides it. docs/AUTHORITY.md pins every batch,
// key and value byte for byte.
//
// Errors form one closed vocabulary matched with errors.Is: ErrConflict
// (and its refinements ErrNotFound, ErrStaleGeneration, ErrTypeMismatch,
// which also match ErrConflict), ErrCapacityExhausted,
// ErrGenerationExhausted (the same value as gen.ErrGenerationExhausted),
// ErrInvalidOperation and ErrCorruptRecord. Every error the planners return
// is an *Error carrying the deciding row where there is one.
package authority
