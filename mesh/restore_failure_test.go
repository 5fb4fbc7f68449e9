package mesh

import (
	"errors"
	"fmt"
	"testing"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/router"
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
