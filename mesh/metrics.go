package mesh

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/meshnode/meshnode/internal/buildinfo"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/relocstore"
)

// A node's Prometheus metrics (docs/OPERATIONS.md "Metrics"). Counters the
// node already keeps (ObjectStats, transport Stats, the lease) are read at
// scrape time by nodeCollector — nothing on the message path changes for
// them. What has no counter elsewhere is observed here: store call
// latencies (the instrumented stores below), relocations and creations.
// Label sets are bounded: kinds, stable types, operations, outcomes,
// relocation reasons and peer RIDs (nodes, never objects).

type nodeMetrics struct {
	reg *prometheus.Registry

	storeCalls   *prometheus.HistogramVec // store, op, outcome
	relocations  *prometheus.CounterVec   // outcome, reason
	relocSeconds prometheus.Histogram
	relocBytes   prometheus.Counter
	relocRunning prometheus.Gauge
	creations    *prometheus.CounterVec // kind, outcome
	reclaims     *prometheus.CounterVec // what
}

// roundBuckets returns histogram bounds from lo to hi on the 1–2.5–5
// series (0.0001, 0.00025, 0.0005, 0.001, …), plus hi itself when it is not
// on it: bounds a dashboard can label, where an exponential range gives
// 0.001165520993579157.
func roundBuckets(lo, hi float64) []float64 {
	var out []float64
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for _, m := range []float64{1, 2.5, 5} {
			// Through 12 significant digits, so that 10^-4 × 2.5 is 0.00025.
			b, _ := strconv.ParseFloat(strconv.FormatFloat(m*math.Pow(10, e), 'g', 12, 64), 64)
			if b >= lo && b <= hi {
				out = append(out, b)
			}
		}
	}
	if len(out) == 0 || out[len(out)-1] < hi {
		out = append(out, hi)
	}
	return out
}

