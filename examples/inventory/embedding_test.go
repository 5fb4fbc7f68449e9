package main

import (
	"context"
	"errors"
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/mesh"
)

// embeddingDoc is the plugin author's guide whose Go snippets this package
// keeps compiling.
const embeddingDoc = "../../docs/EMBEDDING.md"

// TestEmbeddingSnippetsAreThisPackagesCode keeps docs/EMBEDDING.md true to
// the API: every code line of its Go snippets ("..." elisions and comments
// aside) must be a line of this package's Go files, which compile — the
// example itself, or the snippet functions below for the lines the guide
// writes differently from the walkthrough. A snippet left behind by an API
// change, or edited into something the example does not do, fails here.
func TestEmbeddingSnippetsAreThisPackagesCode(t *testing.T) {
	raw, err := os.ReadFile(embeddingDoc)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	code := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(src), "\n") {
			code[codeLine(line)] = true
		}
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(raw), -1)
	if len(blocks) < 10 {
		t.Fatalf("%s: found %d Go snippets; the pattern no longer finds them", embeddingDoc, len(blocks))
	}
	for i, b := range blocks {
		for _, line := range strings.Split(b[1], "\n") {
			if l := codeLine(line); l != "" && l != "..." && !code[l] {
				t.Errorf("%s Go snippet %d: %q is not a line of examples/inventory (changed API, or the example does something else)", embeddingDoc, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// codeLine is a line's Go tokens, one space apart, without its comment
// ("" for a comment line), so that spacing and comments do not matter and
// a "//" inside a string stays code.
func codeLine(line string) string {
	var s scanner.Scanner
	fset := token.NewFileSet()
	src := []byte(line)
	s.Init(fset.AddFile("", -1, len(src)), src, func(token.Position, string) {}, 0)
	var toks []string
	for {
		_, tok, lit := s.Scan()
		switch {
		case tok == token.EOF:
			return strings.Join(toks, " ")
		case tok == token.SEMICOLON && lit == "\n":
			// inserted by the scanner at the line's end
		case lit != "":
			toks = append(toks, lit)
		default:
			toks = append(toks, tok.String())
		}
	}
}

// TestCodeLineKeepsCode checks the comparison above is not vacuous: code
// survives (also a "//" in a string), comments and spacing do not matter.
func TestCodeLineKeepsCode(t *testing.T) {
	tests := []struct{ in, want string }{
		{"\tapple, err = m.FindActor(ctx, \"sku:apple\") // Ready objects only", `apple , err = m . FindActor ( ctx , "sku:apple" )`},
		{"// only a comment", ""},
		{"cfg.Node.Endpoint   =   \"tcp://127.0.0.1:0\"   // any free port", `cfg . Node . Endpoint = "tcp://127.0.0.1:0"`},
		{"...", "..."},
	}
	for _, tc := range tests {
		if got := codeLine(tc.in); got != tc.want {
			t.Errorf("codeLine(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The guide's snippets whose lines are not verbatim in the walkthrough,
// as the guide writes them (section numbers of docs/EMBEDDING.md). They
// are compiled, never run; the blank assignments only keep the compiler
// from refusing variables a snippet leaves unused.

// §5 Create, find, end.
func embeddingCreate(ctx context.Context, k *walk) error {
	m := k.front.Manager()
	apple, err := m.CreateActor(ctx, "sku:apple", StockType, mesh.WithBody([]byte("12")))
	if err != nil {
		return err
	}
	pear, err := m.GetOrCreateActor(ctx, "sku:pear", StockType, mesh.WithBody([]byte("5")))
	if err != nil {
		return err
	}
	_, _ = pear.Outcome == mesh.Created || pear.Outcome == mesh.Existing, pear.Ref
	found, err := m.FindActor(ctx, "sku:apple")
	if err != nil {
		return err
	}
	_, _ = found, apple
	return nil
}

// §7 Instance Spots.
func embeddingInstances(ctx context.Context, k *walk) error {
	m, east := k.front.Manager(), k.east.Manager()
	if _, err := m.FindInstance(ctx, "cart:alice"); !errors.Is(err, mesh.ErrNotFound) {
		return fmt.Errorf("no cart expected yet: %v", err)
	}
	got, err := m.RequestInstance(ctx, "cart:alice", []byte("add sku:apple 2"))
	if err != nil {
		return err
	}
	if err := east.SendInstance(ctx, "cart:alice", []byte("add sku:pear 1")); err != nil {
		return err
	}
	_ = got
	got, err = east.RequestInstance(ctx, "cart:alice", []byte("show"), mesh.InstanceType(CartType))
	if err != nil {
		return err
	}
	_ = got
	return nil
}

// §11 Errors.
func embeddingErrors(ctx context.Context, m *mesh.Manager) string {
	var err error
	_, err = m.CreateActor(ctx, "sku:kiwi", StockType, mesh.WithBody([]byte("lots")))
	var rejected *mesh.RejectedError
	if errors.Is(err, mesh.ErrRejected) && errors.As(err, &rejected) {
		return rejected.Reason
	}
	return ""
}

var _, _, _ = embeddingCreate, embeddingInstances, embeddingErrors
