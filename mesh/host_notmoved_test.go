package mesh

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/mesh/hostmove"
)

// Objects that stay are each logged, but only the first few of one reason
// at WARN: the last server of a mesh draining 8,000 objects to nowhere
// wrote 8,000 WARN lines. The rest go to DEBUG and one WARN counts them.
func TestNotMovedLogIsBoundedPerReason(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var objs []HostObjectResult
	for i := range 50 {
		objs = append(objs, HostObjectResult{Object: hostmove.Object{ID: fmt.Sprintf("a-%d", i)}, Outcome: hostmove.NotStarted, Reason: "drain: no other serving node"})
	}
	objs = append(objs, HostObjectResult{Object: hostmove.Object{ID: "b-1"}, Outcome: hostmove.Failed, Reason: "capacity exhausted"},
		HostObjectResult{Object: hostmove.Object{ID: "b-2"}, Outcome: hostmove.Failed, Reason: "capacity exhausted"})
	// Instance Spots a drain skips, as spec §8 has it: each at DEBUG,
	// counted in one INFO line, never at WARN.
	for i := range 30 {
		objs = append(objs, HostObjectResult{Object: hostmove.Object{ID: fmt.Sprintf("i-%d", i), Spot: true, Instance: true, Unmovable: unmovableInstance},
			Outcome: hostmove.Skipped, Reason: unmovableInstance})
	}
	logNotMoved(log, objs)
	type line struct {
		Level, Msg, Object, Outcome, Reason string
		Count                               int
	}
	var warn, debug, summaries, instanceInfo int
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var l line
		if err := dec.Decode(&l); err != nil {
			t.Fatal(err)
		}
		switch {
		case l.Level == "WARN" && l.Object != "":
			warn++
		case l.Level == "DEBUG" && l.Object != "":
			debug++
		case l.Level == "INFO" && l.Count > 0:
			instanceInfo++
			if l.Count != 30 {
				t.Errorf("Instance Spot summary %+v, want count 30", l)
			}
		case l.Level == "WARN" && l.Count > 0:
			summaries++
			if l.Count != 50-notMovedWarned || l.Outcome != hostmove.NotStarted.String() {
				t.Errorf("summary %+v, want %d more %s", l, 50-notMovedWarned, hostmove.NotStarted)
			}
		}
		if l.Object != "" && l.Level != "DEBUG" && strings.HasPrefix(l.Object, "i-") {
			t.Errorf("Instance Spot logged at %s: %+v", l.Level, l)
		}
		if l.Object != "" && l.Outcome != hostmove.NotStarted.String() && l.Outcome != hostmove.Failed.String() && l.Outcome != hostmove.Skipped.String() {
			t.Errorf("outcome %q logged, want its name", l.Outcome)
		}
	}
	if warn != notMovedWarned+2 || debug != 50-notMovedWarned+30 || summaries != 1 || instanceInfo != 1 {
		t.Errorf("WARN per object %d, DEBUG %d, summaries %d, Instance Spot summaries %d; want %d, %d, 1, 1", warn, debug, summaries, instanceInfo, notMovedWarned+2, 50-notMovedWarned+30)
	}
}

// The same failure of many objects is one reason, although each error
// names its object: a host relocation against a Redis at its maxmemory
// wrote one WARN per object (488 in an operator try-out), each reason
// unique by its object's id.
func TestNotMovedLogCountsAReasonNamingItsObjectOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var objs []HostObjectResult
	for i := range 40 {
		id := fmt.Sprintf("a%d", i)
		objs = append(objs, HostObjectResult{Object: hostmove.Object{ID: id}, Outcome: hostmove.Failed,
			Reason: fmt.Sprintf("mesh: unavailable: actor %q not moved, the store refused the target capacity batch: OOM (relocate %s: read authority of %s)", id, id, id)})
	}
	logNotMoved(log, objs)
	var warn int
	var summary struct {
		Reason string
		Count  int
	}
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var l struct {
			Level, Object, Reason string
			Count                 int
		}
		if err := dec.Decode(&l); err != nil {
			t.Fatal(err)
		}
		switch {
		case l.Level == "WARN" && l.Object != "":
			warn++
		case l.Level == "WARN" && l.Count > 0:
			summary.Reason, summary.Count = l.Reason, l.Count
		}
	}
	want := `mesh: unavailable: actor "<object>" not moved, the store refused the target capacity batch: OOM (relocate <object>: read authority of <object>)`
	if warn != notMovedWarned || summary.Count != 40-notMovedWarned || summary.Reason != want {
		t.Errorf("WARN per object %d, summary %+v; want %d and %d more for %q", warn, summary, notMovedWarned, 40-notMovedWarned, want)
	}
}

func TestReasonClass(t *testing.T) {
	for _, c := range []struct{ reason, id, want string }{
		{`actor "a1" not moved`, "a1", `actor "<object>" not moved`},
		{"relocate a1: read authority of a1: timeout", "a1", "relocate <object>: read authority of <object>: timeout"},
		{"relocate a10: of xa1 and a1", "a1", "relocate a10: of xa1 and <object>"},
		{"no id here", "", "no id here"},
	} {
		if got := reasonClass(c.reason, c.id); got != c.want {
			t.Errorf("reasonClass(%q, %q) = %q, want %q", c.reason, c.id, got, c.want)
		}
	}
}
