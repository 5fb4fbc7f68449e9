package hostmove

import (
	"errors"
	"fmt"
	"testing"
)

func objs(ids ...string) []Object {
	out := make([]Object, len(ids))
	for i, id := range ids {
		out[i] = Object{ID: id, Generation: 1}
	}
	return out
}

// drain starts everything it may and returns the ids handed out.
func drain(c *Command) []string {
	var ids []string
	for {
		o, ok := c.Next()
		if !ok {
			return ids
		}
		ids = append(ids, o.ID)
	}
}

func TestConcurrencyBoundAndOrder(t *testing.T) {
	c := New(objs("a", "b", "c", "d"), 2)
	if got := drain(c); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("first starts %v, want [a b]", got)
	}
	if err := c.Finish(Result{Object: Object{ID: "a"}, Outcome: Moved, Bytes: 10}); err != nil {
		t.Fatal(err)
	}
	if got := drain(c); len(got) != 1 || got[0] != "c" {
		t.Fatalf("after one finished: %v, want [c]", got)
	}
	p := c.Progress()
	if p.Running != 2 || p.Pending != 1 || p.Moved != 1 || p.Bytes != 10 || p.End != Open || p.Remaining() != 3 {
		t.Fatalf("progress %+v", p)
	}
}

func TestEnds(t *testing.T) {
	tests := []struct {
		name    string
		objs    []Object
		run     func(c *Command)
		want    End
		counts  Progress
		outcome map[string]Outcome
	}{
		{"nothing to move: completed at once", nil, func(*Command) {}, Completed, Progress{}, nil},
		{"only DisableRelocation: skipped, completed", []Object{{ID: "x", Disabled: true}}, func(*Command) {}, Completed,
			Progress{Total: 1, Skipped: 1}, map[string]Outcome{"x": Skipped}},
		{"unmovable: skipped with its reason, the rest moves", []Object{{ID: "i", Spot: true, Unmovable: "an Instance Spot"}, {ID: "a"}},
			func(c *Command) {
				drain(c)
				_ = c.Finish(Result{Object: Object{ID: "a"}, Outcome: Moved})
			}, Completed, Progress{Total: 2, Moved: 1, Skipped: 1}, map[string]Outcome{"i": Skipped, "a": Moved}},
		{"every move ends: completed", objs("a", "b"), func(c *Command) {
			drain(c)
			_ = c.Finish(Result{Object: Object{ID: "a"}, Outcome: Moved})
			_ = c.Finish(Result{Object: Object{ID: "b"}, Outcome: Failed, Reason: "capacity"})
		}, Completed, Progress{Total: 2, Moved: 1, Failed: 1}, map[string]Outcome{"a": Moved, "b": Failed}},
		{"deadline with pending objects: force-stopped once the running end", objs("a", "b", "c"), func(c *Command) {
			c.Next()
			c.Stop()
			if c.Progress().End != Open {
				panic("ended while a move runs")
			}
			_ = c.Finish(Result{Object: Object{ID: "a"}, Outcome: Moved})
		}, ForceStopped, Progress{Total: 3, Moved: 1, NotStarted: 2}, map[string]Outcome{"a": Moved, "b": NotStarted, "c": NotStarted}},
		{"deadline after every start: force-stopped", objs("a"), func(c *Command) {
			c.Next()
			c.Stop()
			_ = c.Finish(Result{Object: Object{ID: "a"}, Outcome: Failed, Reason: "deadline"})
		}, ForceStopped, Progress{Total: 1, Failed: 1}, map[string]Outcome{"a": Failed}},
		{"deadline after the end changes nothing", objs("a"), func(c *Command) {
			c.Next()
			_ = c.Finish(Result{Object: Object{ID: "a"}, Outcome: Gone})
			c.Stop()
		}, Completed, Progress{Total: 1, Gone: 1}, map[string]Outcome{"a": Gone}},
		{"moves still in flight past the deadline's grace: abandoned as failed, force-stopped", objs("a", "b", "c"), func(c *Command) {
			drain(c)
			_ = c.Finish(Result{Object: Object{ID: "a"}, Outcome: Moved})
			c.Stop()
			c.Abandon("in flight at the deadline")
			if err := c.Finish(Result{Object: Object{ID: "b"}, Outcome: Moved}); !errors.Is(err, ErrNotRunning) {
				panic(fmt.Sprintf("a move ending after the command: %v", err))
			}
		}, ForceStopped, Progress{Total: 3, Moved: 1, Failed: 2}, map[string]Outcome{"a": Moved, "b": Failed, "c": Failed}},
		{"abandon before the deadline changes nothing", objs("a"), func(c *Command) {
			c.Next()
			c.Abandon("too early")
			_ = c.Finish(Result{Object: Object{ID: "a"}, Outcome: Moved})
		}, Completed, Progress{Total: 1, Moved: 1}, map[string]Outcome{"a": Moved}},
		{"abandon after the end changes nothing", objs("a"), func(c *Command) {
			c.Next()
			c.Stop()
			_ = c.Finish(Result{Object: Object{ID: "a"}, Outcome: Moved})
			c.Abandon("late")
		}, ForceStopped, Progress{Total: 1, Moved: 1}, map[string]Outcome{"a": Moved}},
		{"a duplicate object is counted once", []Object{{ID: "a"}, {ID: "a"}, {ID: "a", Spot: true}}, func(c *Command) {
			drain(c)
			_ = c.Finish(Result{Object: Object{ID: "a"}, Outcome: Moved})
			_ = c.Finish(Result{Object: Object{ID: "a", Spot: true}, Outcome: Moved})
		}, Completed, Progress{Total: 2, Moved: 2}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.objs, 4)
			tc.run(c)
			p := c.Progress()
			tc.counts.End = tc.want
			if p != tc.counts {
				t.Fatalf("progress %+v, want %+v", p, tc.counts)
			}
			for _, r := range c.Results() {
				if w, ok := tc.outcome[r.Object.ID]; ok && r.Outcome != w {
					t.Errorf("%s: %s, want %s", r.Object.ID, r.Outcome, w)
				}
			}
		})
	}
}

