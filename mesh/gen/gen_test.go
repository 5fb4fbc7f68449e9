package gen

import (
	"errors"
	"testing"
)

func TestNext(t *testing.T) {
	tests := []struct {
		name    string
		current uint64
		present bool
		want    uint64
		wantErr error
	}{
		{"absent counter issues 1", 0, false, 1, nil},
		{"absent counter with a value is a caller bug", 7, false, 0, ErrInvalidCounter},
		{"stored 0 is never valid", 0, true, 0, ErrInvalidCounter},
		{"first increment", 1, true, 2, nil},
		{"ordinary increment", 41, true, 42, nil},
		{"last issuable value is 2^63-2", 1<<63 - 3, true, 1<<63 - 2, nil},
		{"counter at 2^63-2: next would be the sentinel", 1<<63 - 2, true, 0, ErrGenerationExhausted},
		{"counter at the sentinel 2^63-1", 1<<63 - 1, true, 0, ErrGenerationExhausted},
		{"counter beyond the stored range", 1 << 63, true, 0, ErrInvalidCounter},
		{"counter at max uint64", ^uint64(0), true, 0, ErrInvalidCounter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Next(tt.current, tt.present)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Next(%d, %v) error = %v, want %v", tt.current, tt.present, err, tt.wantErr)
				}
				if got != 0 {
					t.Fatalf("Next(%d, %v) = %d with an error, want 0", tt.current, tt.present, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Next(%d, %v) unexpected error %v", tt.current, tt.present, err)
			}
			if got != tt.want {
				t.Fatalf("Next(%d, %v) = %d, want %d", tt.current, tt.present, got, tt.want)
			}
			if got == Sentinel || got == 0 || !Valid(got) {
				t.Fatalf("Next issued %d outside 1..2^63-2", got)
			}
		})
	}
}

func TestExhaustionIsStable(t *testing.T) {
	// The same counter gives the same answer however often it is asked: the
	// planner has no hidden state, so a retry cannot succeed.
	for i := 0; i < 3; i++ {
		if _, err := Next(MaxIssued, true); !errors.Is(err, ErrGenerationExhausted) {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
}

func TestConstants(t *testing.T) {
	if Sentinel != 9223372036854775807 {
		t.Fatalf("Sentinel = %d", Sentinel)
	}
	if MaxIssued != 9223372036854775806 {
		t.Fatalf("MaxIssued = %d", MaxIssued)
	}
}

func TestValid(t *testing.T) {
	tests := []struct {
		g    uint64
		want bool
	}{
		{0, false}, {1, true}, {MaxIssued, true}, {Sentinel, false}, {1 << 63, false},
	}
	for _, tt := range tests {
		if got := Valid(tt.g); got != tt.want {
			t.Errorf("Valid(%d) = %v, want %v", tt.g, got, tt.want)
		}
	}
}
