package mesh

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/record"
)

// Review test, changed with its fix (2026-12-07). config.Validate accepted
// relocation.chunk_size up to 64 MiB (the wire's chunk bound), but
// chunk.Split takes at most chunk.MaxChunkSize (16 MiB), and
// chunk.CheckChunkSize, which exists to refuse such a size at startup, was
// never called: a node started with chunk_size 32 MiB failed every move it
// sourced ("payload not split") — its objects could never move away. Now
// startup refuses it, naming the key, the value and the range; and a node
// at either end of the accepted range (64 KiB..16 MiB) moves its objects.

func TestRestoreChunkSizeRefusedAtStartup(t *testing.T) {
	f := newFixture(t)
	cfg := objConfig("objects")
	cfg.Relocation.ChunkSize = 32 << 20
	n, err := Start(context.Background(), Options{Config: cfg, Factories: f.reg, Location: f.loc, Relocation: f.reloc})
	if err == nil {
		_ = n.Close(context.Background())
		t.Fatal("a node started with relocation.chunk_size 32 MiB, above what chunk.Split takes")
	}
	var ve *config.ValidationError
	if !errors.Is(err, ErrStartup) || !errors.As(err, &ve) {
		t.Fatalf("Start = %v, want ErrStartup wrapping a *config.ValidationError", err)
	}
	lo, hi := config.RelocationChunkRange()
	if lo != 64<<10 || hi != chunk.MaxChunkSize {
		t.Fatalf("accepted range %d..%d, want 65536..%d", lo, hi, chunk.MaxChunkSize)
	}
	if len(ve.Problems) != 1 || ve.Problems[0].Key != "relocation.chunk_size" ||
		!strings.Contains(ve.Problems[0].Message, "must be 65536..16777216 bytes") ||
		!strings.HasSuffix(ve.Problems[0].Message, "got 33554432") {
		t.Fatalf("problems %q, want one for relocation.chunk_size naming 65536..16777216 and the value", ve.Problems)
	}
}

func TestRestoreChunkSizeAcceptedByConfigMoves(t *testing.T) {
	lo, hi := config.RelocationChunkRange()
	for _, size := range []int{lo, hi} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			f := newFixture(t)
			c, _ := failClusterWith(t, f, f.loc, 3, func(i int, cfg *config.Config) {
				clientRole0(i, cfg)
				cfg.Relocation.ChunkSize = size
			})
			ctx := ctxT(t, 60*time.Second)
			const id = "rv-chunksize"
			ref := recorder(t, ctx, c, id, failPreserveType, "a")
			src, dst := movePair(t, c, record.ObjectActor, id)
			res := outcomeOf(t, relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration))
			if res.Outcome != Moved {
				t.Fatalf("a move under relocation.chunk_size=%d (accepted at startup): %v (%s; %s)", size, res.Outcome, res.Reason, res.Detail)
			}
		})
	}
}
