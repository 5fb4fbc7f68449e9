package directory_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

const grace = 30 * time.Second

var self = []byte{0xee}

// peer builds a list entry of mesh "game" with a valid lease, serving.
func peer(rid byte, opts ...func(*directory.Entry)) directory.Entry {
	d := descriptor("game", []byte{rid}, fmt.Sprintf("tcp://10.0.0.%d:5555", rid))
	d.State = record.StateServing
	d.OwnerID, d.LeaseGeneration = fmt.Sprintf("owner-%d", rid), 1
	e := directory.Entry{Descriptor: d, LeaseValid: true}
	for _, o := range opts {
		o(&e)
	}
	return e
}

func leaseInvalid(e *directory.Entry) { e.LeaseValid = false }

func leaseReacquired(e *directory.Entry) { e.LeaseReacquired = true }
func state(s record.State) func(*directory.Entry) {
	return func(e *directory.Entry) { e.Descriptor.State = s }
}
func lifecycle(g record.Generation) func(*directory.Entry) {
	return func(e *directory.Entry) { e.Descriptor.LifecycleGeneration = g }
}
func endpoint(ep string) func(*directory.Entry) {
	return func(e *directory.Entry) { e.Descriptor.Endpoint = ep }
}
func mesh(m string) func(*directory.Entry) {
	return func(e *directory.Entry) { e.Descriptor.MeshName = m }
}
func leaseGen(g record.Generation) func(*directory.Entry) {
	return func(e *directory.Entry) { e.Descriptor.LeaseGeneration = g }
}
func ownerID(id string) func(*directory.Entry) {
	return func(e *directory.Entry) { e.Descriptor.OwnerID = id }
}
func selfRID(e *directory.Entry) { e.Descriptor.RoutingID = self }

func list(entries ...directory.Entry) directory.Snapshot {
	return directory.Snapshot{MeshName: "game", Entries: entries, Complete: true}
}

// step is one planner call: an Observe (snap set), or an ObserveFailure.
type step struct {
	at      time.Duration
	snap    *directory.Snapshot
	fail    bool
	actions string // "connect 01 new peer; disconnect 02 gone"
	err     error
	intents string // routing ids of the intents after the step, "01 02"
	status  func(directory.GraceStatus) error
}

func obs(at time.Duration, s directory.Snapshot, actions, intents string) step {
	return step{at: at, snap: &s, actions: actions, intents: intents}
}

func failure(at time.Duration, intents string, status func(directory.GraceStatus) error) step {
	return step{at: at, fail: true, intents: intents, status: status}
}

func inGrace(st directory.GraceStatus) error {
	if !st.Failing || !st.InGrace || st.GraceElapsed {
		return fmt.Errorf("want failing in grace, got %+v", st)
	}
	return nil
}

func graceOver(st directory.GraceStatus) error {
	if !st.Failing || st.InGrace || !st.GraceElapsed {
		return fmt.Errorf("want failing, grace elapsed, got %+v", st)
	}
	return nil
}

func healthy(st directory.GraceStatus) error {
	if st.Failing || st.InGrace || st.GraceElapsed || !st.HaveList || st.LastErr != nil {
		return fmt.Errorf("want healthy, got %+v", st)
	}
	return nil
}

