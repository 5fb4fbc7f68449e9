package lease

import (
	"errors"
	"testing"
	"time"
)

func TestAdmissionDeadline(t *testing.T) {
	// A millisecond-aligned store time, as Redis TIME floors to ms.
	T := time.UnixMilli(1_700_000_000_000).UTC()
	const (
		s    = time.Second
		ms   = time.Millisecond
		ttl  = DefaultTTL
		marg = DefaultFencingMargin
	)
	tests := []struct {
		name    string
		obs     Observation
		margin  time.Duration
		want    time.Duration
		closed  bool // the gate is closed when the result arrives
		wantErr error
	}{
		{
			name:   "defaults, instant round trip: t0 + TTL - margin",
			obs:    Observation{SentAt: 100 * s, ReceivedAt: 100 * s, StoreNow: T, ExpiresAt: T.Add(ttl)},
			margin: marg, want: 110 * s,
		},
		{
			name:   "defaults, round trip just under the renew timeout: still anchored at t0",
			obs:    Observation{SentAt: 100 * s, ReceivedAt: 102*s + 999*ms, StoreNow: T, ExpiresAt: T.Add(ttl)},
			margin: marg, want: 110 * s,
		},
		{
			name:   "slow round trip of 9s leaves 1s after the answer",
			obs:    Observation{SentAt: 100 * s, ReceivedAt: 109 * s, StoreNow: T, ExpiresAt: T.Add(ttl)},
			margin: marg, want: 110 * s,
		},
		{
			name:   "round trip longer than TTL - margin: closed on arrival",
			obs:    Observation{SentAt: 100 * s, ReceivedAt: 111 * s, StoreNow: T, ExpiresAt: T.Add(ttl)},
			margin: marg, want: 110 * s, closed: true,
		},
		{
			name:   "read of an aging record: only its remaining time counts",
			obs:    Observation{SentAt: 50 * s, ReceivedAt: 50*s + 10*ms, StoreNow: T.Add(8 * s), ExpiresAt: T.Add(ttl)},
			margin: marg, want: 52 * s,
		},
		{
			name:   "margin bigger than remaining: closed, clamped to t0",
			obs:    Observation{SentAt: 50 * s, ReceivedAt: 50 * s, StoreNow: T.Add(12 * s), ExpiresAt: T.Add(ttl)},
			margin: marg, want: 50 * s, closed: true,
		},
		{
			name:   "margin equal to remaining: closed",
			obs:    Observation{SentAt: 50 * s, ReceivedAt: 50 * s, StoreNow: T.Add(10 * s), ExpiresAt: T.Add(ttl)},
			margin: marg, want: 50 * s, closed: true,
		},
		{
			name:   "ExpiresAt == StoreNow: already expired",
			obs:    Observation{SentAt: 7 * s, ReceivedAt: 7 * s, StoreNow: T, ExpiresAt: T},
			margin: marg, want: 7 * s, closed: true,
		},
		{
			name:   "ExpiresAt before StoreNow: already expired",
			obs:    Observation{SentAt: 7 * s, ReceivedAt: 8 * s, StoreNow: T.Add(s), ExpiresAt: T},
			margin: marg, want: 7 * s, closed: true,
		},
		{
			name:   "store clock far from the local clock: only the difference matters",
			obs:    Observation{SentAt: 3 * s, ReceivedAt: 3 * s, StoreNow: time.Date(2091, 1, 1, 0, 0, 0, 0, time.UTC), ExpiresAt: time.Date(2091, 1, 1, 0, 0, 15, 0, time.UTC)},
			margin: marg, want: 13 * s,
		},
		{
			name:   "zero margin (core accepts it; Timing.Validate does not)",
			obs:    Observation{SentAt: 0, ReceivedAt: s, StoreNow: T, ExpiresAt: T.Add(ttl)},
			margin: 0, want: 15 * s,
		},
		{
			name:   "huge remaining saturates instead of overflowing",
			obs:    Observation{SentAt: time.Duration(1 << 62), ReceivedAt: time.Duration(1 << 62), StoreNow: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), ExpiresAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)},
			margin: marg, want: maxDuration,
		},
		{
			name: "t1 before t0 is invalid", wantErr: ErrInvalidObservation,
			obs:    Observation{SentAt: 5 * s, ReceivedAt: 4 * s, StoreNow: T, ExpiresAt: T.Add(ttl)},
			margin: marg,
		},
		{
			name: "no expiry (durable record) is invalid", wantErr: ErrInvalidObservation,
			obs:    Observation{SentAt: 5 * s, ReceivedAt: 5 * s, StoreNow: T},
			margin: marg,
		},
		{
			name: "no StoreNow is invalid", wantErr: ErrInvalidObservation,
			obs:    Observation{SentAt: 5 * s, ReceivedAt: 5 * s, ExpiresAt: T},
			margin: marg,
		},
		{
			name: "negative margin is invalid", wantErr: ErrInvalidObservation,
			obs:    Observation{SentAt: 5 * s, ReceivedAt: 5 * s, StoreNow: T, ExpiresAt: T.Add(ttl)},
			margin: -s,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AdmissionDeadline(tt.obs, tt.margin)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if got != tt.want {
				t.Fatalf("deadline = %v, want %v", got, tt.want)
			}
			if closed := tt.obs.ReceivedAt >= got; closed != tt.closed {
				t.Fatalf("closed on arrival = %v, want %v", closed, tt.closed)
			}
			// Safety property: wherever in [t0, t1] the store read its clock,
			// the store expires the record no earlier than deadline + margin
			// in local time.
			remaining := tt.obs.ExpiresAt.Sub(tt.obs.StoreNow)
			if got == maxDuration || remaining-tt.margin <= 0 {
				return
			}
			for _, at := range []time.Duration{tt.obs.SentAt, (tt.obs.SentAt + tt.obs.ReceivedAt) / 2, tt.obs.ReceivedAt} {
				if storeExpiryLocal := at + remaining; storeExpiryLocal < got+tt.margin {
					t.Fatalf("store read at %v expires at local %v, before deadline %v + margin", at, storeExpiryLocal, got)
				}
			}
		})
	}
}