func TestFinishRefusals(t *testing.T) {
	c := New(objs("a", "b"), 1)
	c.Next()
	for _, tc := range []struct {
		name string
		r    Result
		want error
	}{
		{"unknown object", Result{Object: Object{ID: "z"}, Outcome: Moved}, ErrUnknown},
		{"not started", Result{Object: Object{ID: "b"}, Outcome: Moved}, ErrNotRunning},
		{"not a final outcome", Result{Object: Object{ID: "a"}, Outcome: Running}, ErrNotFinal},
		{"not started is the deadline's", Result{Object: Object{ID: "a"}, Outcome: NotStarted}, ErrNotFinal},
	} {
		if err := c.Finish(tc.r); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := c.Finish(Result{Object: Object{ID: "a"}, Outcome: Moved}); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(Result{Object: Object{ID: "a"}, Outcome: Moved}); !errors.Is(err, ErrNotRunning) {
		t.Errorf("finished twice: %v", err)
	}
}

func TestNames(t *testing.T) {
	for o := Pending; o <= NotStarted; o++ {
		if o.String()[0] == 'O' {
			t.Errorf("outcome %d unnamed", o)
		}
	}
	for e := Open; e <= ForceStopped; e++ {
		if e.String()[0] == 'E' {
			t.Errorf("end %d unnamed", e)
		}
	}
}

// An open list (NewOpen) moves what it has while more may come: the
// command does not end before Seal, whatever has finished; Add lists only
// keys it does not cover yet, whatever their outcome; a closed list
// refuses more; the deadline (Stop) closes it.
func TestOpenList(t *testing.T) {
	finish := func(t *testing.T, c *Command, id string, out Outcome) {
		t.Helper()
		if err := c.Finish(Result{Object: Object{ID: id}, Outcome: out}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		run    func(t *testing.T, c *Command) // on NewOpen(objs("a"), 4)
		end    End
		counts Progress
	}{
		{"everything listed finished: still open", func(t *testing.T, c *Command) {
			drain(c)
			finish(t, c, "a", Moved)
		}, Open, Progress{Total: 1, Moved: 1}},
		{"sealed after: completed", func(t *testing.T, c *Command) {
			drain(c)
			finish(t, c, "a", Moved)
			c.Seal()
		}, Completed, Progress{Total: 1, Moved: 1}},
		{"an arrival added and moved, then sealed", func(t *testing.T, c *Command) {
			drain(c)
			if n, err := c.Add(objs("a", "late")); n != 1 || err != nil {
				t.Fatalf("Add: %d, %v; want 1 added (a is listed already)", n, err)
			}
			if got := drain(c); len(got) != 1 || got[0] != "late" {
				t.Fatalf("started %v, want [late]", got)
			}
			finish(t, c, "a", Failed)
			finish(t, c, "late", Moved)
			if n, _ := c.Add(objs("a", "late")); n != 0 {
				t.Fatalf("re-listing the failed and the moved added %d", n)
			}
			c.Seal()
		}, Completed, Progress{Total: 2, Moved: 1, Failed: 1}},
		{"sealed while moves run: ends when they do", func(t *testing.T, c *Command) {
			drain(c)
			c.Seal()
			if c.Progress().End != Open {
				t.Fatal("ended with a move running")
			}
			finish(t, c, "a", Gone)
		}, Completed, Progress{Total: 1, Gone: 1}},
		{"a closed list refuses more", func(t *testing.T, c *Command) {
			c.Seal()
			if n, err := c.Add(objs("late")); n != 0 || !errors.Is(err, ErrSealed) {
				t.Fatalf("Add after Seal: %d, %v", n, err)
			}
			drain(c)
			finish(t, c, "a", Moved)
		}, Completed, Progress{Total: 1, Moved: 1}},
		{"the deadline closes the list", func(t *testing.T, c *Command) {
			c.Stop()
			if !c.Sealed() {
				t.Fatal("Stop left the list open")
			}
			if _, err := c.Add(objs("late")); !errors.Is(err, ErrSealed) {
				t.Fatalf("Add after Stop: %v", err)
			}
		}, ForceStopped, Progress{Total: 1, NotStarted: 1}},
		{"a disabled arrival is skipped", func(t *testing.T, c *Command) {
			drain(c)
			finish(t, c, "a", Moved)
			if n, _ := c.Add([]Object{{ID: "d", Disabled: true}}); n != 1 {
				t.Fatal("not added")
			}
			c.Seal()
		}, Completed, Progress{Total: 2, Moved: 1, Skipped: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewOpen(objs("a"), 4)
			tc.run(t, c)
			p := c.Progress()
			want := tc.counts
			want.End = tc.end
			if p != want {
				t.Fatalf("progress %+v, want %+v", p, want)
			}
		})
	}
}

// Decline ends a command that moves nothing Completed, each object
// NotStarted with its reason; StopFor ends one ForceStopped with its own
// reason, and a later Stop or Decline changes neither.
func TestDeclineAndStopFor(t *testing.T) {
	c := New(append(objs("a", "b"), Object{ID: "d", Generation: 1, Disabled: true}), 2)
	c.Decline("no other serving node")
	if p := c.Progress(); p.End != Completed || p.NotStarted != 2 || p.Skipped != 1 {
		t.Fatalf("declined: %+v, want completed with 2 not started", p)
	}
	if _, ok := c.Next(); ok {
		t.Fatal("a declined command handed a move out")
	}
	c.Stop()
	for _, r := range c.Results() {
		if r.Outcome == NotStarted && r.Reason != "no other serving node" {
			t.Fatalf("%s: reason %q", r.Object.ID, r.Reason)
		}
	}
	if p := c.Progress(); p.End != Completed {
		t.Fatalf("a Stop after Decline changed the end: %s", p.End)
	}

	c = New(objs("a", "b", "c"), 1)
	if _, ok := c.Next(); !ok {
		t.Fatal("nothing started")
	}
	c.StopFor("the node stopped")
	c.Stop()
	c.Decline("x")
	if p := c.Progress(); p.End != Open || p.NotStarted != 2 || p.Running != 1 {
		t.Fatalf("stopped for the node: %+v, want open with 2 not started and 1 running", p)
	}
	if err := c.Finish(Result{Object: Object{ID: "a"}, Outcome: Failed, Reason: "x"}); err != nil {
		t.Fatal(err)
	}
	if p := c.Progress(); p.End != ForceStopped {
		t.Fatalf("end %s, want forceStopped", p.End)
	}
	for _, r := range c.Results()[1:] {
		if r.Reason != "the node stopped" {
			t.Fatalf("%s: reason %q", r.Object.ID, r.Reason)
		}
	}
}
