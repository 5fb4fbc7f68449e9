package mesh

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

// The record 53 failure of each chunk registry error, as
// docs/RESTORE-PAYLOAD.md §9 tables it; the errors are wrapped as the
// registry wraps them (an ended binding's Begin wraps its earlier failure).
func TestRestoreFailureOfRegistryErrors(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("binding x already failed: %w", err) }
	for _, tc := range []struct {
		err  error
		want router.RelocationFailure
	}{
		{chunk.ErrChecksum, router.RelocationFailureChecksumMismatch},
		{wrap(chunk.ErrChecksum), router.RelocationFailureChecksumMismatch},
		{chunk.ErrLength, router.RelocationFailureLengthMismatch},
		{fmt.Errorf("%w: chunk 0 has 9 bytes, 10 expected", chunk.ErrLength), router.RelocationFailureLengthMismatch},
		{chunk.ErrOutOfOrder, router.RelocationFailureLengthMismatch},
		{chunk.ErrConflict, router.RelocationFailureConflict},
		{wrap(chunk.ErrConflict), router.RelocationFailureConflict},
		{chunk.ErrTooLarge, router.RelocationFailureCapacity},
		{chunk.ErrCapacity, router.RelocationFailureCapacity},
		{chunk.ErrAborted, router.RelocationFailureCancelled},
		{chunk.ErrSuperseded, router.RelocationFailureCancelled},
		{&chunk.FormatError{Kind: chunk.ErrTruncated, Field: "header"}, router.RelocationFailureRestoreFailed},
		// Kinds the table does not name: as every refusal was before.
		{chunk.ErrInvalid, router.RelocationFailureLengthMismatch},
		{errors.New("other"), router.RelocationFailureLengthMismatch},
	} {
		if got := restoreFailure(tc.err); got != tc.want {
			t.Errorf("restoreFailure(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// checkSource passes a record its binding's source sent and discards, with
// a typed error and a count, one that any other node run sent — another
// node, or the source's node in another lifecycle generation.
func TestRestoreCheckSource(t *testing.T) {
	o := &objects{log: slog.New(slog.DiscardHandler), restoreForeignLog: newRecordLog(func() time.Duration { return 0 })}
	b := chunk.Binding{Relocation: router.RelocationID{High: 1, Low: 2}, TargetAttempt: 1,
		Source: chunk.SourceFence{OwnerID: "o", LeaseGeneration: 3, NodeRID: "\x01\x02", NodeGeneration: 4}}
	if err := o.checkSource(router.CmdRelocationState, transport.PeerInfo{RID: []byte{1, 2}, LifecycleGeneration: 4}, b); err != nil {
		t.Fatalf("from the source: %v", err)
	}
	for i, from := range []transport.PeerInfo{{RID: []byte{1, 3}, LifecycleGeneration: 4}, {RID: []byte{1, 2}, LifecycleGeneration: 5}} {
		err := o.checkSource(router.CmdRelocationCancel, from, b)
		var typed *notFromSourceError
		if !errors.Is(err, errNotFromSource) || !errors.As(err, &typed) || typed.cmd != router.CmdRelocationCancel {
			t.Errorf("from %x/%d: %v", []byte(from.RID), from.LifecycleGeneration, err)
		}
		if n := o.stats.restoreForeign.Load(); n != uint64(i+1) {
			t.Errorf("counted %d, want %d", n, i+1)
		}
	}
}
