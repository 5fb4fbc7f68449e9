package mesh

import (
	"context"
	"encoding/hex"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"
)

var logMsg = regexp.MustCompile(`msg="([^"]*)"|msg=(\S+)`)

// countPeerEvent counts the log lines whose message says event ("peer
// admitted", "peer down") about the peer with routing id rid.
func countPeerEvent(log string, event string, rid []byte) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		m := logMsg.FindStringSubmatch(line)
		if m == nil || !strings.Contains(m[1]+m[2], event) {
			continue
		}
		if strings.Contains(line, " peer="+hex.EncodeToString(rid)) {
			n++
		}
	}
	return n
}

// Each transport peer event is logged once: the transport logs it, and the
// node adds no second line for the same event.
func TestPeerEventsLoggedOnce(t *testing.T) {
	f := newFixture(t)
	start := func(sink *syncbuf.Buffer) *Node {
		cfg := fastConfig("m")
		cfg.Log.Level = "info"
		log := slog.New(slog.NewTextHandler(sink, &slog.HandlerOptions{Level: slog.LevelInfo}))
		n, err := Start(context.Background(), Options{Config: cfg, Factories: f.reg, Location: f.loc, Relocation: f.reloc,
			DiscoveryInterval: 100 * time.Millisecond, Logger: log})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(func() { _ = n.Close(context.Background()) })
		return n
	}
	var logA, logB syncbuf.Buffer
	a, b := start(&logA), start(&logB)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.WaitPeers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitPeers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "A to see B down", func() bool { return countPeerEvent(logA.String(), "peer down", b.RID()) > 0 })
	// Give a duplicate logged after the first line the time to show.
	time.Sleep(200 * time.Millisecond)
	for _, c := range []struct {
		name  string
		log   string
		event string
		peer  []byte
	}{
		{"A: B admitted", logA.String(), "peer admitted", b.RID()},
		{"B: A admitted", logB.String(), "peer admitted", a.RID()},
		{"A: B down", logA.String(), "peer down", b.RID()},
	} {
		if n := countPeerEvent(c.log, c.event, c.peer); n != 1 {
			t.Errorf("%s: %d log lines, want 1:\n%s", c.name, n, c.log)
		}
	}
}

// Start logs one WARN per store it opens whose Redis settings were set
// while its provider is not redis (config.IgnoredStoreSettings), and none
// for a store passed in Options, whose provider setting it does not use.
func TestStartWarnsOfIgnoredRedisSettingsOfStoresItOpens(t *testing.T) {
	f := newFixture(t)
	cfg := fastConfig("ignored")
	cfg.LocationStore.Redis.Addrs = []string{"redis-a:6379"}
	cfg.RelocationStore.Redis.Addrs = []string{"redis-a:6379"}
	var logs syncbuf.Buffer
	n, err := Start(context.Background(), Options{Config: cfg, Factories: f.reg, Location: f.loc, // Relocation opened from cfg
		DiscoveryInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := logs.String()
	if want := `level=WARN msg="relocation_store: redis settings (addrs) are ignored: provider is memory" store=relocation_store ignored_keys=[addrs]`; !strings.Contains(got, want) {
		t.Errorf("no line %s in\n%s", want, got)
	}
	if strings.Contains(got, `msg="location_store:`) {
		t.Errorf("a WARN about the Location Store passed in Options:\n%s", got)
	}
}
