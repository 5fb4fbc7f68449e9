package mesh

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
)

// Every JSON log record of a node names each key once: the descriptor
// publisher added mesh and rid again to the node's logger, which names
// them already, and an object's lines named its generation "gen", which
// the node's logger uses for its lifecycle generation; strict JSON
// consumers (Elasticsearch among them) reject a record with a repeated
// field (an operator try-out, with --log.format=json).
func TestJSONLogRecordsNameEachKeyOnce(t *testing.T) {
	f := newFixture(t)
	registerTestFactories(t, f.reg, newProbe())
	var logs syncbuf.Buffer
	cfg := fastConfig("jsonlogs")
	n, err := Start(context.Background(), Options{Config: cfg, Factories: f.reg, Location: f.loc, Relocation: f.reloc,
		DiscoveryInterval: 100 * time.Millisecond,
		Logger:            slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	// An object's life logs its generation (object_gen, not the node's gen).
	ctx := ctxT(t, 10*time.Second)
	ref, err := n.Manager().CreateActor(ctx, "logged", testMoverType)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Manager().Destroy(ctx, ref); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a few rounds: publishes, discovery
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	records := 0
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		records++
		if dup := repeatedKey(t, sc.Text()); dup != "" {
			t.Errorf("key %q twice in %s", dup, sc.Text())
		}
	}
	if records == 0 || !strings.Contains(logs.String(), `"object_gen"`) {
		t.Fatalf("no object lines among %d log records: the test checked less than it says", records)
	}
}

// repeatedKey returns a top-level key that line (one JSON object) names
// more than once, or "".
func repeatedKey(t *testing.T, line string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if _, err := dec.Token(); err != nil { // {
		t.Fatalf("not JSON: %s: %v", line, err)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("not JSON: %s: %v", line, err)
		}
		key := tok.(string)
		if seen[key] {
			return key
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("not JSON: %s: %v", line, err)
		}
	}
	return ""
}

// Every line of a node carries mesh, rid, owner and gen once its owner
// lease is acquired (docs/OPERATIONS.md "Log records"). The transport's
// lines ("transport: listening", "transport: peer admitted", …) carried
// rid, mesh and gen but not owner: an operator filtering a node's log by
// its owner id (as the lease lines and ctl topology name it) missed them.
func TestNodeLogLinesWithGenCarryTheOwner(t *testing.T) {
	f := newFixture(t)
	registerTestFactories(t, f.reg, newProbe())
	var logs syncbuf.Buffer
	n, err := Start(context.Background(), Options{Config: fastConfig("ownerlogs"), Factories: f.reg, Location: f.loc, Relocation: f.reloc,
		DiscoveryInterval: 100 * time.Millisecond,
		Logger:            slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	transportLines := 0
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("not JSON: %s: %v", sc.Text(), err)
		}
		if _, ok := rec["gen"]; !ok {
			continue // before the owner lease: no owner, no gen yet
		}
		if msg, _ := rec["msg"].(string); strings.HasPrefix(msg, "transport:") {
			transportLines++
		}
		for _, k := range []string{"mesh", "rid", "owner"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("no %q in %s", k, sc.Text())
			}
		}
	}
	if transportLines == 0 {
		t.Fatalf("no transport lines logged: the test checked less than it says\n%s", logs.String())
	}
}