func TestPlanner(t *testing.T) {
	s := time.Second
	tests := []struct {
		name  string
		grace time.Duration
		steps []step
	}{
		{"new peer", grace, []step{
			obs(0, list(peer(1)), "connect 01 new peer", "01"),
			obs(s, list(peer(1), peer(2)), "connect 02 new peer", "01 02"),
		}},
		{"gone peer", grace, []step{
			obs(0, list(peer(1), peer(2)), "connect 01 new peer; connect 02 new peer", "01 02"),
			obs(s, list(peer(2)), "disconnect 01 gone", "02"),
			obs(2*s, list(), "disconnect 02 gone", ""),
		}},
		{"lease expired", grace, []step{
			obs(0, list(peer(1), peer(2)), "connect 01 new peer; connect 02 new peer", "01 02"),
			obs(s, list(peer(1, leaseInvalid), peer(2)), "disconnect 01 lease not valid", "02"),
			// Never connected while the lease is not valid.
			obs(2*s, list(peer(1, leaseInvalid), peer(2), peer(3, leaseInvalid)), "", "02"),
		}},
		{"restart with a new lifecycle generation", grace, []step{
			obs(0, list(peer(1)), "connect 01 new peer", "01"),
			obs(s, list(peer(1, lifecycle(2))), "reconnect 01 restarted", "01"),
			obs(2*s, list(peer(1, lifecycle(2))), "", "01"),
		}},
		// The same run reacquired its lease after losing it: same
		// lifecycle generation and OwnerId, so the link stays.
		{"a lease reacquired by the same run keeps the link", grace, []step{
			obs(0, list(peer(1)), "connect 01 new peer", "01"),
			obs(s, list(peer(1, leaseGen(2))), "", "01"),
		}},
		// ... and in the moment before it republished its descriptor:
		// the list shows the old generation, the lease read the new one.
		{"a run that reacquired its lease, descriptor not yet republished, keeps the link", grace, []step{
			obs(0, list(peer(1)), "connect 01 new peer", "01"),
			obs(s, list(peer(1, leaseInvalid, leaseReacquired)), "", "01"),
			obs(2*s, list(peer(1, leaseGen(2))), "", "01"),
		}},
		{"restart seen as a new owner", grace, []step{
			obs(0, list(peer(1)), "connect 01 new peer", "01"),
			obs(s, list(peer(1, ownerID("owner-other"))), "reconnect 01 restarted", "01"),
		}},
		{"endpoint changed", grace, []step{
			obs(0, list(peer(1)), "connect 01 new peer", "01"),
			obs(s, list(peer(1, endpoint("tcp://10.9.9.9:1"))), "reconnect 01 endpoint changed", "01"),
		}},
		{"state changes between connectable states keep the connection", grace, []step{
			obs(0, list(peer(1, state(record.StatePreparing))), "connect 01 new peer", "01"),
			obs(s, list(peer(1, state(record.StateServing))), "", "01"),
			obs(2*s, list(peer(1, state(record.StateRelocating))), "", "01"),
			obs(3*s, list(peer(1, state(record.StateRelocated))), "", "01"),
			obs(4*s, list(peer(1, state(record.StateDraining))), "", "01"),
			obs(5*s, list(peer(1, state(record.StateStopped))), "disconnect 01 state stopped", ""),
		}},
		{"stopped and error peers are never connected", grace, []step{
			obs(0, list(peer(1, state(record.StateStopped)), peer(2, state(record.StateError))), "", ""),
			obs(s, list(peer(1, state(record.StateStopped)), peer(2)), "connect 02 new peer", "02"),
			obs(2*s, list(peer(1, state(record.StateStopped)), peer(2, state(record.StateError))), "disconnect 02 state error", ""),
		}},
		{"self excluded", grace, []step{
			obs(0, list(peer(1, selfRID), peer(2)), "connect 02 new peer", "02"),
		}},
		{"mesh filter", grace, []step{
			obs(0, directory.Snapshot{Complete: true, Entries: []directory.Entry{peer(1, mesh("other")), peer(2)}}, "connect 02 new peer", "02"),
			{at: s, snap: &directory.Snapshot{MeshName: "other", Complete: true}, err: directory.ErrInvalidArgument, intents: "02"},
		}},
		{"incomplete snapshot refused, intents kept", grace, []step{
			obs(0, list(peer(1)), "connect 01 new peer", "01"),
			{at: s, snap: &directory.Snapshot{MeshName: "game", Entries: []directory.Entry{peer(2)}}, err: directory.ErrIncompleteSnapshot, intents: "01"},
		}},
		{"failure during grace keeps intents", grace, []step{
			obs(0, list(peer(1), peer(2)), "connect 01 new peer; connect 02 new peer", "01 02"),
			failure(10*s, "01 02", inGrace),
			failure(39*s, "01 02", func(st directory.GraceStatus) error {
				if err := inGrace(st); err != nil {
					return err
				}
				if st.FailingSince != 10*s || st.Elapsed != 29*s {
					return fmt.Errorf("grace measured from %v, elapsed %v", st.FailingSince, st.Elapsed)
				}
				return nil
			}),
		}},
		{"failure after grace still keeps the list", grace, []step{
			obs(0, list(peer(1), peer(2)), "connect 01 new peer; connect 02 new peer", "01 02"),
			failure(10*s, "01 02", inGrace),
			failure(40*s, "01 02", graceOver),
			failure(400*s, "01 02", graceOver),
		}},
		{"recovery re-checks the whole list", grace, []step{
			obs(0, list(peer(1), peer(2), peer(3)), "connect 01 new peer; connect 02 new peer; connect 03 new peer", "01 02 03"),
			failure(10*s, "01 02 03", inGrace),
			failure(50*s, "01 02 03", graceOver),
			{at: 60 * s, snap: ptr(list(peer(1), peer(3, lifecycle(5)), peer(4))),
				actions: "disconnect 02 gone; reconnect 03 restarted; connect 04 new peer", intents: "01 03 04", status: healthy},
			// A new failure run measures its grace afresh.
			failure(70*s, "01 03 04", func(st directory.GraceStatus) error {
				if st.FailingSince != 70*s {
					return fmt.Errorf("since %v", st.FailingSince)
				}
				return inGrace(st)
			}),
		}},
		{"failure before any list", grace, []step{
			failure(0, "", func(st directory.GraceStatus) error {
				if st.HaveList {
					return errors.New("HaveList before any list")
				}
				return inGrace(st)
			}),
			obs(s, list(peer(1)), "connect 01 new peer", "01"),
		}},
		{"no grace configured", 0, []step{
			obs(0, list(peer(1)), "connect 01 new peer", "01"),
			failure(s, "01", graceOver),
		}},
		{"order: disconnects, reconnects, connects, each by routing id", grace, []step{
			obs(0, list(peer(5), peer(2), peer(9)), "connect 02 new peer; connect 05 new peer; connect 09 new peer", "02 05 09"),
			obs(s, list(peer(1), peer(5, lifecycle(3)), peer(2, lifecycle(3)), peer(7)),
				"disconnect 09 gone; reconnect 02 restarted; reconnect 05 restarted; connect 01 new peer; connect 07 new peer", "01 02 05 07"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := directory.NewPlanner(directory.PlannerConfig{MeshName: "game", Self: self, Grace: tt.grace})
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tt.steps {
				var got []directory.Action
				var status directory.GraceStatus
				if st.fail {
					status = p.ObserveFailure(st.at, errors.New("store down"))
				} else {
					got, err = p.Observe(st.at, *st.snap)
					if !errors.Is(err, st.err) || (st.err == nil && err != nil) {
						t.Fatalf("step %d: Observe error %v, want %v", i, err, st.err)
					}
					status = p.Status(st.at)
				}
				if a := formatActions(got); a != st.actions {
					t.Fatalf("step %d: actions %q, want %q", i, a, st.actions)
				}
				if in := formatIntents(p.Intents()); in != st.intents {
					t.Fatalf("step %d: intents %q, want %q", i, in, st.intents)
				}
				if st.status != nil {
					if err := st.status(status); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				}
			}
		})
	}
}

func ptr(s directory.Snapshot) *directory.Snapshot { return &s }

func formatActions(as []directory.Action) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, fmt.Sprintf("%v %x %s", a.Kind, a.RoutingID, a.Reason))
	}
	return strings.Join(parts, "; ")
}

