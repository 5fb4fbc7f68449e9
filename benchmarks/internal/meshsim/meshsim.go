// Package meshsim simulates MeshNode host runs for the discovery-at-scale
// test and benchmark (issue 16): each simulated run holds an owner lease it
// renews on the lease schedule, a descriptor published through the same
// directory.Publisher a node uses, and — with Links — a real transport
// endpoint that admits the mesh's nodes, so that real nodes discover, link
// to and watch it as they would any peer. A simulated run runs no
// discovery and hosts no objects: it is the cheapest thing that looks like a
// live node to the Location Store and on the wire.
//
// Kill makes a run look crashed (lease no longer renewed, endpoint closed:
// the real nodes' links drop); LoseLease makes it look like a process that
// lost its store connection (lease no longer renewed, links up).
package meshsim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router/transport"
)

// Config describes the simulated runs.
type Config struct {
	Store    locstore.Store
	MeshName string
	// SecurityIdentity is the admission identity on the wire; it must be
	// the real nodes' (mesh.AnonymousIdentity when theirs is empty).
	SecurityIdentity string
	// LeaseTTL and RenewEvery are the owner-lease timing (the nodes').
	LeaseTTL, RenewEvery time.Duration
	// Links gives every run a transport endpoint on loopback.
	Links bool
	// ProbeInterval and PeerTimeout are the endpoints' liveness timing
	// (the nodes' transport.liveness_interval and peer_timeout).
	ProbeInterval, PeerTimeout time.Duration
	Logger                     *slog.Logger
}

// Run is one simulated host run.
type Run struct {
	Owner string
	RID   []byte
	Key   string // descriptor key

	leaseKey string
	tr       *transport.Node
	renewing atomic.Bool
	renewed  atomic.Int64 // UnixNano of the last renewal written
}

// Sim is a set of simulated runs and the goroutine renewing their leases.
type Sim struct {
	cfg Config

	mu   sync.Mutex
	runs []*Run
	next int // the lowest number above every run added

	renewals atomic.Uint64
	// failures counts renewals the store refused or failed, lapses the
	// renewals written after the run's lease had already expired (a failed
	// or late renewal): either makes a run the simulator keeps alive look
	// dead to the real nodes for a while, which a benchmark would count as
	// their discovery's work.
	failures, lapses atomic.Uint64
	stop             chan struct{}
	wg               sync.WaitGroup
}

// renewSlots spreads the renewals over the interval, as independent
// processes would.
const renewSlots = 10

// New checks cfg and starts the renewals.
func New(cfg Config) (*Sim, error) {
	if cfg.Store == nil || cfg.MeshName == "" || cfg.LeaseTTL <= 0 || cfg.RenewEvery <= 0 || cfg.RenewEvery >= cfg.LeaseTTL {
		return nil, errors.New("meshsim: Store, MeshName and 0 < RenewEvery < LeaseTTL are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Sim{cfg: cfg, stop: make(chan struct{})}
	s.wg.Add(1)
	go s.renewLoop()
	return s, nil
}

// Renewals is how many lease renewals the runs have written.
func (s *Sim) Renewals() uint64 { return s.renewals.Load() }

// Failures is how many lease renewals failed (logged at Warn each).
func (s *Sim) Failures() uint64 { return s.failures.Load() }

// Lapses is how many renewals were written after the run's lease had
// expired: the run looked dead in between though it was meant alive.
func (s *Sim) Lapses() uint64 { return s.lapses.Load() }

// Runs returns the runs added so far.
func (s *Sim) Runs() []*Run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Run(nil), s.runs...)
}

// RID returns the routing id of the i-th run ever added: 0x5e, then i as
// three bytes (sorting in the order of i).
func RID(i int) []byte { return []byte{0x5e, byte(i >> 16), byte(i >> 8), byte(i)} }

// Add creates count more runs: lease, endpoint, descriptor. Runs are
// numbered on from the highest number used so far.
func (s *Sim) Add(ctx context.Context, count int) ([]*Run, error) {
	s.mu.Lock()
	first := s.next
	s.mu.Unlock()
	idx := make([]int, count)
	for i := range idx {
		idx[i] = first + i
	}
	return s.AddAt(ctx, idx)
}

// AddAt creates the runs numbered idx (RID(i) each): several simulators,
// in several processes, can share one mesh by taking disjoint numbers.
func (s *Sim) AddAt(ctx context.Context, idx []int) ([]*Run, error) {
	out := make([]*Run, 0, len(idx))
	for _, i := range idx {
		r, err := s.add(ctx, i)
		if err != nil {
			return out, fmt.Errorf("meshsim: run %d: %w", i, err)
		}
		s.mu.Lock()
		s.runs = append(s.runs, r)
		s.next = max(s.next, i+1)
		s.mu.Unlock()
		out = append(out, r)
	}
	return out, nil
}

const generation = 1