func TestWriteExpiry(t *testing.T) {
	T := time.UnixMilli(1_700_000_000_000)
	tests := []struct {
		name     string
		storeNow time.Time
		ttl      time.Duration
		want     time.Time
	}{
		{"aligned store time", T, 15 * time.Second, T.Add(15 * time.Second)},
		{"sub-millisecond store time is floored", T.Add(700 * time.Microsecond), 15 * time.Second, T.Add(15 * time.Second)},
		{"just under the next millisecond", T.Add(999_999 * time.Nanosecond), time.Second, T.Add(time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := WriteExpiry(tt.storeNow, tt.ttl)
			if !got.Equal(tt.want) {
				t.Fatalf("WriteExpiry = %v, want %v", got, tt.want)
			}
			if got.After(tt.storeNow.Add(tt.ttl)) {
				t.Fatalf("WriteExpiry %v later than StoreNow + TTL", got)
			}
		})
	}
}

func TestTimingValidate(t *testing.T) {
	def := DefaultTiming()
	with := func(f func(*Timing)) Timing { t := def; f(&t); return t }
	tests := []struct {
		name   string
		timing Timing
		fields []string // expected TimingError fields, in order; nil = valid
	}{
		{"defaults", def, nil},
		{"zero renew interval", with(func(t *Timing) { t.RenewInterval = 0 }), []string{"renewInterval"}},
		{"negative TTL", with(func(t *Timing) { t.TTL = -time.Second }), []string{"ttl"}},
		{"zero renew timeout", with(func(t *Timing) { t.RenewTimeout = 0 }), []string{"renewTimeout"}},
		{"zero fencing margin", with(func(t *Timing) { t.FencingMargin = 0 }), []string{"fencingMargin"}},
		{"all zero: every field reported", Timing{}, []string{"renewInterval", "ttl", "renewTimeout", "fencingMargin"}},
		{"relationship at equality is invalid (strict <)", with(func(t *Timing) { t.RenewInterval = 7 * time.Second }), []string{"relationship"}},
		{"relationship one nanosecond under is valid", with(func(t *Timing) { t.RenewInterval = 7*time.Second - time.Nanosecond }), nil},
		{"margin as large as TTL", with(func(t *Timing) { t.FencingMargin = 15 * time.Second }), []string{"relationship"}},
		{"long timeout breaks the relationship", with(func(t *Timing) { t.RenewTimeout = 6 * time.Second }), []string{"relationship"}},
		{"sub-millisecond TTL", with(func(t *Timing) { t.TTL = 15*time.Second + time.Microsecond }), []string{"ttl"}},
		{"TTL above the store retention bound", Timing{RenewInterval: time.Second, TTL: 200 * 365 * 24 * time.Hour, RenewTimeout: time.Second, FencingMargin: time.Second}, []string{"ttl"}},
		{"overflowing interval + timeout", Timing{RenewInterval: maxDuration, TTL: 15 * time.Second, RenewTimeout: maxDuration, FencingMargin: time.Second}, []string{"relationship"}},
		{"small valid timing", Timing{RenewInterval: 40 * time.Millisecond, TTL: 300 * time.Millisecond, RenewTimeout: 30 * time.Millisecond, FencingMargin: 150 * time.Millisecond}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.timing.Validate()
			if tt.fields == nil {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidTiming) {
				t.Fatalf("error %v does not match ErrInvalidTiming", err)
			}
			joined, ok := err.(interface{ Unwrap() []error })
			if !ok {
				t.Fatalf("error %T is not a joined error", err)
			}
			var got []string
			for _, e := range joined.Unwrap() {
				var te *TimingError
				if !errors.As(e, &te) {
					t.Fatalf("element %v is not a *TimingError", e)
				}
				got = append(got, te.Field)
			}
			if len(got) != len(tt.fields) {
				t.Fatalf("fields = %v, want %v", got, tt.fields)
			}
			for i := range got {
				if got[i] != tt.fields[i] {
					t.Fatalf("fields = %v, want %v", got, tt.fields)
				}
			}
		})
	}
}
