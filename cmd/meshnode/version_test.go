package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// make build stamps the version it is given (the Makefile's -X names the
// variable internal/buildinfo reads): an operator upgrading node by node
// tells the builds apart by it. A moved or renamed variable would make the
// linker ignore the -X silently and every build say "dev".
func TestMakeBuildStampsTheVersion(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed to build the binary as the README says: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "meshnode")
	build := exec.Command("make", "-C", "../..", "build", "VERSION=v7.7.7-test", "BIN="+bin)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("meshnode version: %v\n%s", err, out)
	}
	// The toolchain is the Makefile's (GOTOOLCHAIN), which need not be
	// the one running this test.
	if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, "meshnode v7.7.7-test (") || !strings.Contains(got, "go1.") {
		t.Fatalf("meshnode version = %q, want meshnode v7.7.7-test (… go1.…)", got)
	}
}
