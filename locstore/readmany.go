package locstore

import (
	"context"
	"fmt"
	"strconv"
)

// MaxReadKeys bounds one ReadMany call.
const MaxReadKeys = 64

// MultiReader is an optional extension of Store: several keys observed in
// one call, at one point in time. The framework reads a snapshot of a few
// rows for most decisions (an authority row, the leases it names, the
// counters it moves); one call instead of one per row saves the per-call
// cost — a network round trip and a script run on Redis, which is what
// bounds creations and moves per second (issues 11 and 15) — and, because
// the rows are observed together, no batch can apply between them.
//
// ReadMany returns one ReadResult per key, in keys' order (a key given twice
// is answered twice), every result with the same StoreNow; absent or
// expired keys are Found: false. keys must hold 1..MaxReadKeys valid keys
// (an *ArgumentError otherwise, before touching storage). A provider failure
// fails the whole call.
//
// This is a project extension of the shared STORE-SPI.md (docs/store-redis.md
// §ReadMany): a Store without it is read one key at a time through the
// package function ReadMany.
type MultiReader interface {
	ReadMany(ctx context.Context, keys []string) ([]ReadResult, error)
}

// ValidateReadKeys checks a ReadMany key list against the bounds.
func ValidateReadKeys(op string, keys []string) error {
	if len(keys) == 0 || len(keys) > MaxReadKeys {
		return &ArgumentError{Op: op, Field: "keys", Reason: fmt.Sprintf("%d keys, want 1..%d", len(keys), MaxReadKeys)}
	}
	for i, k := range keys {
		if err := keyError(op, k, func() string { return "keys[" + strconv.Itoa(i) + "]" }); err != nil {
			return err
		}
	}
	return nil
}

// ReadMany reads keys from s: in one call when s is a MultiReader, else one
// Read after the other in keys' order (so a caller that orders its keys for
// a torn-read argument keeps that order). Results are in keys' order.
func ReadMany(ctx context.Context, s Store, keys []string) ([]ReadResult, error) {
	if m, ok := s.(MultiReader); ok {
		return m.ReadMany(ctx, keys)
	}
	if err := ValidateReadKeys("readMany", keys); err != nil {
		return nil, err
	}
	out := make([]ReadResult, len(keys))
	for i, k := range keys {
		rr, err := s.Read(ctx, k)
		if err != nil {
			return nil, err
		}
		out[i] = rr
	}
	return out, nil
}