func newNodeMetrics(n *Node) *nodeMetrics {
	m := &nodeMetrics{reg: prometheus.NewRegistry()}
	m.storeCalls = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "meshnode_store_operation_duration_seconds",
		Help: "Location Store and Relocation Store calls by store, operation and outcome (ok, conflict, missing, refused, unavailable, error).",
		// 100 µs (memory, a local Redis) to 5 s (an operation timeout).
		Buckets: roundBuckets(0.0001, 5),
	}, []string{"store", "op", "outcome"})
	m.relocations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "meshnode_relocations_total",
		Help: "Moves of one object this node ran as source, by outcome (moved, not_moved, error) and reason.",
	}, []string{"outcome", "reason"})
	m.relocSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "meshnode_relocation_duration_seconds",
		Help:    "Duration of the moves this node ran as source, whatever their outcome.",
		Buckets: roundBuckets(0.0005, 30),
	})
	m.relocBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "meshnode_relocation_bytes_total",
		Help: "Restore payload bytes of the moves this node completed as source.",
	})
	m.relocRunning = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "meshnode_relocations_in_flight",
		Help: "Moves this node is running as source now.",
	})
	m.creations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "meshnode_creations_total",
		Help: "Create and GetOrCreate calls made on this node, by object kind and outcome (created, existing, rejected, failed, error).",
	}, []string{"kind", "outcome"})
	m.reclaims = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "meshnode_reclaims_total",
		Help: "What this node removed or returned for owners whose lease ended (its reclaim sweep, and a creation or close of a dead owner's Id): object (a dead owner's record; its state was lost), creation_reservation (an abandoned creation's reservation), relocation_reservation (a dead source's reservation: its target's slots returned).",
	}, []string{"what"})
	bi := buildinfo.Read()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "meshnode_build_info",
		Help:        "Always 1; its labels name the build this node runs (version, VCS revision, Go toolchain): which nodes of a rolling upgrade run the new binary.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.ShortRevision(), "goversion": bi.GoVersion},
	})
	build.Set(1)
	m.reg.MustRegister(m.storeCalls, m.relocations, m.relocSeconds, m.relocBytes, m.relocRunning, m.creations, m.reclaims, build,
		nodeCollector{n: n},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Gatherer is the node's metrics registry (what /metrics serves).
func (n *Node) Gatherer() prometheus.Gatherer { return n.metrics.reg }

// relocationStarted / relocationEnded bracket one move (objects.relocate).
func (m *nodeMetrics) relocationStarted() { m.relocRunning.Inc() }

func (m *nodeMetrics) relocationEnded(res RelocationResult, err error, took time.Duration) {
	m.relocRunning.Dec()
	m.relocSeconds.Observe(took.Seconds())
	switch {
	case err != nil:
		m.relocations.WithLabelValues("error", errorClass(err)).Inc()
	case res.Outcome == Moved:
		m.relocations.WithLabelValues("moved", "").Inc()
		m.relocBytes.Add(float64(res.PayloadBytes))
	default:
		m.relocations.WithLabelValues("not_moved", res.Reason).Inc()
	}
}

// creationEnded counts one Create/GetOrCreate call.
func (m *nodeMetrics) creationEnded(kind string, res createResult, err error) {
	outcome := "error"
	var cf *CreateFailedError
	switch {
	case err == nil && res.outcome == Existing:
		outcome = "existing"
	case err == nil:
		outcome = "created"
	case errors.Is(err, ErrRejected):
		outcome = "rejected"
	case errors.As(err, &cf):
		outcome = "failed"
	}
	m.creations.WithLabelValues(kind, outcome).Inc()
}

// reclaimed counts what one reclaim (the sweep, or a dead owner's record
// removed on the way) did.
func (m *nodeMetrics) reclaimed(res ReclaimResult) {
	for _, c := range []struct {
		what string
		n    int
	}{{"object", len(res.Reclaims)}, {"creation_reservation", len(res.Returns)}, {"relocation_reservation", len(res.Released)}} {
		if c.n > 0 {
			m.reclaims.WithLabelValues(c.what).Add(float64(c.n))
		}
	}
}

// errorClass is a bounded label for an error: its vocabulary class.
func errorClass(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{ErrDeadlineExceeded, "deadline_exceeded"}, {ErrNotFound, "not_found"}, {ErrStaleGeneration, "stale_generation"},
		{ErrMoving, "moving"}, {ErrTypeMismatch, "type_mismatch"}, {ErrInvalidOperation, "invalid_operation"},
		{ErrCapacityExhausted, "capacity_exhausted"}, {ErrUnavailable, "unavailable"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "other"
}

// storeOutcome is the outcome label of a store call.
func storeOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, locstore.ErrWriteRefused):
		// Its own label: an operator alerts on it (Redis out of memory, a
		// a failed save), and it does not pass by itself.
		return "refused"
	case errors.Is(err, locstore.ErrUnavailable), errors.Is(err, relocstore.ErrUnavailable),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "unavailable"
	}
	return "error"
}

// observedLocation is a Location Store that times every call, and tells
// the node (lost, one token) when a call reports that the store lost its
// data (locstore.ErrDataLost: the Redis provider's rollback watch), so
// that the node checks its namespace marker and stops at once rather than
// at its next discovery round (Node.loop).
type observedLocation struct {
	locstore.Store
	h    *prometheus.HistogramVec
	lost chan<- struct{}
}

// note passes on a data loss a call reported.
func (s observedLocation) note(err error) {
	if err == nil || s.lost == nil || !errors.Is(err, locstore.ErrDataLost) {
		return
	}
	select {
	case s.lost <- struct{}{}:
	default:
	}
}

func (s observedLocation) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	t0 := time.Now()
	rr, err := s.Store.Read(ctx, key)
	outcome := storeOutcome(err)
	if err == nil && !rr.Found {
		outcome = "missing"
	}
	s.h.WithLabelValues("location", "read", outcome).Observe(time.Since(t0).Seconds())
	s.note(err)
	return rr, err
}

