package main

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestWalkthrough runs the example end to end, so that `go test ./...`
// (and with it `make test`) builds and runs it against the memory stores.
func TestWalkthrough(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, &out)
	t.Log("\n" + out.String()) // shown with -v, or when the test fails
	if err != nil {
		t.Fatal(err)
	}
}
