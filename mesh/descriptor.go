package mesh

import (
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// factoryPolicies turns the registered factories into the form the
// configuration rules of §2 take (is a Relocation Store required?).
func factoryPolicies(fs []spot.Factory) []config.FactoryPolicy {
	out := make([]config.FactoryPolicy, 0, len(fs))
	for _, f := range fs {
		p := config.FactoryPolicy{StableType: f.StableType}
		switch f.Kind {
		case spot.KindActor:
			p.Kind = config.KindActor
		case spot.KindUserSpot:
			p.Kind = config.KindUserSpot
		case spot.KindInstanceSpot:
			p.Kind = config.KindInstanceSpot
		}
		switch f.Policy {
		case spot.PolicyRecreate:
			p.Policy = config.PolicyRecreate
		case spot.PolicyPreserveState:
			p.Policy = config.PolicyPreserveState
		default:
			p.Policy = config.PolicyDisable
		}
		out = append(out, p)
	}
	return out
}

func relocationPolicy(p spot.Policy) record.RelocationPolicy {
	switch p {
	case spot.PolicyDisabled:
		return record.PolicyDisabled
	case spot.PolicyRecreate:
		return record.PolicyRecreate
	case spot.PolicyPreserveState:
		return record.PolicySnapshot
	}
	return record.PolicyUnspecified
}

// hostRun is what identifies this node run in its descriptor.
type hostRun struct {
	rid                 []byte
	lifecycleGeneration uint64
	endpoint            string
	ownerID             string
	// The run's LeaseGeneration is Node.leaseGen: it changes when the lease
	// is reacquired after a loss (node_readopt.go).
}

// entrySpotID is the framework-issued ID of a Server node's Entry Spot (§7:
// only the framework issues it). It names the host run so that a restarted
// node's Entry Spot is a different object.
func entrySpotID(run hostRun) string {
	return "entry:" + hex.EncodeToString(run.rid) + ":" + strconv.FormatUint(run.lifecycleGeneration, 10)
}

// buildDescriptor builds the node's whole MeshNode descriptor (§4). It is
// validated as a whole (size, capability count) before anything is
// published: a descriptor that does not fit fails startup, never truncated.
func buildDescriptor(cfg config.Config, factories []spot.Factory, run hostRun, leaseGen uint64, state record.State) (record.MeshNodeDescriptor, error) {
	d := record.MeshNodeDescriptor{
		MeshName:            cfg.Node.MeshName,
		RoutingID:           run.rid,
		LifecycleGeneration: record.Generation(run.lifecycleGeneration),
		Endpoint:            run.endpoint,
		ChannelWeights:      map[string]int{},
		ObjectRole:          record.ObjectRole(cfg.Node.ObjectRole),
		PlacementWeight:     cfg.Node.PlacementWeight,
		State:               state,
		SecurityIdentity:    cfg.Node.SecurityIdentity,
		OwnerID:             run.ownerID,
		LeaseGeneration:     record.Generation(leaseGen),
		// The publisher sets DescriptorRevision and UpdatedAt (and the
		// lease's current generation).
	}
	if cfg.Node.ApplicationVersion > 0 {
		d.ApplicationVersion = uint64(cfg.Node.ApplicationVersion)
	}
	if cfg.Node.ObjectRole == config.RoleServer {
		id := entrySpotID(run)
		d.EntrySpotID = &id
		d.Capacity.Actors.Limit = cfg.Node.Limits.Actors
		d.Capacity.Spots.Limit = cfg.Node.Limits.Spots
		for _, f := range factories {
			limit := f.Limit
			if l, ok := cfg.Node.Limits.SpotTypes[f.StableType]; ok {
				limit = l
			}
			d.ObjectCapabilities = append(d.ObjectCapabilities, record.ObjectCapability{
				ObjectKind:         objectKind(f.Kind),
				StableType:         f.StableType,
				Policy:             relocationPolicy(f.Policy),
				HasSnapshotAdapter: f.Snapshot != nil,
				Limit:              limit,
			})
			if f.Kind != spot.KindActor {
				d.Capacity.SpotTypes = append(d.Capacity.SpotTypes, record.SpotTypeUsage{
					ObjectKind: objectKind(f.Kind), StableType: f.StableType, Limit: limit,
				})
			}
		}
		sort.Slice(d.ObjectCapabilities, func(i, j int) bool {
			return d.ObjectCapabilities[i].StableType < d.ObjectCapabilities[j].StableType
		})
	}
	// Validate needs a revision; the publisher assigns the real one.
	probe := d
	probe.DescriptorRevision = 1
	if err := probe.Validate(); err != nil {
		return record.MeshNodeDescriptor{}, fmt.Errorf("%w: MeshNode descriptor: %w", ErrStartup, err)
	}
	return d, nil
}
