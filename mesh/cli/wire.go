package cli

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/meshnode/meshnode/router"
)

const wireUsage = `usage: meshnode wire decode <frame-hex> [<frame-hex> ...]

Decodes one service record given as hex frames (frame 0 = head prefix and
body, then the metadata frame when flag 0x01 is set, then the application
payload frames) and prints it as JSON, or prints the protocol error.
Whitespace and ':' inside a hex argument are ignored.`

func runWire(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "decode" {
		fmt.Fprintln(stderr, wireUsage)
		return ExitUsage
	}
	if len(args) < 2 {
		fmt.Fprintln(stderr, wireUsage)
		return ExitUsage
	}
	out, err := decodeWire(args[1:])
	if err != nil {
		fmt.Fprintf(stderr, "meshnode wire decode: %v\n", err)
		return ExitError
	}
	fmt.Fprintln(stdout, out)
	return ExitOK
}

// decodeWire turns hex frames into the record's JSON description.
func decodeWire(hexFrames []string) (string, error) {
	frames := make([][]byte, len(hexFrames))
	for i, h := range hexFrames {
		clean := strings.NewReplacer(" ", "", "\n", "", "\t", "", ":", "").Replace(h)
		b, err := hex.DecodeString(clean)
		if err != nil {
			return "", fmt.Errorf("frame %d is not hex: %w", i, err)
		}
		frames[i] = b
	}
	rec, err := router.Decode(frames)
	if err != nil {
		var pe *router.ProtocolError
		if errors.As(err, &pe) {
			return "", fmt.Errorf("protocol error (%s): %w", pe.Kind.FixtureName(), err)
		}
		return "", err
	}
	js, err := router.DescribeJSON(rec)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, js, "", "  "); err != nil {
		return "", err
	}
	return buf.String(), nil
}