// ReadMany keeps the store's one-call read (locstore.MultiReader) visible
// through the wrapper; it is observed as one call.
func (s observedLocation) ReadMany(ctx context.Context, keys []string) ([]locstore.ReadResult, error) {
	t0 := time.Now()
	rs, err := locstore.ReadMany(ctx, s.Store, keys)
	s.h.WithLabelValues("location", "read_many", storeOutcome(err)).Observe(time.Since(t0).Seconds())
	s.note(err)
	return rs, err
}

func (s observedLocation) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	t0 := time.Now()
	res, err := s.Store.Write(ctx, req)
	outcome := storeOutcome(err)
	if err == nil && !res.Applied {
		outcome = "conflict"
	}
	s.h.WithLabelValues("location", "write", outcome).Observe(time.Since(t0).Seconds())
	s.note(err)
	return res, err
}

func (s observedLocation) Scan(ctx context.Context, req locstore.ScanRequest) (locstore.ScanPage, error) {
	t0 := time.Now()
	p, err := s.Store.Scan(ctx, req)
	s.h.WithLabelValues("location", "scan", storeOutcome(err)).Observe(time.Since(t0).Seconds())
	s.note(err)
	return p, err
}

// observedRelocation is a Relocation Store that times every call.
type observedRelocation struct {
	relocstore.Store
	h *prometheus.HistogramVec
}

func (s observedRelocation) observe(op, outcome string, t0 time.Time) {
	s.h.WithLabelValues("relocation", op, outcome).Observe(time.Since(t0).Seconds())
}

func (s observedRelocation) Put(ctx context.Context, ref string, payload []byte, retention time.Duration) (relocstore.PutResult, error) {
	t0 := time.Now()
	r, err := s.Store.Put(ctx, ref, payload, retention)
	outcome := storeOutcome(err)
	if err == nil && r.Outcome == relocstore.Conflict {
		outcome = "conflict"
	}
	s.observe("put", outcome, t0)
	return r, err
}

func (s observedRelocation) Read(ctx context.Context, ref string) (relocstore.ReadResult, error) {
	t0 := time.Now()
	r, err := s.Store.Read(ctx, ref)
	outcome := storeOutcome(err)
	if err == nil && !r.Found {
		outcome = "missing"
	}
	s.observe("read", outcome, t0)
	return r, err
}

func (s observedRelocation) Renew(ctx context.Context, ref string, retention time.Duration) (relocstore.RenewResult, error) {
	t0 := time.Now()
	r, err := s.Store.Renew(ctx, ref, retention)
	outcome := storeOutcome(err)
	if err == nil && !r.Renewed {
		outcome = "missing"
	}
	s.observe("renew", outcome, t0)
	return r, err
}

func (s observedRelocation) Delete(ctx context.Context, ref string) error {
	t0 := time.Now()
	err := s.Store.Delete(ctx, ref)
	s.observe("delete", storeOutcome(err), t0)
	return err
}

// nodeCollector reads the node's own counters at scrape time.
type nodeCollector struct{ n *Node }

