package locstore

import (
	"errors"
	"strings"
	"testing"
)

// The providers' contract suite covers the bounds end to end; this checks
// the field names a user sees and that a valid batch is cheap to validate.
func TestValidateFieldNames(t *testing.T) {
	tests := []struct {
		name  string
		req   WriteRequest
		field string
	}{
		{"empty key in condition 1", WriteRequest{Conditions: []Condition{IfMissing("a"), IfMissing("")}}, "conditions[1].key"},
		{"empty version", WriteRequest{Conditions: []Condition{{Kind: CondVersion, Key: "a"}}}, "conditions[0].version"},
		{"oversize value", WriteRequest{Mutations: []Mutation{Put("a", make([]byte, MaxValueBytes+1))}}, "mutations[0].value"},
		{"duplicate mutation", WriteRequest{Mutations: []Mutation{Put("a", nil), Delete("a")}}, "mutations[1].key"},
		{"nothing", WriteRequest{}, "request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Validate()
			var ae *ArgumentError
			if !errors.As(err, &ae) || !errors.Is(err, ErrArgument) || ae.Field != tc.field {
				t.Fatalf("err = %v, want ArgumentError on %s", err, tc.field)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("message %q does not name %s", err, tc.field)
			}
		})
	}
}

func TestValidateValidBatchAllocations(t *testing.T) {
	req := WriteRequest{
		Conditions: []Condition{IfVersion("a", "1"), IfVersion("b", "2"), IfVersion("c", "3")},
		Mutations:  []Mutation{Put("a", []byte("x")), Put("b", []byte("y")), Put("c", []byte("z"))},
	}
	// Three small maps of distinct keys; no per-item formatting.
	if n := testing.AllocsPerRun(100, func() { _ = req.Validate() }); n > 6 {
		t.Fatalf("Validate of a valid 3-key batch allocates %v times", n)
	}
}
