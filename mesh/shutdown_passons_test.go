package mesh

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
)

// The pass-ons' seal (shutdown_passons.go): it waits for the sends under
// way, which are then taken with the last round; a send after it is not
// made; entries older than the follow window are dropped.
func TestPassedOnSeal(t *testing.T) {
	const window = 10 * time.Second
	mv := func(id string) follow.Move { return follow.Move{Key: follow.Key{Kind: follow.KindActor, ID: id}} }
	var p passedOn
	p.note(0, window, msgTarget{id: "old"}, mv("old"))
	if !p.begin() {
		t.Fatal("a send refused before the seal")
	}
	sealed := make(chan struct{})
	go func() {
		p.seal()
		close(sealed)
	}()
	select {
	case <-sealed:
		t.Fatal("sealed with a send under way")
	case <-time.After(20 * time.Millisecond):
	}
	p.end(window+time.Second, window, true, msgTarget{id: "a"}, mv("a"))
	<-sealed
	if p.begin() {
		t.Fatal("a send allowed after the seal")
	}
	got := p.take()
	if _, ok := got[mv("a").Key]; !ok || len(got) != 1 {
		t.Errorf("taken %v, want only a (old is past the window)", got)
	}
	if p.pending() || len(p.take()) != 0 {
		t.Error("something left after take")
	}
}