var (
	descHosted = prometheus.NewDesc("meshnode_objects_hosted", "Objects this node hosts, by kind and stable type (Entry Spot excluded).",
		[]string{"kind", "type"}, nil)
	descDelivered = prometheus.NewDesc("meshnode_messages_delivered_total", "Messages this node put into a hosted object's mailbox.", nil, nil)
	descForwarded = prometheus.NewDesc("meshnode_messages_forwarded_total", "Messages this node passed on to an object's new owner (Message Follow).", nil, nil)
	descRefused   = prometheus.NewDesc("meshnode_messages_refused_total", "Inbound messages not delivered, by reason (fence, follow, unhandled, instance, relocation_source).",
		[]string{"reason"}, nil)
	descCacheHits   = prometheus.NewDesc("meshnode_route_cache_hits_total", "Route resolutions answered by the route cache.", nil, nil)
	descCacheMisses = prometheus.NewDesc("meshnode_route_cache_misses_total", "Route resolutions that read the Location Store.", nil, nil)
	descSessions    = prometheus.NewDesc("meshnode_session_events_total", "Bound Session events on this node, by event (route_sent: commands 44 sent as a move's source or target; switched, aborted, ignored: commands 44 this node's Sessions took, took as an abort, or ignored; rebound: Sessions that fell back to a store resolve; binding_pruned: bindings a hosted Actor dropped because the Session's node run is gone; binding_unbound: bindings a hosted Actor dropped because the Session was closed).",
		[]string{"event"}, nil)
	descInstance = prometheus.NewDesc("meshnode_instance_spot_activations_total", "Instance Spot cold activations on this node, by outcome (activated, recovered, cancelled, data_lost, refused, dropped, passed_on: handed to another node while this one emptied itself).",
		[]string{"outcome"}, nil)
	descRecords = prometheus.NewDesc("meshnode_transport_records_total", "Records on this node's links, by peer RID and direction (in, out).",
		[]string{"peer", "direction"}, nil)
	descBytes = prometheus.NewDesc("meshnode_transport_bytes_total", "Record frame bytes on this node's links, by peer RID and direction (in, out).",
		[]string{"peer", "direction"}, nil)
	descFlushes = prometheus.NewDesc("meshnode_transport_flushes_total", "Socket writes on this node's links to a peer; records queued together share one (records out / flushes).",
		[]string{"peer"}, nil)
	descQueued   = prometheus.NewDesc("meshnode_transport_queued_records", "Records waiting on this node's link to a peer.", []string{"peer"}, nil)
	descPeers    = prometheus.NewDesc("meshnode_transport_peers_admitted", "Peers this node has an admitted link to.", nil, nil)
	descBackp    = prometheus.NewDesc("meshnode_transport_backpressure_total", "Sends refused because a peer's queue was full.", nil, nil)
	descUnsent   = prometheus.NewDesc("meshnode_transport_unsent_records_total", "Records that did not leave this node when their link went down and were never sent: requests (their calls failed) and one-way messages whose peer run did not come back within the keep time (lost).", nil, nil)
	descResent   = prometheus.NewDesc("meshnode_transport_resent_records_total", "One-way messages a link had not sent when its connection ended, sent first on its next connection to the same peer run.", nil, nil)
	descDupes    = prometheus.NewDesc("meshnode_transport_duplicate_records_total", "One-way messages a peer sent again after giving a connection up that this node had delivered already: dropped, not delivered twice (link message numbers).", nil, nil)
	descHeld     = prometheus.NewDesc("meshnode_transport_held_give_ups_total", "Connections a link gave up (liveness) with one-way messages in flight to a peer still taking data: counted delivered, the connection held open until the peer acknowledged them.", nil, nil)
	descHeldLost = prometheus.NewDesc("meshnode_transport_held_lost_records_total", "One-way messages counted delivered at a held give-up that the peer never acknowledged: it closed or reset the connection first, acknowledged nothing for the keep time, or this node closed (they may be lost).", nil, nil)
	descInFlLost = prometheus.NewDesc("meshnode_transport_in_flight_lost_records_total", "One-way messages in flight to a peer that does not drop copies (an older version) when its connection failed otherwise than by the peer's close or reset (a kernel timeout or unreachable host, a framing error): never acknowledged, not sent again (they may be lost).", nil, nil)
	descProto    = prometheus.NewDesc("meshnode_transport_protocol_errors_total", "Malformed records, misrouted commands and framing violations received.", nil, nil)
	descHsFail   = prometheus.NewDesc("meshnode_transport_handshake_failures_total", "Inbound connections whose ZMTP handshake failed or timed out (with CURVE: a key not in transport.curve.allowed_keys, a plain node), or that sent no hello in time.", nil, nil)
	descHelloRej = prometheus.NewDesc("meshnode_transport_hellos_rejected_total", "Hellos refused, by side: this_node rejected a peer's hello (wrong mesh or security identity, duplicate, max_peers), peer rejected this node's.", []string{"by"}, nil)
	descInRefuse = prometheus.NewDesc("meshnode_transport_inbound_refused_total", "Inbound connections closed right after accept, by the limit that refused them: max_unadmitted (that many connections had not completed hello, and this one's address held as many of them as any other) or max_inbound_conns.", []string{"limit"}, nil)
	descInEvict  = prometheus.NewDesc("meshnode_transport_inbound_evicted_total", "Inbound connections not yet admitted that were closed to make room in the full max_unadmitted pool for a connection from an address holding fewer of its slots.", nil, nil)
	descReadCut  = prometheus.NewDesc("meshnode_transport_readouts_cut_total", "Superseded connections of a peer run cut before read to their end, because that run reconnected again (at most one old connection per peer run is read out).", nil, nil)
	descLiveTo   = prometheus.NewDesc("meshnode_transport_liveness_timeouts_total", "Links declared down for missing liveness acknowledgements.", nil, nil)
	descLease    = prometheus.NewDesc("meshnode_owner_lease_remaining_seconds", "How long this node admits new work without another successful lease renewal (0: admission gate shut).", nil, nil)
	descReady    = prometheus.NewDesc("meshnode_ready", "1 when the node takes traffic (serving, owner lease valid), else 0.", nil, nil)
	descHostMv   = prometheus.NewDesc("meshnode_host_command_running", "1 while a host Relocate or drain runs on this node.", nil, nil)
	descReplBh   = prometheus.NewDesc("meshnode_store_replicas_behind", "1 while a Redis store's writes go on without waiting for replica_acks replicas (fewer acknowledged in time; a failover now can lose them), else 0; only for stores with replica_acks set.",
		[]string{"store"}, nil)
	descDisc = prometheus.NewDesc("meshnode_discovery_store_reads_total", "Location Store reads of discovery rounds, by kind (counter, scan_page, journal, lease).",
		[]string{"kind"}, nil)
	descRounds = prometheus.NewDesc("meshnode_discovery_rounds_total", "Discovery rounds, by whether the descriptor list was read whole (listed), brought up to date from the descriptor journal (followed) or unchanged (cached).",
		[]string{"list"}, nil)
	descAuthConfl = prometheus.NewDesc("meshnode_authority_conflicts_total", "Location Store batches of this node's authority operations that the store refused because a row they were conditioned on had moved since it was read (contention with another process), by operation.",
		[]string{"op"}, nil)
	descLaneWaits = prometheus.NewDesc("meshnode_authority_lane_waits_total", "Times an authority operation of this node queued behind others of this node on a hot counter (the ObjectGeneration counter, a capacity counter), by operation.",
		[]string{"op"}, nil)
	descLaneWait = prometheus.NewDesc("meshnode_authority_lane_wait_seconds_total", "Time authority operations of this node spent queued on hot counters, by operation.",
		[]string{"op"}, nil)
)

