package mesh

import (
	"context"
	"encoding/hex"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/spot"
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
	got := startStopLog(t, Options{Config: cfg, Factories: f.reg, Location: f.loc}) // Relocation opened from cfg
	if want := `level=WARN msg="relocation_store: redis settings (addrs) are ignored: provider is memory" store=relocation_store ignored_keys=[addrs]`; !strings.Contains(got, want) {
		t.Errorf("no line %s in\n%s", want, got)
	}
	if strings.Contains(got, `msg="location_store:`) {
		t.Errorf("a WARN about the Location Store passed in Options:\n%s", got)
	}
}

// Start logs one WARN when admin.token is set and admin.listen is empty:
// the token is used by nothing, and the node runs without the listener an
// operator who set it most likely wanted (accepted silently before). None
// with both set, or with neither.
func TestStartWarnsOfAdminTokenWithoutListener(t *testing.T) {
	f := newFixture(t)
	const warn = "admin.token is set but admin.listen is empty"
	for _, tc := range []struct {
		name          string
		listen, token string
		want          bool
	}{
		{"token alone", "", "0123456789abcdef0123", true},
		{"token and listener", "127.0.0.1:0", "0123456789abcdef0123", false},
		{"neither", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fastConfig("admintoken")
			cfg.Admin.Listen, cfg.Admin.Token = tc.listen, tc.token
			got := startStopLog(t, Options{Config: cfg, Factories: f.reg, Location: f.loc, Relocation: f.reloc})
			if n := strings.Count(got, `level=WARN msg="`+warn); n != map[bool]int{true: 1}[tc.want] {
				t.Errorf("%d WARN lines %q, want %v:\n%s", n, warn, tc.want, got)
			}
			if strings.Contains(got, tc.token) && tc.token != "" {
				t.Errorf("the log shows the token:\n%s", got)
			}
		})
	}
}

// startStopLog starts a node with opts (a discovery round every 100 ms,
// logging into a buffer), closes it, and returns what it logged.
func startStopLog(t *testing.T, opts Options) string {
	t.Helper()
	var logs syncbuf.Buffer
	opts.DiscoveryInterval, opts.Logger = 100*time.Millisecond, slog.New(slog.NewTextHandler(&logs, nil))
	n, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return logs.String()
}

// An Instance Spot factory with a relocation policy other than Disabled
// gets one WARN at start naming its type: the policy is never used (an
// Instance Spot never moves), which an application expecting its state to
// move would not otherwise learn (developer try-out, 2026-12-08).
func TestStartWarnsOfAnInstanceSpotPolicyNeverUsed(t *testing.T) {
	const warn = "factory: an Instance Spot never moves"
	for _, tc := range []struct {
		name   string
		policy spot.Policy
		want   int
	}{
		{"recreate", spot.PolicyRecreate, 1},
		{"preserve state", spot.PolicyPreserveState, 1},
		{"disabled", spot.PolicyDisabled, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			fac := spot.Factory{StableType: "test.inbox", Kind: spot.KindInstanceSpot, Policy: tc.policy,
				New: func(context.Context, spot.CreateRequest) (spot.Handler, error) { return answeringObj{}, nil }}
			if tc.policy == spot.PolicyPreserveState {
				fac.Snapshot = blobSnapshot{}
			}
			if err := f.reg.Register(fac); err != nil {
				t.Fatal(err)
			}
			got := startStopLog(t, Options{Config: fastConfig("instancepolicy"), Factories: f.reg, Location: f.loc, Relocation: f.reloc})
			if n := strings.Count(got, `level=WARN msg="`+warn); n != tc.want {
				t.Errorf("%d WARN lines %q, want %d:\n%s", n, warn, tc.want, got)
			}
			if tc.want > 0 && !strings.Contains(got, "stable_type=test.inbox") {
				t.Errorf("the WARN does not name the type:\n%s", got)
			}
		})
	}
}
