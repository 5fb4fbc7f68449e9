package directory

import (
	"context"
	"fmt"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// removedPrefix is the scan prefix of the removal records. It is not under
// descriptorPrefix: discovery rounds, which scan only that one (and read
// the change counter, the journal, the descriptors it names and owner
// leases), never meet a removal record.
var removedPrefix = record.KindPrefix(record.KindRemovedMeshNode)

// Removed is a removal record as ListRemoved read it: a host run whose
// descriptor one of its watchers removed, having found its owner lease
// ended while its links were up (ReclaimOptions.RemovedBy).
type Removed struct {
	record.RemovedMeshNode
	// Key is the removal record's store key; ExpiresAt when it goes
	// (RemovedRetention after the removal).
	Key       string
	ExpiresAt time.Time
}

// ListRemoved reads the removal records of meshName (every mesh when
// empty) in one scan of their prefix — what `meshnode ctl topology` adds to
// the list, so that a run removed by its watchers (paused past its lease
// TTL, or cut off from the store with its links up) shows as removed
// instead of missing. Discovery never calls it: its rounds cost the same
// with or without removal records. A value that does not decode, or not
// for its key, is skipped and logged. Which records still matter is for
// Rows to decide: one whose mesh and RoutingID have a descriptor again is
// not shown.
func (l Lister) ListRemoved(ctx context.Context, meshName string) ([]Removed, error) {
	if l.Store == nil {
		return nil, fmt.Errorf("%w: list removed: no Location Store", ErrInvalidArgument)
	}
	if err := validPageSize(l.PageSize); err != nil {
		return nil, err
	}
	attempts, log := l.defaults()
	items, err := scanSnapshot(ctx, l.Store, removedPrefix, l.PageSize, attempts)
	if err != nil {
		return nil, fmt.Errorf("directory: list removed: %w", err)
	}
	var out []Removed
	for _, it := range items {
		r, err := decodeRemoved(it)
		if err != nil {
			log.Warn("undecodable removal record skipped", "key", it.Key, "err", err)
			continue
		}
		if meshName != "" && r.Descriptor.MeshName != meshName {
			continue
		}
		out = append(out, Removed{RemovedMeshNode: r, Key: it.Key, ExpiresAt: it.ExpiresAt})
	}
	return out, nil
}

// decodeRemoved decodes a scanned removal record and checks that it
// belongs under its key.
func decodeRemoved(it locstore.Item) (record.RemovedMeshNode, error) {
	r, err := record.DecodeRemovedMeshNode(it.Value)
	if err != nil {
		return r, err
	}
	key, err := record.RemovedMeshNodeKey(r.Descriptor.MeshName, r.Descriptor.RoutingID)
	if err != nil {
		return r, err
	}
	if key != it.Key {
		return r, fmt.Errorf("removal record of mesh %q rid %x stored under key %s (its key is %s)",
			r.Descriptor.MeshName, r.Descriptor.RoutingID, it.Key, key)
	}
	return r, nil
}
