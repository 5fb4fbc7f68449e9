package transport

import (
	"errors"
	"math"
	"testing"
)

// TestFrameLimitsAboveTheirMaximumAreRefused: MaxFrameBytes and
// MaxMessageBytes above MaxFrameBytesLimit / MaxMessageBytesLimit are
// refused at construction with a *LimitError matching ErrConfig. Before,
// they were taken: 1<<63 as MaxFrameBytes made the derived message bound
// 2×1<<63 = 0, and MaxUint64 made the CURVE frame bound (plus the box
// overhead) wrap to a few bytes.
func TestFrameLimitsAboveTheirMaximumAreRefused(t *testing.T) {
	for _, c := range []struct {
		name         string
		frame, msg   uint64
		field        string
		value, limit uint64
	}{
		{"frame max uint64", math.MaxUint64, 0, "MaxFrameBytes", math.MaxUint64, MaxFrameBytesLimit},
		{"frame doubled wraps", 1 << 63, 0, "MaxFrameBytes", 1 << 63, MaxFrameBytesLimit},
		{"frame one over", MaxFrameBytesLimit + 1, 0, "MaxFrameBytes", MaxFrameBytesLimit + 1, MaxFrameBytesLimit},
		{"message max uint64", 0, math.MaxUint64, "MaxMessageBytes", math.MaxUint64, MaxMessageBytesLimit},
		{"message one over", 0, MaxMessageBytesLimit + 1, "MaxMessageBytes", MaxMessageBytesLimit + 1, MaxMessageBytesLimit},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig("limits", 1)
			cfg.MaxFrameBytes, cfg.MaxMessageBytes = c.frame, c.msg
			n, err := New(cfg)
			if err == nil {
				_ = n.Close()
				t.Fatalf("New accepted MaxFrameBytes %d, MaxMessageBytes %d", c.frame, c.msg)
			}
			var le *LimitError
			if !errors.As(err, &le) || !errors.Is(err, ErrConfig) {
				t.Fatalf("New: %v; want a *LimitError matching ErrConfig", err)
			}
			if le.Field != c.field || le.Value != c.value || le.Max != c.limit {
				t.Fatalf("LimitError %+v; want field %s, value %d, max %d", *le, c.field, c.value, c.limit)
			}
		})
	}
	// The maxima themselves are taken, the message bound derived from the
	// largest frame bound included.
	cfg := testConfig("limits", 1)
	cfg.MaxFrameBytes = MaxFrameBytesLimit
	c, err := cfg.withDefaults()
	if err != nil {
		t.Fatalf("MaxFrameBytes at its maximum: %v", err)
	}
	if c.MaxMessageBytes != 2*MaxFrameBytesLimit {
		t.Fatalf("derived MaxMessageBytes %d, want %d", c.MaxMessageBytes, 2*MaxFrameBytesLimit)
	}
	cfg.MaxMessageBytes = MaxMessageBytesLimit
	if _, err := cfg.withDefaults(); err != nil {
		t.Fatalf("MaxMessageBytes at its maximum: %v", err)
	}
}
