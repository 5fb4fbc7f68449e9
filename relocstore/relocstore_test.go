package relocstore

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestValidatePutAndRenew: the argument checks every provider's Put and
// Renew run, in their order (a bad reference is reported before a bad
// payload or retention), and the effective retention.
func TestValidatePutAndRenew(t *testing.T) {
	big := make([]byte, MaxPayloadBytes+1)
	longRef := strings.Repeat("r", MaxRefBytes+1)
	cases := []struct {
		name      string
		ref       string
		payload   []byte
		retention time.Duration
		field     string        // "" = valid
		want      time.Duration // effective retention when valid
	}{
		{"valid, default retention", "ref", []byte("x"), 0, "", DefaultRetention},
		{"valid, given retention", "ref", nil, time.Hour, "", time.Hour},
		{"valid, max retention", "ref", nil, MaxRetention, "", MaxRetention},
		{"empty ref", "", nil, 0, "ref", 0},
		{"ref too long", longRef, nil, 0, "ref", 0},
		{"ref not UTF-8", "\xff", nil, 0, "ref", 0},
		{"retention below 1ms", "ref", nil, time.Microsecond, "retention", 0},
		{"retention above max", "ref", nil, MaxRetention + 1, "retention", 0},
		{"bad ref and bad retention: ref first", "", nil, -1, "ref", 0},
	}
	check := func(t *testing.T, what, op string, got time.Duration, err error, field string, want time.Duration) {
		t.Helper()
		if field == "" {
			if err != nil || got != want {
				t.Errorf("%s: %v, %v; want %v", what, got, err, want)
			}
			return
		}
		var ae *ArgumentError
		if !errors.As(err, &ae) || !errors.Is(err, ErrArgument) || ae.Field != field || ae.Op != op {
			t.Errorf("%s: %v; want an ArgumentError of %s on %s", what, err, op, field)
		}
	}
	for _, c := range cases {
		got, err := ValidatePut(c.ref, c.payload, c.retention)
		check(t, "put "+c.name, "put", got, err, c.field, c.want)
		got, err = ValidateRenew(c.ref, c.retention)
		check(t, "renew "+c.name, "renew", got, err, c.field, c.want)
	}
	// The payload is checked after the reference and before the retention.
	for _, c := range []struct {
		name  string
		ref   string
		ret   time.Duration
		field string
	}{
		{"payload too large", "ref", 0, "payload"},
		{"payload too large, bad ref", "", 0, "ref"},
		{"payload too large, bad retention", "ref", -1, "payload"},
	} {
		_, err := ValidatePut(c.ref, big, c.ret)
		check(t, "put "+c.name, "put", 0, err, c.field, 0)
	}
}
