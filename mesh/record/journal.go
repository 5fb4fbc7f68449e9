package record

import (
	"strconv"
	"strings"
)

// DescriptorJournal names the descriptor keys the most recent changes of a
// descriptor kind touched, one entry per change number of that kind's
// change counter (CounterMeshNodeDescriptors). Every writer that bumps the
// counter rewrites the journal in the same batch, so the journal's last
// entry always carries the counter's value; a reader that holds a complete
// list at change number n and sees the counter at m can bring the list to m
// by reading only the keys of entries n+1..m, instead of every descriptor
// (docs/DISCOVERY.md §3.2). The format is project-specific.
type DescriptorJournal struct {
	// Changes are in change-number order, consecutive, at most
	// MaxJournalEntries.
	Changes []JournalEntry
}

// JournalEntry is one change: its change number and the descriptor key it
// put or deleted.
type JournalEntry struct {
	N   Generation
	Key string
}

// MaxJournalEntries bounds the journal: a reader more changes behind reads
// the whole list.
const MaxJournalEntries = 64

// DescriptorJournalPreimage is descriptor-journal\0{kind}, for a
// descriptor kind (mesh-node only for now).
func DescriptorJournalPreimage(kind Kind) ([]byte, error) {
	if kind != KindMeshNode {
		return nil, &FieldError{Kind: KindDescriptorJournal, Field: "kind", Reason: quote(string(kind)) + " has no descriptor journal"}
	}
	return join(string(KindDescriptorJournal), string(kind)), nil
}

// DescriptorJournalKey is Key(DescriptorJournalPreimage(kind)).
func DescriptorJournalKey(kind Kind) (string, error) {
	return keyOf(DescriptorJournalPreimage(kind))
}

// Append returns the journal with one more change, keeping the last
// MaxJournalEntries. A change number that does not follow the last one
// (a writer of an older version bumped the counter without the journal)
// starts the journal again at that change: readers then see a gap and read
// the whole list once.
func (j DescriptorJournal) Append(n Generation, key string) DescriptorJournal {
	changes := j.Changes
	if len(changes) > 0 && changes[len(changes)-1].N+1 != n {
		changes = nil
	}
	if len(changes) >= MaxJournalEntries {
		changes = changes[len(changes)-MaxJournalEntries+1:]
	}
	out := make([]JournalEntry, 0, len(changes)+1)
	out = append(out, changes...)
	return DescriptorJournal{Changes: append(out, JournalEntry{N: n, Key: key})}
}

// Since returns the distinct keys changed after change number n up to the
// journal's last change, and whether the journal covers all of them (its
// first entry is n+1 or earlier). With n at or past the last change, it
// returns no keys and true.
func (j DescriptorJournal) Since(n Generation) (keys []string, covered bool) {
	if len(j.Changes) == 0 {
		return nil, false
	}
	if j.Changes[0].N > n+1 {
		return nil, false
	}
	seen := map[string]bool{}
	for _, c := range j.Changes {
		if c.N > n && !seen[c.Key] {
			seen[c.Key] = true
			keys = append(keys, c.Key)
		}
	}
	return keys, true
}

// Last is the change number of the journal's last entry (0 when empty).
func (j DescriptorJournal) Last() Generation {
	if len(j.Changes) == 0 {
		return 0
	}
	return j.Changes[len(j.Changes)-1].N
}

func (j *DescriptorJournal) validate() error {
	v := &val{kind: KindDescriptorJournal}
	if len(j.Changes) > MaxJournalEntries {
		return &LimitError{Kind: KindDescriptorJournal, What: "changes", Limit: MaxJournalEntries, Actual: len(j.Changes)}
	}
	for i, c := range j.Changes {
		path := "changes[" + strconv.Itoa(i) + "]"
		v.gen(path+".n", c.N)
		if i > 0 && c.N != j.Changes[i-1].N+1 {
			v.fail(path+".n", "change "+c.N.String()+" does not follow "+j.Changes[i-1].N.String())
		}
		if !isDescriptorKey(c.Key) {
			v.fail(path+".key", "not a MeshNode descriptor key: "+quote(c.Key))
		}
	}
	return v.err
}

// isDescriptorKey reports "mesh-node:" followed by 64 lowercase hex digits.
func isDescriptorKey(k string) bool {
	digest, ok := strings.CutPrefix(k, KindPrefix(KindMeshNode))
	if !ok || len(digest) != 64 {
		return false
	}
	for _, r := range digest {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// Validate checks the bounds, the order and the keys.
func (j DescriptorJournal) Validate() error { return j.validate() }

// Encode returns the canonical JSON value
// {"changes":[{"key":"mesh-node:…","n":"N"},…],"recordVersion":1}.
func (j DescriptorJournal) Encode() ([]byte, error) {
	if err := j.validate(); err != nil {
		return nil, err
	}
	changes := make([]jvalue, len(j.Changes))
	for i, c := range j.Changes {
		changes[i] = jObjV(
			mem("key", jStrV(c.Key)),
			mem("n", jDecStrV(uint64(c.N))),
		)
	}
	root := jObjV(
		mem("changes", jArrV(changes)),
		mem("recordVersion", jUintV(RecordVersion)),
	)
	return finish(KindDescriptorJournal, encodeCanonical(root))
}

// DecodeDescriptorJournal reads a journal value.
func DecodeDescriptorJournal(value []byte) (DescriptorJournal, error) {
	d, o, err := begin(KindDescriptorJournal, value)
	if err != nil {
		return DescriptorJournal{}, err
	}
	defer d.release()
	arr := o.array("changes")
	if d.err == nil && len(arr) > MaxJournalEntries {
		return DescriptorJournal{}, &LimitError{Kind: KindDescriptorJournal, What: "changes", Limit: MaxJournalEntries, Actual: len(arr)}
	}
	var j DescriptorJournal
	for i := range arr {
		c := d.element("changes", i, &arr[i])
		j.Changes = append(j.Changes, JournalEntry{N: c.gen("n"), Key: c.str("key")})
		c.end()
	}
	o.end()
	if d.err != nil {
		return DescriptorJournal{}, d.err
	}
	if err := j.validate(); err != nil {
		return DescriptorJournal{}, err
	}
	return j, nil
}
