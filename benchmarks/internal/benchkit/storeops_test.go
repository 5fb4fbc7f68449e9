package benchkit

import (
	"context"
	"testing"

	locmemory "github.com/meshnode/meshnode/locstore/memory"
)

// A ceiling replays exactly the calls it was given: read calls and the
// rows they read, batches, the rows they put and the rows they only
// condition — counted by the same CountingStore that counts the subject.
func TestStoreOpsReplayTheirShape(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  StoreOps
		want Counts // per Run
	}{
		{"plain", StoreOps{Reads: 7, Writes: 5, Rows: 11},
			Counts{Reads: 7, ReadKeys: 7, Writes: 5, WriteKeys: 11}},
		{"plain, fewer reads than rows", StoreOps{Reads: 1, Writes: 3, Rows: 9},
			Counts{Reads: 3, ReadKeys: 3, Writes: 3, WriteKeys: 9}},
		{"host move shape", StoreOps{Reads: 7, Writes: 5, Rows: 11, ReadKeys: 20, CondKeys: 12},
			Counts{Reads: 7, ReadKeys: 20, Writes: 5, WriteKeys: 11, CondKeys: 12}},
		{"creation shape", StoreOps{Reads: 2, Writes: 2, Rows: 7, ReadKeys: 9, CondKeys: 4},
			Counts{Reads: 2, ReadKeys: 9, Writes: 2, WriteKeys: 7, CondKeys: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, err := locmemory.New()
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			s := &CountingStore{Store: mem}
			ctx := context.Background()
			value := make([]byte, StoreValueBytes)
			if err := tc.ops.Seed(ctx, mem, "obj", value); err != nil {
				t.Fatal(err)
			}
			for run := 1; run <= 3; run++ { // later runs condition on the versions the earlier ones left
				before := countsOf(s)
				if err := tc.ops.Run(ctx, s, "obj", value); err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				got := countsOf(s).Sub(before)
				got.Time = 0
				if got != tc.want {
					t.Fatalf("run %d counted %+v, want %+v", run, got, tc.want)
				}
			}
			if got := tc.ops.Plain(); got.ReadKeys != 0 || got.CondKeys != 0 || got.Reads != tc.ops.Reads {
				t.Fatalf("Plain() = %+v", got)
			}
		})
	}
}

func countsOf(s *CountingStore) Counts {
	c := &Cluster{Stores: []*CountingStore{s}}
	return c.Counts()
}
