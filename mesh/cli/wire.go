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

func wireGroup() group {
	return group{
		name:     "meshnode wire",
		synopsis: "<command> [arguments]",
		intro:    "Wire tools: inspect what the transport sends (docs/PROTOCOL.md).",
		commands: []command{
			{"decode", "decode one service record given as hex frames and print it as JSON", wireDecode},
		},
	}
}

func runWire(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return wireGroup().run(ctx, args, stdout, stderr)
}

const wireDecodeUsage = `usage: meshnode wire decode <frame-hex> [<frame-hex> ...]

Decodes one service record given as hex frames (frame 0 = head prefix and
body, then the metadata frame when flag 0x01 is set, then the application
payload frames) and prints it as JSON, or prints the protocol error.
Whitespace and ':' inside a hex argument are ignored.
Exit status: 0 decoded, 1 not hex or a protocol error, 2 bad usage.`

func wireDecode(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("meshnode wire decode")
	if code, done := parseFlags(fs, args, helpText(fs, wireDecodeUsage, false), stdout, stderr); done {
		return code
	}
	if fs.NArg() == 0 {
		return usageError(stderr, fs.Name(), "want at least one hex frame")
	}
	out, err := decodeWire(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
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
