package query

import "errors"

// Sentinels, matched with errors.Is. Every error the package returns wraps
// exactly one of them (plus the cause, so that errors.Is also finds
// locstore.ErrUnavailable or context.Canceled where they apply).
var (
	// ErrInvalidArgument: the request itself is unusable (unknown kind, Id
	// or name out of the record rules, limit outside 1..MaxLimit, no store).
	// Nothing was read.
	ErrInvalidArgument = errors.New("query: invalid argument")
	// ErrUnavailable is the §7.4 "Unavailable Framework error": the
	// Location Store could not answer (a read, a scan page or an owner-lease
	// read failed). For List the whole page fails and no entry of it is
	// returned. The provider's error is wrapped too, so
	// errors.Is(err, locstore.ErrUnavailable) holds as well.
	ErrUnavailable = errors.New("query: location store unavailable")
	// ErrCorruptRecord: Locate found an authority row it cannot read (it
	// does not decode, has an unknown recordVersion, or is a spot's record
	// under an actor key or the reverse). List never returns it: it skips
	// and counts such rows (Page.Undecodable).
	ErrCorruptRecord = errors.New("query: stored authority record unreadable")
	// ErrInvalidContinuation: the continuation token is not one List issued
	// for this request: not base64url, the wrong length, a failed checksum,
	// an unknown format, or issued for another Kind/StableType/MeshName.
	// The caller restarts from the first page (empty Continuation).
	ErrInvalidContinuation = errors.New("query: invalid continuation token; restart from the first page")
	// ErrScanExpired: the store no longer has the snapshot the continuation
	// belongs to (it expired, was evicted or was released, or the cursor
	// belongs to another store namespace), or the continuation state List
	// kept in the store is gone or altered (KeptRetention). The
	// entries already returned stay valid for their snapshot; the caller
	// restarts from the first page to read a new cycle.
	ErrScanExpired = errors.New("query: the listing snapshot expired; restart from the first page")
)
