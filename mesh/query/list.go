package query

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// ListRequest asks for one page of authority rows of one object kind.
type ListRequest struct {
	// Kind is required: actor, userSpot or instanceSpot (§7.4: "a paged
	// list requires object kind as a filter").
	Kind record.ObjectKind
	// StableType, when not empty, keeps only rows of that stable type
	// (byte-exact).
	StableType string
	// MeshName, when not empty, keeps only rows placed in that mesh.
	MeshName string
	// Limit is the most entries the page may hold, 1..MaxLimit.
	Limit int
	// Continuation is empty for the first page of a cycle, else the Next of
	// the previous page of the same request (same Kind, StableType and
	// MeshName; Limit may change between pages).
	Continuation string
}

func (q ListRequest) validate() error {
	bad := func(err error) error { return fmt.Errorf("%w: list: %w", ErrInvalidArgument, err) }
	switch q.Kind {
	case record.ObjectActor, record.ObjectUserSpot, record.ObjectInstanceSpot:
	case "":
		return bad(errors.New("object kind is required (actor, userSpot or instanceSpot)"))
	default:
		return bad(fmt.Errorf("unknown object kind %q (want actor, userSpot or instanceSpot)", q.Kind))
	}
	if q.StableType != "" {
		if err := record.ValidateStableType(q.StableType); err != nil {
			return bad(err)
		}
	}
	if q.MeshName != "" {
		if err := record.ValidateMeshName(q.MeshName); err != nil {
			return bad(err)
		}
	}
	if q.Limit < 1 || q.Limit > MaxLimit {
		return bad(fmt.Errorf("limit %d outside 1..%d", q.Limit, MaxLimit))
	}
	return nil
}

func (q ListRequest) matches(a record.Authority) bool {
	return a.Allocation.ObjectKind == q.Kind &&
		(q.StableType == "" || a.Allocation.StableType == q.StableType) &&
		(q.MeshName == "" || a.Allocation.Descriptor.MeshName == q.MeshName)
}

// List returns one page of the authority rows matching req.
//
// A cycle is the pages from an empty Continuation to the first page whose
// Next is empty. All its pages come from one store snapshot scan of the
// authority key prefix (§6.2), which returns every key of the snapshot
// exactly once, in key order: no ID appears twice in a cycle, and a row
// created, changed or deleted after the first page is read shows up as it
// was in the snapshot (or not at all) until the next cycle. Filters are
// applied after decoding, because the key (a digest) reveals neither kind,
// type nor mesh; a row that does not decode, or is not stored under its own
// objectId's key, is skipped, counted in Page.Undecodable and logged, never
// fatal. The state of each Active row is judged from its owner's lease,
// read once per distinct owner per page, when the page is built.
//
// Bounds: at most req.Limit entries and at most MaxPageBytes encoded. The
// store is asked for only as many rows as surely fit (by the worst-case
// entry size), so a row that might cross the byte bound is never read into
// this page: it begins the next one. A page can therefore end up to one
// worst-case entry (a few KiB) short of 4 MiB, and a page may be empty
// (the last page of a cycle whose remaining rows do not match).
//
// Errors: ErrInvalidArgument (bad request), ErrInvalidContinuation (a token
// this request did not issue), ErrUnavailable (any store failure: the whole
// page fails, no entry is returned), ErrScanExpired (the snapshot of a
// continuation is gone: restart the cycle). A first page — nothing of the
// cycle handed out yet — whose snapshot expires while it is filled is
// restarted transparently, up to FirstPageAttempts times.
func (r Reader) List(ctx context.Context, req ListRequest) (Page, error) {
	if r.Store == nil {
		return Page{}, fmt.Errorf("%w: list: no Location Store", ErrInvalidArgument)
	}
	if err := req.validate(); err != nil {
		return Page{}, err
	}
	if r.FirstPageAttempts < 0 {
		return Page{}, fmt.Errorf("%w: list: FirstPageAttempts %d is negative", ErrInvalidArgument, r.FirstPageAttempts)
	}
	fp := fingerprint(req)
	start := token{fingerprint: fp, page: 1}
	attempts := 1
	if req.Continuation != "" {
		t, err := parseToken(req.Continuation, fp)
		if err != nil {
			return Page{}, err
		}
		start = t
	} else {
		attempts = r.FirstPageAttempts
		if attempts == 0 {
			attempts = DefaultFirstPageAttempts
		}
	}
	log := r.log()
	for attempt := 1; ; attempt++ {
		page, expired, err := r.fill(ctx, req, start, log)
		if err != nil {
			return Page{}, err
		}
		if !expired {
			return page, nil
		}
		if req.Continuation != "" {
			return Page{}, fmt.Errorf("list %s page %d: %w", req.Kind, start.page, ErrScanExpired)
		}
		if attempt >= attempts {
			return Page{}, fmt.Errorf("list %s: first page (%d attempts): %w", req.Kind, attempts, ErrScanExpired)
		}
		// Nothing of this cycle was handed out, so starting a new snapshot
		// cannot duplicate anything.
		log.Debug("listing snapshot expired while the first page was read; restarting", "kind", req.Kind, "attempt", attempt)
	}
}