// authorityOps are the operations whose contention the metrics report,
// each always present (0 until it meets any). Until 2026-12-07 a list of
// its own, without readopt: its conflicts were counted and never exported.
var authorityOps = authority.CountedOps

func (c nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHosted, descDelivered, descForwarded, descRefused, descCacheHits, descCacheMisses,
		descSessions, descInstance, descRecords, descBytes, descFlushes, descQueued, descPeers, descBackp, descUnsent, descResent, descDupes, descHeld, descHeldLost, descInFlLost, descProto, descHsFail, descHelloRej, descInRefuse, descInEvict, descReadCut, descLiveTo, descLease, descReady, descHostMv, descReplBh,
		descDisc, descRounds, descAuthConfl, descLaneWaits, descLaneWait} {
		ch <- d
	}
}

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if n.obj != nil {
		for k, count := range n.obj.hostedByType() {
			gauge(descHosted, float64(count), k.kind, k.stableType)
		}
		st := n.obj.snapshotStats()
		counter(descDelivered, st.Delivered)
		counter(descForwarded, st.FollowForwarded)
		counter(descRefused, st.FenceRefused, "fence")
		counter(descRefused, st.FollowRefused, "follow")
		counter(descRefused, n.obj.stats.unhandled.Load(), "unhandled")
		counter(descRefused, st.InstanceRefused, "instance")
		counter(descRefused, st.RestoreRecordsNotFromSource, "relocation_source")
		counter(descCacheHits, st.RouteCacheHits)
		counter(descCacheMisses, st.RouteCacheMisses)
		for _, e := range []struct {
			name string
			v    uint64
		}{{"route_sent", st.SessionRoutesSent}, {"switched", st.SessionRouteSwitches}, {"aborted", st.SessionAborts},
			{"ignored", st.SessionRoutesIgnored}, {"rebound", st.SessionRebinds}, {"binding_pruned", st.SessionBindingsPruned},
			{"binding_unbound", st.SessionBindingsUnbound}} {
			counter(descSessions, e.v, e.name)
		}
		for _, o := range []struct {
			name string
			v    uint64
		}{{"activated", st.InstancesActivated}, {"recovered", st.InstancesRecovered}, {"cancelled", st.InstancesCancelled},
			{"data_lost", st.InstancesDataLost}, {"refused", st.InstanceRefused}, {"dropped", st.InstanceDropped},
			{"passed_on", st.InstancePassedOn}} {
			counter(descInstance, o.v, o.name)
		}
		as := n.obj.exec.Stats()
		for _, op := range authorityOps {
			st := as[op]
			counter(descAuthConfl, st.Conflicts, string(op))
			counter(descLaneWaits, st.LaneWaits, string(op))
			ch <- prometheus.MustNewConstMetric(descLaneWait, prometheus.CounterValue, st.LaneWait.Seconds(), string(op))
		}
		running := 0.0
		if n.obj.hostMove.Load() {
			running = 1
		}
		gauge(descHostMv, running)
	}
	if n.tr != nil {
		ts := n.tr.Stats()
		for peer, ps := range ts.Peers {
			counter(descRecords, ps.RecordsIn, peer, "in")
			counter(descRecords, ps.RecordsOut, peer, "out")
			counter(descBytes, ps.BytesIn, peer, "in")
			counter(descBytes, ps.BytesOut, peer, "out")
			counter(descFlushes, ps.Flushes, peer)
			gauge(descQueued, float64(ps.Queued), peer)
		}
		gauge(descPeers, float64(len(n.tr.Peers())))
		counter(descBackp, ts.Backpressure)
		counter(descUnsent, ts.Unsent)
		counter(descResent, ts.Resent)
		counter(descDupes, ts.Duplicates)
		counter(descHeld, ts.HeldGiveUps)
		counter(descHeldLost, ts.HeldLost)
		counter(descInFlLost, ts.InFlightLost)
		counter(descProto, ts.ProtocolErrors)
		counter(descHsFail, ts.HandshakeFailures)
		counter(descHelloRej, ts.Rejected, "this_node")
		counter(descHelloRej, ts.RejectedByPeer, "peer")
		counter(descInRefuse, ts.RefusedUnadmitted, "max_unadmitted")
		counter(descInRefuse, ts.RefusedInbound, "max_inbound_conns")
		counter(descInEvict, ts.EvictedUnadmitted)
		counter(descReadCut, ts.ReadOutsCut)
		counter(descLiveTo, ts.LivenessTimeouts)
	}
	if n.lease != nil {
		gauge(descLease, n.leaseRemaining().Seconds())
	}
	ds := n.DiscoveryStats()
	counter(descDisc, ds.CounterReads, "counter")
	counter(descDisc, ds.ScanPages, "scan_page")
	counter(descDisc, ds.JournalReads, "journal")
	counter(descDisc, ds.LeaseReads, "lease")
	counter(descRounds, ds.Listed, "listed")
	counter(descRounds, ds.Followed, "followed")
	counter(descRounds, ds.Cached, "cached")
	ready := 0.0
	if n.ready() == nil {
		ready = 1
	}
	gauge(descReady, ready)
	for _, s := range n.replicaWaits() {
		behind := 0.0
		if s.r.ReplicasBehind() {
			behind = 1
		}
		gauge(descReplBh, behind, s.name)
	}
}

