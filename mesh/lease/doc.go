// Package lease holds the owner lease of one host process run and the local
// admission deadline derived from it (spec §3.1, §5, §10, §11).
//
// A host run is identified by (OwnerId, LeaseGeneration). Acquire creates a
// fresh random OwnerId, issues the next LeaseGeneration from the store-wide
// counter (the range rule lives in package mesh/gen) and writes the
// owner-lease record (format: package mesh/record) with the TTL as its
// retention, all in one conditional Location Store batch. The Manager then
// rewrites the same record under its last version every renew interval.
//
// Every successful store answer refreshes the local admission deadline:
//
//	deadline = t0 + (ExpiresAt - StoreNow - fencingMargin)
//
// where t0 is the local monotonic reading taken just before the request was
// sent (see AdmissionDeadline for why t0 and not the arrival time). The Gate
// compares the monotonic Clock against that deadline on every Admit call, so
// new work is refused from the deadline on even if no timer or renew runs.
//
// Failure behaviour:
//   - renew timeout or store error: the deadline is not extended; the next
//     tick first re-reads the record (the write may have applied, §10) —
//     except after a write the store refused outright
//     (locstore.ErrWriteRefused), which wrote nothing;
//   - renew Conflict: the record is read at once; this run's record at
//     another version was renewed by an earlier write whose answer was lost;
//   - the record missing or holding another (OwnerId, LeaseGeneration): the
//     lease is lost (ErrLeaseLost, EventLost; missing while still valid by
//     the store's clock is locstore.ErrDataLost). With Config.Reacquire the
//     Manager then acquires a new LeaseGeneration for the same OwnerId
//     (EventReacquired), the gate staying shut until Resume; a data loss or
//     Fail ends the lease for good;
//   - Release (§11) closes the gate, then deletes the record under its
//     version, exactly once.
//
// The pure parts (Timing.Validate, AdmissionDeadline, WriteExpiry, and
// gen.Next) do no I/O and take no clock; the Manager is the I/O around them,
// with time injected through Clock (package leasetest has a manual one).
// See docs/LEASE.md for a worked example.
package lease
