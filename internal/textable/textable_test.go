package textable

import (
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	var b strings.Builder
	err := Write(&b, []string{"A", "LONGER"}, [][]string{{"xyz", "1"}, {Cell("é\x01"), "22"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "A      LONGER\nxyz    1\né\\x01  22\n"
	if b.String() != want {
		t.Fatalf("got\n%q\nwant\n%q", b.String(), want)
	}
}

func TestCell(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"사용자", "사용자"},
		{"tab\there", `tab\there`},
		{"\xff", `\xff`},
	}
	for _, tc := range tests {
		if got := Cell(tc.in); got != tc.want {
			t.Errorf("Cell(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
