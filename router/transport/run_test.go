package transport

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// A record that names the run of the peer it is meant for (SendRun,
// SendWaitRun, Request/Start with Run) goes only on a session admitted with
// that run: an earlier run named (it ended: a later one is admitted) fails
// with ErrRunEnded, a later one (the link still holds an earlier run) with
// ErrNotAdmitted, both as a *RunError saying which runs, and nothing is
// queued. A request of the admitted run behind them is the barrier: once it
// is answered, the peer has read everything queued before it.
func TestRecordNamingAPeerRunGoesOnlyToThatRun(t *testing.T) {
	const gen = 5
	var mu sync.Mutex
	var got []uint64
	bcfg := testConfig("b", gen)
	bcfg.Handler = echoHandler(func(_ PeerInfo, rec *router.Record) {
		mu.Lock()
		got = append(got, seqOf(rec))
		mu.Unlock()
	})
	b := startNode(t, bcfg)
	a := startNode(t, testConfig("a", 1))
	connectAndWait(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	send := map[string]func(gen, seq uint64) error{
		"SendRun": func(g, seq uint64) error { return a.SendRun(ctx, b.RID(), g, seqSend(b.RID(), seq, nil)) },
		"SendWaitRun": func(g, seq uint64) error {
			return a.SendWaitRun(ctx, b.RID(), g, seqSend(b.RID(), seq, nil))
		},
		"Request": func(g, seq uint64) error {
			_, err := a.Request(ctx, b.RID(), spotRequest(b.RID(), seq, nil), Run(g))
			return err
		},
		"Start": func(g, seq uint64) error {
			c, err := a.Start(ctx, b.RID(), spotRequest(b.RID(), seq, nil), Portable(), Run(g))
			if err != nil {
				return err
			}
			_, err = c.Wait(ctx)
			return err
		},
	}
	var want []uint64
	seq := uint64(0)
	for name, f := range send {
		for _, tc := range []struct {
			run         string
			gen         uint64
			ended, down bool // ErrRunEnded, ErrNotAdmitted
		}{
			{"the admitted run", gen, false, false},
			{"an earlier run", gen - 1, true, false},
			{"a later run", gen + 1, false, true},
		} {
			t.Run(name+"/"+tc.run, func(t *testing.T) {
				seq++
				err := f(tc.gen, seq)
				if errors.Is(err, ErrRunEnded) != tc.ended || errors.Is(err, ErrNotAdmitted) != tc.down {
					t.Fatalf("%v: want run ended %v, not admitted %v", err, tc.ended, tc.down)
				}
				if err == nil {
					if name == "SendRun" || name == "SendWaitRun" {
						want = append(want, seq)
					}
					return
				}
				var re *RunError
				if !errors.As(err, &re) || re.Named != tc.gen || re.Admitted != gen || string(re.Peer) != string(b.RID()) {
					t.Fatalf("%v: want a *RunError naming run %d, admitted %d", err, tc.gen, gen)
				}
			})
		}
	}
	if _, err := a.Request(ctx, b.RID(), spotRequest(b.RID(), 0, nil), Run(gen)); err != nil {
		t.Fatalf("barrier request: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Fatalf("the peer received records %v, want only those of its run %v", got, want)
	}
	if err := a.SendRun(ctx, RID("node-nobody"), gen, seqSend(b.RID(), 0, nil)); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("no link: %v, want ErrUnknownPeer", err)
	}
}
