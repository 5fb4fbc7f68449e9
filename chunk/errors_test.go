package chunk

import (
	"errors"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	cases := []struct{ got, want string }{
		{DiscardUnknown.String(), "unknown"},
		{DiscardMismatch.String(), "mismatch"},
		{DiscardDuplicate.String(), "duplicate"},
		{DiscardCompleted.String(), "completed"},
		{DiscardFailed.String(), "failed"},
		{DiscardAborted.String(), "aborted"},
		{DiscardSuperseded.String(), "superseded"},
		{DiscardReason(0).String(), "DiscardReason(0)"},
		{DiscardReason(99).String(), "DiscardReason(99)"},
		{CodecRaw.String(), "raw"}, {CodecS2.String(), "s2"}, {CodecZstd.String(), "zstd"}, {Codec(7).String(), "Codec(7)"},
		{CompressNone.String(), "none"}, {CompressS2.String(), "s2"}, {CompressZstd.String(), "zstd"}, {Compression(7).String(), "Compression(7)"},
		{Started.String(), "started"}, {Reused.String(), "reused"}, {AlreadyCompleted.String(), "alreadyCompleted"}, {BeginStatus(0).String(), "BeginStatus(0)"},
		{RelocationID{High: 1, Low: 2}.String(), "00000000000000010000000000000002"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	if s := testBinding(1, 2).String(); !strings.Contains(s, "attempt=2") || !strings.Contains(s, "owner-src/3") {
		t.Errorf("binding string %q", s)
	}
}

func TestErrorMatching(t *testing.T) {
	fe := &FormatError{Kind: ErrTruncated, Field: "queue[1].body", Offset: 40, Body: true, Detail: "needs 9 bytes"}
	if !errors.Is(fe, ErrTruncated) || !errors.Is(fe, ErrMalformed) || errors.Is(fe, ErrTrailing) {
		t.Fatal("FormatError matching")
	}
	if s := fe.Error(); !strings.Contains(s, "queue[1].body at body offset 40: needs 9 bytes") {
		t.Fatalf("message %q", s)
	}
	de := &DiscardError{Reason: DiscardAborted, Index: 3}
	if !errors.Is(de, ErrDiscarded) || errors.Is(de, ErrAborted) || DiscardReasonOf(de) != DiscardAborted || DiscardReasonOf(ErrAborted) != 0 {
		t.Fatal("DiscardError matching")
	}
	if !strings.Contains(de.Error(), "chunk 3 discarded: aborted") {
		t.Fatalf("message %q", de.Error())
	}
}

func TestBindingValidate(t *testing.T) {
	ok := testBinding(1, 1)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(b *Binding){
		"zero relocation": func(b *Binding) { b.Relocation = RelocationID{} },
		"zero attempt":    func(b *Binding) { b.TargetAttempt = 0 },
		"zero lease":      func(b *Binding) { b.Source.LeaseGeneration = 0 },
		"zero node gen":   func(b *Binding) { b.Source.NodeGeneration = 0 },
		"empty rid":       func(b *Binding) { b.Source.NodeRID = "" },
		"long rid":        func(b *Binding) { b.Source.NodeRID = strings.Repeat("r", 256) },
		"empty owner":     func(b *Binding) { b.Source.OwnerID = "" },
		"owner NUL":       func(b *Binding) { b.Source.OwnerID = "a\x00" },
		"owner bad utf8":  func(b *Binding) { b.Source.OwnerID = "\xc3" },
		"owner too long":  func(b *Binding) { b.Source.OwnerID = strings.Repeat("o", 256) },
	}
	for name, mutate := range cases {
		b := ok
		mutate(&b)
		if err := b.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Only the low half set is a valid id; a raw RID may hold any bytes.
	b := ok
	b.Relocation = RelocationID{Low: 1}
	b.Source.NodeRID = "\x00\xff"
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
}
