package mesh

import (
	"strings"
	"testing"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
)

// TestMessageRecordHeadIsBounded: the largest record messageRecord can
// build — ids, routing ids and a session tail at their longest, a control
// message with its after-run metadata — has at most messageFrames frames,
// and its bytes other than the body come to at most messageHead. sendable
// lets a body through on these bounds without building its record.
func TestMessageRecordHeadIsBounded(t *testing.T) {
	c := newCluster(t, 1, nil)
	o := c.nodes[0].obj
	rid := []byte(strings.Repeat("r", router.RIDBytes))
	r := follow.Ready{}
	r.Route.NodeRID, r.Route.NodeGeneration = rid, 1<<63-1
	r.AuthorityOwnerGeneration, r.Owner.LeaseGeneration = 1<<63-1, 1<<63-1
	body := []byte("body")
	for _, fam := range []opFamily{familyActor, familySpot} {
		for _, request := range []bool{false, true} {
			tgt := msgTarget{fam: fam, id: strings.Repeat("i", record.MaxIDBytes), gen: 1<<63 - 1,
				sess:    &sessionTag{rid: rid, bindGen: 1<<63 - 1, seq: 1<<63 - 1},
				control: strings.Repeat("c", router.ShortTextBytes), afterRun: &origin{rid: rid, gen: 1<<63 - 1}}
			if fam == familySpot {
				tgt.sess = nil // only an Actor message carries a session tail
			}
			rec, err := o.messageRecord(tgt, r, body, request)
			if err != nil {
				t.Fatalf("family %v request %v: %v", fam, request, err)
			}
			// The transport gives a request its correlation as it sends it.
			switch b := rec.Body.(type) {
			case *router.ActorRequest:
				b.Correlation = 1<<63 - 1
			case *router.SpotRequest:
				b.Correlation = 1<<63 - 1
			}
			frames, err := router.Encode(rec)
			if err != nil {
				t.Fatalf("family %v request %v: %v", fam, request, err)
			}
			head := -len(body)
			for _, f := range frames {
				head += len(f)
			}
			if len(frames) > messageFrames || head > messageHead {
				t.Errorf("family %v request %v: %d frames, head %d bytes; the bounds are %d frames, %d bytes", fam, request, len(frames), head, messageFrames, messageHead)
			}
			t.Logf("family %v request %v: %d frames, head %d bytes", fam, request, len(frames), head)
		}
	}
}
