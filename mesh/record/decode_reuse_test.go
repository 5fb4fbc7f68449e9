package record_test

import (
	"reflect"
	"sync"
	"testing"

	"github.com/meshnode/meshnode/mesh/record"
)

// Decoders reuse their scratch (the decoder and the parser's member
// store) between decodes. Every fixture value decoded over and over, from
// several goroutines at once and interleaved with values that fail at
// each stage (syntax, field, version), gives exactly what a first decode
// gave: nothing a decode returns shares memory with the next one.
func TestDecodeReusesScratchSafely(t *testing.T) {
	type decoded struct {
		value []byte
		want  any
	}
	decode := func(v []byte) (any, error) {
		if a, err := record.DecodeAuthority(v); err == nil {
			return a, nil
		}
		if m, err := record.DecodeMeshNode(v); err == nil {
			return m, nil
		}
		if l, err := record.DecodeOwnerLease(v); err == nil {
			return l, nil
		}
		if c, err := record.DecodeCounter(v); err == nil {
			return c, nil
		}
		return record.DecodeDescriptorJournal(v)
	}
	var cases []decoded
	for _, r := range loadFixture(t).Records {
		v := []byte(r.Value)
		if got, err := decode(v); err == nil {
			cases = append(cases, decoded{value: v, want: got})
		}
	}
	if len(cases) < 5 {
		t.Fatalf("only %d fixture values decode", len(cases))
	}
	bad := [][]byte{
		[]byte(`{"recordVersion":1,"objectId":`), // syntax
		[]byte(`{"recordVersion":9}`),            // version
		[]byte(`{"recordVersion":1,"objectId":5}`),
		[]byte("\xff"),
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < 50; round++ {
				for i, c := range cases {
					if _, err := record.DecodeAuthority(bad[(g+i+round)%len(bad)]); err == nil {
						errs <- "a bad value decoded"
						return
					}
					got, err := decode(c.value)
					if err != nil || !reflect.DeepEqual(got, c.want) {
						errs <- "a value decoded differently the second time"
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}
