package mesh

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// waitCreating waits until the authority row of id exists (Reserved).
func waitCreating(t *testing.T, c *cluster, kind record.ObjectKind, id string) {
	t.Helper()
	eventually(t, 10*time.Second, id+" Creating", func() bool {
		row, err := c.nodes[0].obj.readAuthority(context.Background(), kind, id)
		return err == nil && row.Found && row.Record.Allocation.State == record.AllocationReserved
	})
}

func rowOf(t *testing.T, c *cluster, kind record.ObjectKind, id string) authority.AuthorityRow {
	t.Helper()
	row, err := c.nodes[0].obj.readAuthority(context.Background(), kind, id)
	if err != nil {
		t.Fatal(err)
	}
	return row
}

// Every Manager error case of §7 / §7.2 (result table, InMesh rules,
// options, callback outcomes), each on its own ids of one two-node mesh.
func TestManagerErrorCases(t *testing.T) {
	c := newCluster(t, 2, nil)
	m := c.m(0)
	tests := []struct {
		name string
		run  func(t *testing.T, ctx context.Context)
	}{
		{"InMesh names an unknown mesh: NotFound", func(t *testing.T, ctx context.Context) {
			_, err := m.CreateActor(ctx, "e-mesh", testActorType, InMesh("elsewhere"))
			wantIs(t, err, ErrNotFound)
		}},
		{"InMesh given twice: InvalidOperation", func(t *testing.T, ctx context.Context) {
			_, err := m.CreateActor(ctx, "e-mesh2", testActorType, InMesh("objects"), InMesh("objects"))
			wantIs(t, err, ErrInvalidOperation)
		}},
		{"WithBody given twice: InvalidOperation", func(t *testing.T, ctx context.Context) {
			_, err := m.GetOrCreateActor(ctx, "e-body2", testActorType, WithBody(nil), WithBody([]byte("x")))
			wantIs(t, err, ErrInvalidOperation)
		}},
		{"zero OperationId: InvalidOperation", func(t *testing.T, ctx context.Context) {
			_, err := m.CreateActor(ctx, "e-op0", testActorType, WithOperationID([16]byte{}))
			wantIs(t, err, ErrInvalidOperation)
		}},
		{"malformed ids and types: InvalidOperation", func(t *testing.T, ctx context.Context) {
			for _, err := range []error{
				second(m.CreateActor(ctx, "", testActorType)),
				second(m.CreateActor(ctx, strings.Repeat("x", 256), testActorType)),
				second(m.CreateActor(ctx, "ok-id", "")),
				second(m.GetOrCreateUserSpot(ctx, "", testSpotType)),
				second(m.GetOrCreateUserSpot(ctx, entrySpotID(c.nodes[1].run), testSpotType)),
				second(m.FindActor(ctx, "")),
				second(m.CreateActor(ctx, "big", testActorType, WithBody(make([]byte, MaxCreationBody+1)))),
			} {
				wantIs(t, err, ErrInvalidOperation)
			}
		}},
		{"unregistered stable type: Unavailable", func(t *testing.T, ctx context.Context) {
			_, err := m.CreateActor(ctx, "e-type", "test.nobody-registered-this")
			wantIs(t, err, ErrUnavailable)
		}},
		{"Ready of the same type: Create AlreadyExists, GetOrCreate existing ref", func(t *testing.T, ctx context.Context) {
			ref, err := m.CreateActor(ctx, "e-ready", testActorType)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.m(1).CreateActor(ctx, "e-ready", testActorType)
			wantIs(t, err, ErrAlreadyExists)
			got, err := c.m(1).GetOrCreateActor(ctx, "e-ready", testActorType)
			if err != nil || got.Outcome != Existing || got.Ref.ObjectGeneration != ref.ObjectGeneration ||
				string(got.Ref.NodeRID) != string(ref.NodeRID) {
				t.Fatalf("GetOrCreate = %+v, %v; want the existing %+v", got, err, ref)
			}
		}},
		{"Creating: Create AlreadyExists, GetOrCreate waits for the result", func(t *testing.T, ctx context.Context) {
			first := make(chan ActorCreation, 1)
			go func() {
				cr, err := m.GetOrCreateActor(ctx, "e-creating", testActorType, WithBody([]byte("wait:creating")))
				if err != nil {
					t.Error(err)
				}
				first <- cr
			}()
			waitCreating(t, c, record.ObjectActor, "e-creating")
			_, err := c.m(1).CreateActor(ctx, "e-creating", testActorType)
			wantIs(t, err, ErrAlreadyExists)
			second := make(chan ActorCreation, 1)
			reads := c.nodes[1].ObjectStats().AuthorityReads
			go func() {
				cr, err := c.m(1).GetOrCreateActor(ctx, "e-creating", testActorType)
				if err != nil {
					t.Error(err)
				}
				second <- cr
			}()
			// The second caller is waiting on Creating once it reads the
			// record a second time: it reads again only after a read that
			// found the record not Ready (the factory is still held).
			eventually(t, 10*time.Second, "the second caller to wait on Creating", func() bool {
				return c.nodes[1].ObjectStats().AuthorityReads >= reads+2
			})
			close(c.probe.gate("creating"))
			a, b := <-first, <-second
			if a.Outcome != Created || b.Outcome != Existing || a.Ref.ObjectGeneration != b.Ref.ObjectGeneration {
				t.Fatalf("first %+v, second %+v", a, b)
			}
			if n := c.probe.runCount("e-creating"); n != 1 {
				t.Fatalf("factory ran %d times", n)
			}
		}},
		{"deadline while waiting for Creating: DeadlineExceeded", func(t *testing.T, ctx context.Context) {
			done := make(chan error, 1)
			go func() {
				_, err := m.GetOrCreateActor(ctx, "e-late", testActorType, WithBody([]byte("wait:late")))
				done <- err
			}()
			waitCreating(t, c, record.ObjectActor, "e-late")
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			_, err := c.m(1).GetOrCreateActor(short, "e-late", testActorType)
			wantIs(t, err, ErrDeadlineExceeded)
			wantIs(t, err, context.DeadlineExceeded)
			close(c.probe.gate("late"))
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}},
		{"another Actor type: TypeMismatch for both", func(t *testing.T, ctx context.Context) {
			if _, err := m.CreateActor(ctx, "e-mismatch", testActorType); err != nil {
				t.Fatal(err)
			}
			_, err := m.CreateActor(ctx, "e-mismatch", testOtherType)
			wantIs(t, err, ErrTypeMismatch)
			_, err = c.m(1).GetOrCreateActor(ctx, "e-mismatch", testOtherType)
			wantIs(t, err, ErrTypeMismatch)
		}},
		{"another Spot type: TypeMismatch", func(t *testing.T, ctx context.Context) {
			if _, err := m.GetOrCreateUserSpot(ctx, "e-spot-mismatch", testSpotType); err != nil {
				t.Fatal(err)
			}
			_, err := m.GetOrCreateUserSpot(ctx, "e-spot-mismatch", "demo.chat-room")
			wantIs(t, err, ErrTypeMismatch)
		}},
		{"Find of a missing or Creating object: NotFound", func(t *testing.T, ctx context.Context) {
			_, err := m.FindActor(ctx, "e-nothing")
			wantIs(t, err, ErrNotFound)
			done := make(chan error, 1)
			go func() {
				_, err := m.GetOrCreateActor(ctx, "e-find-creating", testActorType, WithBody([]byte("wait:find")))
				done <- err
			}()
			waitCreating(t, c, record.ObjectActor, "e-find-creating")
			_, err = c.m(1).FindActor(ctx, "e-find-creating")
			wantIs(t, err, ErrNotFound)
			close(c.probe.gate("find"))
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if _, err := c.m(1).FindActor(ctx, "e-find-creating"); err != nil {
				t.Fatalf("FindActor once Ready: %v", err)
			}
		}},
		{"declined: Rejected with the reason, space returned, result stored", func(t *testing.T, ctx context.Context) {
			op := NewOperationID()
			_, err := m.CreateActor(ctx, "e-decline", testActorType, WithBody([]byte("decline:not today")), WithOperationID(op))
			var rej *RejectedError
			if !errors.As(err, &rej) || rej.Reason != "not today" || !errors.Is(err, ErrRejected) {
				t.Fatalf("err = %v, want RejectedError{not today}", err)
			}
			if rowOf(t, c, record.ObjectActor, "e-decline").Found {
				t.Fatal("a declined creation left its record")
			}
			// The same request reads the stored Rejected; the factory does not run again.
			_, err = m.CreateActor(ctx, "e-decline", testActorType, WithBody([]byte("decline:not today")), WithOperationID(op))
			if !errors.As(err, &rej) || rej.Reason != "not today" {
				t.Fatalf("retry err = %v", err)
			}
			if n := c.probe.runCount("e-decline"); n != 1 {
				t.Fatalf("factory ran %d times", n)
			}
			assertNoReservedSlots(t, c)
		}},
		{"exception: typed Failed, record deleted, result stored", func(t *testing.T, ctx context.Context) {
			for _, tc := range []struct{ id, body, typ string }{{"e-panic", "panic", "factoryPanic"}, {"e-fail", "fail", "factoryError"}} {
				op := NewOperationID()
				_, err := m.GetOrCreateActor(ctx, tc.id, testActorType, WithBody([]byte(tc.body)), WithOperationID(op))
				var cf *CreateFailedError
				if !errors.As(err, &cf) || cf.Type != tc.typ || !errors.Is(err, ErrCreateFailed) {
					t.Fatalf("%s: err = %v, want CreateFailedError %s", tc.id, err, tc.typ)
				}
				if rowOf(t, c, record.ObjectActor, tc.id).Found {
					t.Fatalf("%s: a failed creation left its record", tc.id)
				}
				_, err = m.GetOrCreateActor(ctx, tc.id, testActorType, WithBody([]byte(tc.body)), WithOperationID(op))
				if !errors.As(err, &cf) || cf.Type != tc.typ {
					t.Fatalf("%s: retry err = %v", tc.id, err)
				}
				if n := c.probe.runCount(tc.id); n != 1 {
					t.Fatalf("%s: factory ran %d times", tc.id, n)
				}
			}
			assertNoReservedSlots(t, c)
		}},
		{"framework failure before the callback: no result, other node tried", func(t *testing.T, ctx context.Context) {
			var mu sync.Mutex
			failed := map[int]int{}
			calls := 0
			for i, n := range c.nodes {
				n.obj.hooks.Store(&testHooks{beforeFactory: func(id string) error {
					if !strings.HasPrefix(id, "e-fw") {
						return nil
					}
					mu.Lock()
					defer mu.Unlock()
					failed[i]++
					calls++
					if id == "e-fw-all" || calls == 1 {
						return errors.New("injected framework failure")
					}
					return nil
				}})
			}
			defer func() {
				for _, n := range c.nodes {
					n.obj.hooks.Store(nil)
				}
			}()
			// The first node tried fails before the factory; the other creates.
			ref, err := m.CreateActor(ctx, "e-fw-one", testActorType)
			if err != nil {
				t.Fatalf("CreateActor: %v", err)
			}
			if c.probe.runCount("e-fw-one") != 1 {
				t.Fatal("factory did not run exactly once")
			}
			mu.Lock()
			tried := len(failed)
			mu.Unlock()
			if tried != 2 {
				t.Fatalf("%d nodes reached the hook, want both (the first failed, the other created)", tried)
			}
			if failed[c.indexOf(ref.NodeRID)] != 1 {
				t.Fatal("the object was created on the node that failed")
			}
			// Every node fails: Unavailable, no record, no stored result.
			op := NewOperationID()
			_, err = m.CreateActor(ctx, "e-fw-all", testActorType, WithOperationID(op))
			wantIs(t, err, ErrUnavailable)
			if rowOf(t, c, record.ObjectActor, "e-fw-all").Found {
				t.Fatal("record left after framework failures")
			}
			sha := sha256.Sum256(encodeCreationRequest(modeCreate, record.ObjectActor, "e-fw-all", testActorType, nil))
			_, lerr := c.nodes[0].obj.exec.LookupTerminal(ctx, authority.OperationRef{SourceRoutingID: c.nodes[0].RID(),
				SourceRunGeneration: c.nodes[0].LifecycleGeneration(), OperationID: op}, sha)
			if !errors.Is(lerr, authority.ErrNotFound) {
				t.Fatalf("a final result was stored for a framework failure: %v", lerr)
			}
			if c.probe.runCount("e-fw-all") != 0 {
				t.Fatal("the factory ran")
			}
			assertNoReservedSlots(t, c)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, ctxT(t, 20*time.Second)) })
	}
}