func formatIntents(is []directory.Intent) string {
	var parts []string
	for _, i := range is {
		parts = append(parts, fmt.Sprintf("%x", i.RoutingID))
	}
	return strings.Join(parts, " ")
}

func TestPlannerActionCarriesTarget(t *testing.T) {
	p, err := directory.NewPlanner(directory.PlannerConfig{MeshName: "game", Self: self, Grace: grace})
	if err != nil {
		t.Fatal(err)
	}
	e := peer(1, lifecycle(4))
	e.Descriptor.SecurityIdentity = "node-1"
	acts, err := p.Observe(0, list(e))
	if err != nil || len(acts) != 1 {
		t.Fatalf("Observe = %+v, %v", acts, err)
	}
	a := acts[0]
	if a.Kind != directory.Connect || a.Endpoint != e.Descriptor.Endpoint || a.LifecycleGeneration != 4 || a.SecurityIdentity != "node-1" {
		t.Fatalf("action %+v", a)
	}
	if in, ok := p.Wanted([]byte{1}); !ok || in.State != record.StateServing || in.OwnerID != "owner-1" {
		t.Fatalf("Wanted = %+v, %v", in, ok)
	}
	if _, ok := p.Wanted([]byte{2}); ok {
		t.Fatal("unknown peer wanted")
	}
	e.Descriptor.SecurityIdentity = "node-1b"
	acts, _ = p.Observe(time.Second, list(e))
	if formatActions(acts) != "reconnect 01 security identity changed" {
		t.Fatalf("identity change: %s", formatActions(acts))
	}
	if last, ok := p.Last(); !ok || len(last.Entries) != 1 {
		t.Fatalf("Last = %+v, %v", last, ok)
	}
}

func TestConnectable(t *testing.T) {
	want := map[record.State]bool{
		record.StatePreparing: true, record.StateServing: true, record.StateRelocating: true,
		record.StateRelocated: true, record.StateDraining: true,
		record.StateStopped: false, record.StateError: false, "": false, "bogus": false,
	}
	for s, w := range want {
		if got := directory.Connectable(s); got != w {
			t.Errorf("Connectable(%q) = %v, want %v", s, got, w)
		}
	}
}

func TestNewPlannerArguments(t *testing.T) {
	for name, c := range map[string]directory.PlannerConfig{
		"no mesh":        {Self: self},
		"no self":        {MeshName: "game"},
		"negative grace": {MeshName: "game", Self: self, Grace: -1},
	} {
		if _, err := directory.NewPlanner(c); !errors.Is(err, directory.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
