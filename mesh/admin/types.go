package admin

// Status is GET /v1/status: this node as it sees itself.
type Status struct {
	Mesh string `json:"mesh"`
	RID  string `json:"rid"` // hex
	// Version is the build this node runs (internal/buildinfo: the
	// stamped version, the VCS revision, the Go toolchain).
	Version             string `json:"version"`
	Endpoint            string `json:"endpoint"`
	LifecycleGeneration uint64 `json:"lifecycleGeneration"`
	State               string `json:"state"` // the descriptor state: serving, draining, ...
	Role                string `json:"role"`
	OwnerID             string `json:"ownerId"`
	LeaseGeneration     uint64 `json:"leaseGeneration"`
	// LeaseRemainingSeconds is how long new work is admitted without
	// another successful renewal (0 when the admission gate is shut).
	LeaseRemainingSeconds float64 `json:"leaseRemainingSeconds"`
	// LeaseRenewError is why the owner-lease renewals since the last
	// successful one failed (the latest failure); absent while they succeed.
	LeaseRenewError string  `json:"leaseRenewError,omitempty"`
	Ready           bool    `json:"ready"`
	NotReady        string  `json:"notReady,omitempty"`
	Peers           []Peer  `json:"peers"`
	Objects         Objects `json:"objects"`
	// HostCommand is the host Relocate or drain in progress, if any; one
	// not started through this listener (a SIGTERM drain, the
	// application's call) has no ID.
	HostCommand *Job `json:"hostCommand,omitempty"`
	// Stores lists the stores whose writes wait for replicas (replica_acks),
	// with whether the replicas keep up; absent when none does.
	Stores []StoreReplicas `json:"stores,omitempty"`
}

// StoreReplicas is the replica wait of one store (docs/store-redis.md,
// "Writes that survive a failover").
type StoreReplicas struct {
	Store string `json:"store"` // location, relocation
	// Behind: fewer replicas than asked acknowledged the last write that
	// waited, so writes go on without waiting (a failover can lose them).
	Behind bool `json:"behind"`
}

// Peer is one admitted peer link.
type Peer struct {
	RID                 string `json:"rid"`
	Endpoint            string `json:"endpoint"`
	LifecycleGeneration uint64 `json:"lifecycleGeneration"`
	RecordsIn           uint64 `json:"recordsIn"`
	RecordsOut          uint64 `json:"recordsOut"`
	BytesIn             uint64 `json:"bytesIn"`
	BytesOut            uint64 `json:"bytesOut"`
	Queued              int    `json:"queued"`
}

// Objects counts what the node hosts and what it did.
type Objects struct {
	Hosted int `json:"hosted"`
	// ByType counts hosted objects by "kind/type".
	ByType map[string]int `json:"byType"`
	// Counters are the node's object counters (delivered, forwarded, ...).
	Counters map[string]uint64 `json:"counters"`
}

// Progress is a host command's counts so far.
type Progress struct {
	Total      int    `json:"total"`
	Moved      int    `json:"moved"`
	Skipped    int    `json:"skipped"`
	Failed     int    `json:"failed"`
	Gone       int    `json:"gone"`
	NotStarted int    `json:"notStarted"`
	Running    int    `json:"running"`
	Pending    int    `json:"pending"`
	Bytes      int64  `json:"bytes"`
	End        string `json:"end,omitempty"` // "" while running; completed or forceStopped
}

// Remaining is what has no final outcome yet.
func (p Progress) Remaining() int { return p.Pending + p.Running }

// ObjectOutcome is one object's final outcome in a host command.
type ObjectOutcome struct {
	Kind    string `json:"kind"`
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	Target  string `json:"target,omitempty"` // hex RID
	TookMs  int64  `json:"tookMs"`
}

// Result is how a host command ended.
type Result struct {
	End      string          `json:"end"`
	Progress Progress        `json:"progress"`
	Objects  []ObjectOutcome `json:"objects,omitempty"`
	// TookMs is the whole command's time (for a drain, up to the node's
	// stop), BeforeMovesMs the part before its first move could start
	// (a drain's waits for its owner lease or a recovering peer, the
	// discovery round), MovesTookMs the moves' part.
	TookMs        int64 `json:"tookMs"`
	BeforeMovesMs int64 `json:"beforeMovesMs"`
	MovesTookMs   int64 `json:"movesTookMs"`
}

// Job is GET /v1/relocate/{id} (and POST's answer).
type Job struct {
	ID        string   `json:"id"`
	Drain     bool     `json:"drain"`
	State     string   `json:"state"` // running, done, failed
	StartedAt string   `json:"startedAt"`
	Progress  Progress `json:"progress"`
	Result    *Result  `json:"result,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// Job states.
const (
	JobRunning = "running"
	JobDone    = "done"
	JobFailed  = "failed"
)

// RelocateRequest is POST /v1/relocate's body.
type RelocateRequest struct {
	// RequestID makes the POST idempotent: the same id returns the same job
	// (its progress, or its result). Empty: a fresh id.
	RequestID string `json:"requestId"`
	// Drain runs a drain (move, then the orderly shutdown) instead of a
	// host Relocate; the node stops when it ends.
	Drain bool `json:"drain"`
}