// A node of object role none has no object-role mesh (§2, §7).
func TestRoleNoneIsNotConfigured(t *testing.T) {
	f := newFixture(t)
	cfg := objConfig("lonely")
	cfg.Node.ObjectRole = config.RoleNone
	n, err := Start(context.Background(), Options{Config: cfg, Factories: spot.NewRegistry(), Location: f.loc, Relocation: f.reloc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	m := n.Manager()
	ctx := ctxT(t, 5*time.Second)
	for _, err := range []error{
		second(m.CreateActor(ctx, "x", testActorType)),
		second(m.GetOrCreateUserSpot(ctx, "x", testSpotType)),
		second(m.FindSpot(ctx, "x")),
		m.SendActor(ctx, ActorRef{ActorID: "x", ObjectGeneration: 1}, nil),
		second(m.Destroy(ctx, ActorRef{ActorID: "x", ObjectGeneration: 1})),
	} {
		wantIs(t, err, ErrNotConfigured)
	}
}

func TestResolveMeshRules(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		role   config.ObjectRole
		inMesh *string
		want   string
		err    error
	}{
		{config.RoleNone, nil, "", ErrNotConfigured},
		{config.RoleNone, str("m"), "", ErrNotConfigured},
		{config.RoleClient, nil, "m", nil},
		{config.RoleServer, nil, "m", nil},
		{config.RoleServer, str("m"), "m", nil},
		{config.RoleServer, str("other"), "other", errOtherMesh},
	}
	for _, tc := range tests {
		got, err := resolveMesh(tc.role, "m", tc.inMesh)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("resolveMesh(%s, %v) = %q, %v; want %q, %v", tc.role, tc.inMesh, got, err, tc.want, tc.err)
		}
	}
}

// assertNoReservedSlots checks that no capacity counter of any node holds a
// reserved slot: every failed or rejected creation returned its space.
func assertNoReservedSlots(t *testing.T, c *cluster) {
	t.Helper()
	for i, n := range c.nodes {
		node := authority.Node{MeshName: "objects", RoutingID: n.RID(), LifecycleGeneration: n.LifecycleGeneration()}
		bun, _ := authority.BundleFor(record.ObjectActor, testActorType)
		rows, err := n.obj.readCapacity(context.Background(), node, bun)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Usage.Reserved != 0 {
				t.Fatalf("node %d counter %s holds %d reserved slots", i, r.ID, r.Usage.Reserved)
			}
		}
	}
}

func wantIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
}

func second[T any](_ T, err error) error { return err }
