package record

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func journalKey(t *testing.T, i int) string {
	t.Helper()
	k, err := MeshNodeKey("m", []byte{byte(i >> 8), byte(i)})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestDescriptorJournalAppend(t *testing.T) {
	a, b := journalKey(t, 1), journalKey(t, 2)
	var j DescriptorJournal
	j = j.Append(5, a).Append(6, b).Append(7, a)
	if j.Last() != 7 || len(j.Changes) != 3 {
		t.Fatalf("journal %+v", j)
	}
	cases := []struct {
		since   Generation
		keys    []string
		covered bool
	}{
		{7, nil, true},
		{6, []string{a}, true},
		{5, []string{b, a}, true},
		{4, []string{a, b}, true}, // a counted once, in first-change order
		{3, nil, false},           // change 4 is not in the journal
		{9, nil, true},
	}
	for _, c := range cases {
		keys, covered := j.Since(c.since)
		if covered != c.covered || fmt.Sprint(keys) != fmt.Sprint(c.keys) {
			t.Errorf("Since(%d) = %v %v, want %v %v", c.since, keys, covered, c.keys, c.covered)
		}
	}
	if _, covered := (DescriptorJournal{}).Since(0); covered {
		t.Error("an empty journal covers nothing")
	}
	// A gap (an older writer bumped the counter alone) starts over.
	g := j.Append(9, b)
	if len(g.Changes) != 1 || g.Changes[0].N != 9 {
		t.Fatalf("after a gap: %+v", g)
	}
	if _, covered := g.Since(7); covered {
		t.Error("a journal after a gap must not cover the missing change")
	}
	// The bound keeps the last MaxJournalEntries, and Append never changes
	// its receiver.
	var long DescriptorJournal
	for n := 1; n <= MaxJournalEntries+10; n++ {
		long = long.Append(Generation(n), journalKey(t, n))
	}
	if len(long.Changes) != MaxJournalEntries || long.Changes[0].N != 11 || long.Last() != MaxJournalEntries+10 {
		t.Fatalf("bounded journal: first %d last %d len %d", long.Changes[0].N, long.Last(), len(long.Changes))
	}
	if len(j.Changes) != 3 {
		t.Fatal("Append changed its receiver")
	}
}

func TestDescriptorJournalCodec(t *testing.T) {
	a := journalKey(t, 1)
	j := DescriptorJournal{}.Append(41, a).Append(42, journalKey(t, 2))
	v, err := j.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(v), `{"changes":[{"key":"`+a+`","n":"41"}`) || !strings.HasSuffix(string(v), `],"recordVersion":1}`) {
		t.Fatalf("encoding %s", v)
	}
	back, err := DecodeDescriptorJournal(v)
	if err != nil || fmt.Sprint(back) != fmt.Sprint(j) {
		t.Fatalf("round trip: %v %+v", err, back)
	}
	if err := CheckCanonical(KindDescriptorJournal, v); err != nil {
		t.Fatal(err)
	}
	empty, err := DescriptorJournal{}.Encode()
	if err != nil || string(empty) != `{"changes":[],"recordVersion":1}` {
		t.Fatalf("empty: %s %v", empty, err)
	}

	bad := []struct {
		name, value string
		want        error
	}{
		{"not consecutive", `{"changes":[{"key":"` + a + `","n":"1"},{"key":"` + a + `","n":"3"}],"recordVersion":1}`, ErrInvalidField},
		{"zero change", `{"changes":[{"key":"` + a + `","n":"0"}],"recordVersion":1}`, ErrInvalidField},
		{"not a descriptor key", `{"changes":[{"key":"authority:00","n":"1"}],"recordVersion":1}`, ErrInvalidField},
		{"upper-case digest", `{"changes":[{"key":"` + strings.ToUpper(a) + `","n":"1"}],"recordVersion":1}`, ErrInvalidField},
		{"number, not string", `{"changes":[{"key":"` + a + `","n":1}],"recordVersion":1}`, ErrInvalidField},
		{"unknown member", `{"changes":[],"extra":1,"recordVersion":1}`, ErrInvalidField},
		{"other version", `{"changes":[],"recordVersion":2}`, ErrUnknownVersion},
		{"not JSON", `{"changes":[`, ErrMalformed},
	}
	for _, c := range bad {
		if _, err := DecodeDescriptorJournal([]byte(c.value)); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	var over DescriptorJournal
	for n := 1; n <= MaxJournalEntries+1; n++ {
		over.Changes = append(over.Changes, JournalEntry{N: Generation(n), Key: a})
	}
	if _, err := over.Encode(); !errors.Is(err, ErrLimit) {
		t.Errorf("over the bound: %v", err)
	}
	if _, err := DescriptorJournalKey(KindAuthority); err == nil {
		t.Error("only MeshNode descriptors have a journal")
	}
	k, err := DescriptorJournalKey(KindMeshNode)
	if err != nil || !strings.HasPrefix(k, "descriptor-journal:") {
		t.Fatalf("key %q %v", k, err)
	}
}
