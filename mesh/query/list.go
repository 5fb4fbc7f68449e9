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

// Validate reports what List would refuse before it asks the store: a
// bad kind, stable type, mesh or limit (ErrInvalidArgument), or a
// continuation this request did not issue (ErrInvalidContinuation). A tool
// checks it before it opens a store, so that a bad request is not hidden
// behind a store that cannot be reached ("meshnode ctl list").
func (q ListRequest) Validate() error {
	if err := q.validate(); err != nil {
		return err
	}
	if q.Continuation != "" {
		if _, err := parseToken(q.Continuation, fingerprint(q)); err != nil {
			return err
		}
	}
	return nil
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
// Bounds: at least one and at most req.Limit entries, at most MaxPageBytes
// encoded, and a Next of at most MaxContinuationBytes. The store is asked
// for only as many rows as surely fit (by the worst-case entry size), so a
// row that might cross the byte bound is never read into this page: it
// begins the next one. A page can therefore end up to one worst-case entry
// (a few KiB) short of 4 MiB. A full page gets a Next only if a later row
// of the snapshot matches (see lookAhead), so no page is empty except the
// single page of a cycle in which nothing matches at all. What does not fit
// in a token — a store cursor longer than maxInlineCursor, or rows of a
// snapshot the store has released — is kept in the store (kept.go): the
// only writes List makes.
//
// Errors: ErrInvalidArgument (bad request), ErrInvalidContinuation (a token
// this request did not issue), ErrUnavailable (any store failure: the whole
// page fails, no entry is returned), ErrScanExpired (the snapshot or the
// kept state of a continuation is gone: restart the cycle). A first page — nothing of the
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
	log := r.log()
	if req.Continuation != "" {
		t, err := parseToken(req.Continuation, fp)
		if err != nil {
			return Page{}, err
		}
		what := fmt.Sprintf("list %s page %d", req.Kind, t.page)
		switch t.format {
		case tokenKeptRows:
			return r.fromKept(ctx, req, t, what, log)
		case tokenKeptCursor:
			c, err := r.recall(ctx, t.digest, what)
			if err != nil {
				return Page{}, err
			}
			t.cursor = string(c)
		}
		start = t
	} else {
		attempts = r.FirstPageAttempts
		if attempts == 0 {
			attempts = DefaultFirstPageAttempts
		}
	}
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
// until the page is full, may be full, or the snapshot is exhausted, then
// looks ahead for the next page's first row (lookAhead) and issues the
// continuation. expired reports a ScanExpired answer; the page is then
// discarded.
func (r Reader) fill(ctx context.Context, req ListRequest, start token, log *slog.Logger) (page Page, expired bool, err error) {
	b := r.newBuilder(req, start, log)
	cursor := start.cursor
	for {
		// Ask only for rows that surely fit (see room). When not even one
		// surely fits the page ends here and the next row begins the next
		// page.
		n := b.room(req.Limit)
		if n <= 0 {
			break
		}
		sp, err := r.Store.Scan(ctx, locstore.ScanRequest{Prefix: authorityPrefix, Limit: n, Cursor: cursor})
		if err != nil {
			if cursor != "" && cursor == start.cursor && errors.Is(err, locstore.ErrArgument) {
				return Page{}, false, fmt.Errorf("%w: the store refused its cursor: %w", ErrInvalidContinuation, err)
			}
			return Page{}, false, storeErr(b.what, err)
		}
		if sp.Expired {
			return Page{}, true, nil
		}
		if cursor == "" {
			// Millisecond precision, as the token carries it, so every page
			// of a cycle reports the same instant.
			b.page.SnapshotAt = time.UnixMilli(sp.StoreNow.UnixMilli()).UTC()
		}
		for _, it := range sp.Items {
			h, ok, err := rowOf(req, it)
			if err != nil {
				b.skip(it.Key, err)
				continue
			}
			if !ok {
				continue
			}
			if err := b.add(ctx, h); err != nil {
				return Page{}, false, err
			}
		}
		cursor = sp.Next
		if cursor == "" {
			break
		}
	}
	var held []heldRow
	if cursor != "" {
		if cursor, held, expired, err = r.lookAhead(ctx, req, cursor, b); err != nil || expired {
			return Page{}, expired, err
		}
	}
	next := token{fingerprint: start.fingerprint, snapshotAt: b.page.SnapshotAt, page: start.page + 1}
	if b.page.Next, err = r.continuation(ctx, next, cursor, held); err != nil {
		return Page{}, false, storeErr(b.what, err)
	}
	return b.page, false, nil
}

// lookAhead runs when a page is full but the snapshot is not exhausted, at
// cursor: it finds the next page's first row, because §7.4 pages hold
// 1..1000 entries and a continuation must never lead to an empty page.
// Its scan pages grow from one row, doubling up to maxLookAhead, so a dense
// listing pays one extra one-row read per page and a sparse one few round
// trips. It returns, for the continuation:
//
//   - no cursor and no rows: no later row of the snapshot matches, so this
//     page is the cycle's last;
//   - the cursor of the scan page holding the first later match: the next
//     page reads that scan page again (passing over the non-matching rows
//     before the match once more);
//   - held rows: the first later match is on the snapshot's last scan
//     page. The providers release a snapshot when they serve its last
//     page, so it cannot be read again: its matching rows are returned,
//     and kept for the next page (see kept.go).
//
// Undecodable rows of the scan pages it passes over for good are counted
// and logged on this page; those of a scan page the next page reads again
// are left to that page, so each is counted once per cycle.
func (r Reader) lookAhead(ctx context.Context, req ListRequest, cursor string, b *builder) (next string, held []heldRow, expired bool, err error) {
	type skipped struct {
		key string
		err error
	}
	for n := 1; cursor != ""; n = min(2*n, maxLookAhead) {
		sp, err := r.Store.Scan(ctx, locstore.ScanRequest{Prefix: authorityPrefix, Limit: n, Cursor: cursor})
		if err != nil {
			return "", nil, false, storeErr(b.what+": look ahead", err)
		}
		if sp.Expired {
			return "", nil, true, nil
		}
		var bad []skipped
		for _, it := range sp.Items {
			h, ok, err := rowOf(req, it)
			switch {
			case err != nil:
				bad = append(bad, skipped{it.Key, err})
			case ok:
				held = append(held, h)
			}
		}
		if len(held) > 0 && sp.Next != "" {
			return cursor, nil, false, nil
		}
		for _, s := range bad {
			b.skip(s.key, s.err)
		}
		cursor = sp.Next
	}
	return "", held, false, nil
}

// continuation issues the token t for what comes after this page: nothing
// (""), held rows, or a store cursor — inline when it fits in the token,
// kept in the store when it does not (MaxContinuationBytes).
func (r Reader) continuation(ctx context.Context, t token, cursor string, held []heldRow) (string, error) {
	var err error
	switch {
	case len(held) > 0:
		var v []byte
		if v, err = encodeRows(held); err != nil {
			return "", err
		}
		t.format = tokenKeptRows
		t.digest, err = r.keep(ctx, v)
	case cursor == "":
		return "", nil
	case len(cursor) <= maxInlineCursor:
		t.format, t.cursor = tokenCursor, cursor
	default:
		t.format = tokenKeptCursor
		t.digest, err = r.keep(ctx, []byte(cursor))
	}
	if err != nil {
		return "", err
	}
	return t.encode(), nil
}

// fromKept lists the next page of rows a previous page kept (tokenKeptRows).
// The snapshot is gone by then, so there is no scan and nothing to restart.
func (r Reader) fromKept(ctx context.Context, req ListRequest, t token, what string, log *slog.Logger) (Page, error) {
	v, err := r.recall(ctx, t.digest, what)
	if err != nil {
		return Page{}, err
	}
	rows, err := decodeRows(v)
	if err != nil || int64(t.next) >= int64(len(rows)) {
		return Page{}, fmt.Errorf("%w: %s: kept rows unusable (next %d of %d): %v", ErrInvalidContinuation, what, t.next, len(rows), err)
	}
	b := r.newBuilder(req, t, log)
	i := int(t.next)
	for ; i < len(rows) && b.room(req.Limit) > 0; i++ {
		if err := b.add(ctx, rows[i]); err != nil {
			return Page{}, err
		}
	}
	if i < len(rows) {
		t.page++
		t.next = uint32(i)
		b.page.Next = t.encode()
	}
	return b.page, nil
}

// builder collects one page's entries within its bounds and judges their
// states, reading each owner's lease once per page.
type builder struct {
	store  locstore.Store
	log    *slog.Logger
	what   string // "list <kind> page <n>", for errors
	page   Page
	used   int // bytes the entries take, separators included
	leases map[string]leaseView
}

func (r Reader) newBuilder(req ListRequest, start token, log *slog.Logger) *builder {
	return &builder{
		store: r.Store, log: log,
		what:   fmt.Sprintf("list %s page %d", req.Kind, start.page),
		page:   Page{Number: int(start.page), SnapshotAt: start.snapshotAt},
		leases: make(map[string]leaseView),
	}
}

// room is how many more rows surely fit: at most limit entries, and each
// costs at most maxEntryBytes plus a separator of entryBudget.
func (b *builder) room(limit int) int {
	return min(limit-len(b.page.Entries), (entryBudget-b.used)/(maxEntryBytes+1))
}

// add lists h, judging its state from its owner's lease.
func (b *builder) add(ctx context.Context, h heldRow) error {
	var lv leaseView
	if h.Active {
		owner := h.Entry.OwnerID
		var ok bool
		if lv, ok = b.leases[owner]; !ok {
			var err error
			if lv, err = readLease(ctx, b.store, owner); err != nil {
				return storeErr(b.what, err)
			}
			if lv.unreadable {
				b.log.Warn("owner lease record unreadable; its objects are listed as unavailable", "owner", owner)
			}
			b.leases[owner] = lv
		}
	}
	e := h.Entry
	e.State = stateOf(h.Active, e.OwnerLeaseGeneration, lv)
	b.used += e.EncodedSize() + 1
	b.page.Entries = append(b.page.Entries, e)
	return nil
}

// skip counts and logs an authority row the page passes over because it
// does not decode or is not stored under its own key.
func (b *builder) skip(key string, err error) {
	b.page.Undecodable++
	b.log.Warn("undecodable authority record skipped", "key", key, "err", err)
}

// rowOf reads a scanned row for req: ok when it matches the filters, err
// when it does not decode (see decodeRow).
func rowOf(req ListRequest, it locstore.Item) (h heldRow, ok bool, err error) {
	a, err := decodeRow(it)
	if err != nil || !req.matches(a) {
		return h, false, err
	}
	active := a.Allocation.State == record.AllocationActive
	return heldRow{Entry: entryOf(it.Key, a, leaseView{}), Active: active}, true, nil
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
