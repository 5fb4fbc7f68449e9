package mesh

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

// A previous owner whose owner lease generation changed (lost and
// reacquired) after it moved an object away still passes on a message
// addressed to its earlier combination: the follow record (§7.3) names the
// new owner, whose own lease is not this node's. Before 2026-12-07 the
// owner-lease check in admitMessage ran before the follow lookup and
// refused it as a stale route; a one-way message was dropped though the
// follow record was there.
func TestMessageForAMovedObjectFollowsAfterThePreviousOwnersLeaseChanged(t *testing.T) {
	f, _, blocker, fast := republishScene(t)
	ctx := ctxT(t, 60*time.Second)
	src := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, blocker, fast)
	dst := startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, f.loc, fast)
	client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, fast)
	x := createOnNode(t, ctx, client, src, "lease-follow", 1)[0]
	fence := fenceOf(t, src, x) // the client's route before the move

	if err := src.WaitPeers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if res, err := src.Manager().RelocateActor(ctx, x, ToNode(dst.RID())); err != nil || res.Outcome != Moved {
		t.Fatalf("move: %+v, %v", res, err)
	}
	_, before := src.Owner()
	blocker.loseLeaseOf(t, src)
	blocker.blocked.Store(nil)
	eventually(t, 20*time.Second, "the previous owner to reacquire its lease", func() bool {
		_, lg := src.Owner()
		return lg != before && src.lease.Gate().Admit() == nil
	})

	s0 := src.ObjectStats()
	payload := &router.Payload{PacketName: PacketName, ContentType: ContentType, Data: []byte("one")}
	rec := router.NewRecord(&router.ActorSend{Operation: opIDOf(NewOperationID()), TargetActor: fence}, nil, payload)
	if err := client.Transport().Send(ctx, transport.RID(src.RID()), rec); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the previous owner to pass the message on or refuse it", func() bool {
		s := src.ObjectStats()
		return s.FollowForwarded > s0.FollowForwarded || s.FenceRefused > s0.FenceRefused
	})
	if s := src.ObjectStats(); s.FollowForwarded != s0.FollowForwarded+1 {
		t.Fatalf("passed on %d, refused %d; want the message passed on along the follow record",
			s.FollowForwarded-s0.FollowForwarded, s.FenceRefused-s0.FenceRefused)
	}
	eventually(t, 10*time.Second, "the message to run at the new owner", func() bool {
		got, err := client.Manager().RequestActor(ctx, x, []byte("count"))
		return err == nil && string(got) == "count:1"
	})
}