func (s *Sim) add(ctx context.Context, i int) (*Run, error) {
	r := &Run{Owner: fmt.Sprintf("meshsim-%06d", i), RID: RID(i)}
	var err error
	if r.leaseKey, err = record.OwnerLeaseKey(r.Owner); err != nil {
		return nil, err
	}
	if _, err := s.renew(ctx, r); err != nil {
		return nil, err
	}
	endpoint := fmt.Sprintf("tcp://127.0.0.1:%d", 1+i%65000) // never dialled without Links
	if s.cfg.Links {
		r.tr, err = transport.New(transport.Config{
			RID: r.RID, Endpoint: "tcp://127.0.0.1:0", MeshName: s.cfg.MeshName,
			SecurityIdentity: s.cfg.SecurityIdentity, LifecycleGeneration: generation, DescriptorRevision: 1,
			ProbeInterval: s.cfg.ProbeInterval, PeerTimeout: s.cfg.PeerTimeout,
			// A simulated run only answers hellos and probes: small buffers
			// keep a thousand of them in one process.
			IOBufferBytes: 4096, SendQueueRecords: 64,
			Logger: s.cfg.Logger,
		})
		if err != nil {
			return nil, err
		}
		endpoint = r.tr.AdvertisedEndpoint()
	}
	lease := &simLease{run: r, sim: s}
	pub, err := directory.NewPublisher(directory.PublisherConfig{Store: s.cfg.Store, Lease: lease, Gate: openGate{},
		MeshName: s.cfg.MeshName, RoutingID: r.RID, Logger: s.cfg.Logger})
	if err != nil {
		return nil, err
	}
	r.Key = pub.Key()
	d := record.MeshNodeDescriptor{MeshName: s.cfg.MeshName, RoutingID: r.RID, LifecycleGeneration: generation,
		Endpoint: endpoint, ObjectRole: record.RoleClient, PlacementWeight: 100,
		State: record.StateServing, SecurityIdentity: s.cfg.SecurityIdentity,
		OwnerID: r.Owner, LeaseGeneration: generation, DescriptorRevision: 1}
	res, err := pub.Publish(ctx, d)
	if err != nil {
		return nil, err
	}
	if res.Outcome != directory.Published {
		return nil, fmt.Errorf("descriptor not published: %v", res.Outcome)
	}
	r.renewing.Store(true)
	return r, nil
}

// renew writes the run's owner lease with a fresh expiry.
func (s *Sim) renew(ctx context.Context, r *Run) (string, error) {
	v, err := record.OwnerLease{OwnerID: r.Owner, LeaseGeneration: generation, AcquiredAt: 1, UpdatedAt: 1}.Encode()
	if err != nil {
		return "", err
	}
	res, err := s.cfg.Store.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.PutExpiring(r.leaseKey, v, s.cfg.LeaseTTL)}})
	if err == nil && !res.Applied {
		err = errors.New("lease renewal not applied")
	}
	if err != nil {
		s.failures.Add(1)
		return "", err
	}
	// The lease was written with LeaseTTL from the store's clock; this
	// process's clock only tells a renewal that came later than that.
	now := time.Now()
	if last := r.renewed.Swap(now.UnixNano()); last != 0 && now.Sub(time.Unix(0, last)) >= s.cfg.LeaseTTL {
		s.lapses.Add(1)
	}
	s.renewals.Add(1)
	return res.Versions[0], nil
}

func (s *Sim) renewLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.RenewEvery / renewSlots)
	defer t.Stop()
	for slot := 0; ; slot = (slot + 1) % renewSlots {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		for i, r := range s.Runs() {
			if i%renewSlots != slot || !r.renewing.Load() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RenewEvery)
			if _, err := s.renew(ctx, r); err != nil {
				s.cfg.Logger.Warn("meshsim: renewal failed", "owner", r.Owner, "err", err)
			}
			cancel()
		}
	}
}

// Kill makes r look like a crashed process: its lease is no longer renewed
// and its endpoint closes (the links to it drop).
func (s *Sim) Kill(r *Run) error {
	r.renewing.Store(false)
	if r.tr != nil {
		return r.tr.Close()
	}
	return nil
}

// LoseLease makes r look like a process that lost its store connection:
// the lease is no longer renewed, its links stay up.
func (s *Sim) LoseLease(r *Run) { r.renewing.Store(false) }

// Close stops the renewals and closes every endpoint.
func (s *Sim) Close() error {
	select {
	case <-s.stop:
		return nil
	default:
	}
	close(s.stop)
	s.wg.Wait()
	var errs []error
	for _, r := range s.Runs() {
		if r.tr != nil {
			if err := r.tr.Close(); err != nil && !errors.Is(err, transport.ErrClosed) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// simLease is what the Publisher asks of a run's lease: who it is and the
// fence of its last renewal (the Publisher conditions on the lease record's
// version; read it fresh, since the renewals move it).
type simLease struct {
	run *Run
	sim *Sim
}

func (l *simLease) OwnerID() string    { return l.run.Owner }
func (l *simLease) Generation() uint64 { return generation }
func (l *simLease) Fence() (string, string) {
	rr, err := l.sim.cfg.Store.Read(context.Background(), l.run.leaseKey)
	if err != nil || !rr.Found {
		return l.run.leaseKey, ""
	}
	return l.run.leaseKey, rr.Version
}

type openGate struct{}

func (openGate) Admit() error { return nil }
