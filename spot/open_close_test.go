package spot

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type nopHandler struct{}

func (nopHandler) Receive(*Turn, Envelope) error { return nil }

type replyCounter struct{ n atomic.Int64 }

func (c *replyCounter) Reply([]byte, []byte, error) { c.n.Add(1) }

// Open with restored work (a queued request and a timer) racing
// Runtime.Close: nothing panics, and every object Open returned has its
// restored request answered (by a turn, or with ErrRuntimeDown). Before,
// Close could collect and close an object between its registration and the
// filling of its restored work: arming the timer wrote into the closed
// object's nil timer map (a crash), or the request landed in a closed
// object and was never answered.
func TestOpenRestoredRacesClose(t *testing.T) {
	end := time.Now().Add(3 * time.Second)
	for round := 0; time.Now().Before(end); round++ {
		rep := &replyCounter{}
		rt := New(Options{Workers: 1, Replier: rep})
		const n = 64
		var opened atomic.Int64
		var panicked atomic.Value
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					if r := recover(); r != nil {
						panicked.Store(fmt.Sprint(r))
					}
				}()
				<-start
				_, err := rt.Open(Spec{Key: Key{ID: fmt.Sprint(i)}, Handler: nopHandler{}, Held: true,
					Restored: &Captured{Queue: []Envelope{{Kind: Request, ReplyRoute: []byte{1}}},
						Timers: []TimerState{{Name: "t", Remaining: time.Hour}}}})
				if err == nil {
					opened.Add(1)
				}
			}()
		}
		// Readers of the runtime's lock make its hand-offs frequent.
		stop := make(chan struct{})
		var readers sync.WaitGroup
		for range 4 {
			readers.Add(1)
			go func() {
				defer readers.Done()
				for {
					select {
					case <-stop:
						return
					default:
						rt.Len()
					}
				}
			}()
		}
		close(start)
		time.Sleep(time.Duration(round%50) * 10 * time.Microsecond)
		rt.Close()
		close(stop)
		readers.Wait()
		wg.Wait()
		if p := panicked.Load(); p != nil {
			t.Fatalf("round %d: Open panicked racing Close: %v", round, p)
		}
		if got, want := rep.n.Load(), opened.Load(); got != want {
			t.Fatalf("round %d: %d restored requests answered, %d objects opened", round, got, want)
		}
	}
}