// namedWaiter is one of the node's stores whose writes wait for replicas.
type namedWaiter struct {
	name string // location, relocation
	r    replicaWaiter
}

// replicaWaits lists the node's stores whose writes wait for replicas.
func (n *Node) replicaWaits() []namedWaiter {
	var out []namedWaiter
	for _, s := range []struct {
		name  string
		store any
	}{{"location", unwrapStore(n.loc)}, {"relocation", unwrapStore(n.reloc)}} {
		if r, ok := s.store.(replicaWaiter); ok && r.WaitsForReplicas() {
			out = append(out, namedWaiter{s.name, r})
		}
	}
	return out
}

// replicaWaiter is a store whose writes can wait for replicas (the Redis
// providers with replica_acks).
type replicaWaiter interface {
	WaitsForReplicas() bool
	ReplicasBehind() bool
}

// unwrapStore is the provider under the node's timing wrappers.
func unwrapStore(s any) any {
	switch w := s.(type) {
	case observedLocation:
		return w.Store
	case observedRelocation:
		return w.Store
	}
	return s
}

// discoveryCounters are the store reads of the discovery rounds. Each
// round is counted in exactly one of listed, followed and cached, where it
// is classified: each exported series is one counter, monotonic by
// construction. Until 2026-12-07 "cached" was rounds−listed−followed of
// three loads apart while add moved them in steps, so a scrape between
// them read one round too many or too few (down, or wrapped to 2^64−1).
type discoveryCounters struct {
	rounds, listed, followed, cached, counterReads, scanPages, journalReads, leaseReads atomic.Uint64
}