// fill reads store pages from start.cursor (a new snapshot when empty)
// until the page is full, may be full, or the snapshot is exhausted.
// expired reports a ScanExpired answer; the page is then discarded.
func (r Reader) fill(ctx context.Context, req ListRequest, start token, log *slog.Logger) (page Page, expired bool, err error) {
	page = Page{Number: int(start.page), SnapshotAt: start.snapshotAt}
	cursor := start.cursor
	leases := make(map[string]leaseView) // per page: one read per owner
	used := 0
	for len(page.Entries) < req.Limit {
		// Ask only for rows that surely fit: each costs at most
		// maxEntryBytes plus a separator. When not even one surely fits the
		// page ends here and the next row begins the next page.
		n := min(req.Limit-len(page.Entries), (entryBudget-used)/(maxEntryBytes+1))
		if n <= 0 {
			break
		}
		sp, err := r.Store.Scan(ctx, locstore.ScanRequest{Prefix: authorityPrefix, Limit: n, Cursor: cursor})
		if err != nil {
			if cursor != "" && cursor == start.cursor && errors.Is(err, locstore.ErrArgument) {
				return Page{}, false, fmt.Errorf("%w: the store refused its cursor: %w", ErrInvalidContinuation, err)
			}
			return Page{}, false, storeErr(fmt.Sprintf("list %s page %d", req.Kind, page.Number), err)
		}
		if sp.Expired {
			return Page{}, true, nil
		}
		if cursor == "" {
			// Millisecond precision, as the token carries it, so every page
			// of a cycle reports the same instant.
			page.SnapshotAt = time.UnixMilli(sp.StoreNow.UnixMilli()).UTC()
		}
		for _, it := range sp.Items {
			a, err := decodeRow(it)
			if err != nil {
				page.Undecodable++
				log.Warn("undecodable authority record skipped", "key", it.Key, "err", err)
				continue
			}
			if !req.matches(a) {
				continue
			}
			var lv leaseView
			if a.Allocation.State == record.AllocationActive {
				var ok bool
				if lv, ok = leases[a.OwnerID]; !ok {
					if lv, err = readLease(ctx, r.Store, a.OwnerID); err != nil {
						return Page{}, false, storeErr(fmt.Sprintf("list %s page %d", req.Kind, page.Number), err)
					}
					if lv.unreadable {
						log.Warn("owner lease record unreadable; its objects are listed as unavailable", "owner", a.OwnerID)
					}
					leases[a.OwnerID] = lv
				}
			}
			e := entryOf(it.Key, a, lv)
			used += e.EncodedSize() + 1
			page.Entries = append(page.Entries, e)
		}
		cursor = sp.Next
		if cursor == "" {
			break
		}
	}
	if cursor != "" {
		page.Next = token{fingerprint: start.fingerprint, snapshotAt: page.SnapshotAt, page: start.page + 1, cursor: cursor}.encode()
	}
	return page, false, nil
}

// decodeRow decodes a scanned authority row and checks that it is stored
// under its own key (objectId and kind): a value copied to another key
// would otherwise be listed under an Id that is not where it claims.
func decodeRow(it locstore.Item) (record.Authority, error) {
	a, err := record.DecodeAuthority(it.Value)
	if err != nil {
		return a, err
	}
	key, err := a.Key()
	if err != nil {
		return a, err
	}
	if key != it.Key {
		return a, fmt.Errorf("record of %s %q is stored under key %s (its key is %s)", a.Allocation.ObjectKind.IdentityKind(), a.ObjectID, it.Key, key)
	}
	return a, nil
}