func (c *discoveryCounters) add(st directory.RoundStats) {
	c.rounds.Add(1)
	switch {
	case st.Listed:
		c.listed.Add(1)
	case st.Followed:
		c.followed.Add(1)
	default:
		c.cached.Add(1)
	}
	c.counterReads.Add(uint64(st.CounterReads))
	c.scanPages.Add(uint64(st.ScanPages))
	c.journalReads.Add(uint64(st.JournalReads))
	c.leaseReads.Add(uint64(st.LeaseReads))
}

// DiscoveryStats are the discovery rounds this node ran and their store
// reads (docs/DISCOVERY.md "Cost at scale"): Listed rounds read the whole
// list, Followed ones brought it up to date from the descriptor journal,
// Cached ones found the change counter unchanged. Each is its own counter,
// read apart: Rounds = Listed+Followed+Cached once the loop is between
// rounds, not necessarily in a snapshot taken during one (never subtract
// them).
type DiscoveryStats struct {
	Rounds, Listed, Followed, Cached, CounterReads, ScanPages, JournalReads, LeaseReads uint64
}

// DiscoveryStats returns the node's discovery counters.
func (n *Node) DiscoveryStats() DiscoveryStats {
	c := &n.discoveryReads
	return DiscoveryStats{Rounds: c.rounds.Load(), Listed: c.listed.Load(), Followed: c.followed.Load(), Cached: c.cached.Load(),
		CounterReads: c.counterReads.Load(), ScanPages: c.scanPages.Load(), JournalReads: c.journalReads.Load(),
		LeaseReads: c.leaseReads.Load()}
}

// typeKey is a (kind, stable type) pair of hosted objects.
type typeKey struct{ kind, stableType string }

// hostedByType counts the hosted objects (the Entry Spot excluded).
func (o *objects) hostedByType() map[typeKey]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[typeKey]int{}
	for _, h := range o.hosted {
		if h.entry {
			continue
		}
		out[typeKey{string(h.kind), h.stableType}]++
	}
	return out
}

// The instrumented stores keep satisfying the SPIs.
var (
	_ locstore.Store       = observedLocation{}
	_ locstore.MultiReader = observedLocation{}
	_ relocstore.Store     = observedRelocation{}
)
