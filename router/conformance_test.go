package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

type decoderFixtures struct {
	Schema    string `json:"schema"`
	WireMajor int    `json:"wireMajor"`
	ProbeID   string `json:"probeId"`
	Canonical []struct {
		Name      string `json:"name"`
		CommandID int    `json:"commandId"`
		Bytes     []int  `json:"bytes"`
		Echoes    string `json:"echoesProbeIdFrom"`
	} `json:"canonical"`
	Malformed []struct {
		Name  string `json:"name"`
		Bytes []int  `json:"bytes"`
		Error string `json:"error"`
	} `json:"malformed"`
	FrameworkErrors struct {
		PublicMapping string `json:"publicMapping"`
		Canonical     []struct {
			Name        string `json:"name"`
			WireValue   uint32 `json:"wireValue"`
			PublicValue *int   `json:"publicValue"`
		} `json:"canonical"`
		Reserved struct {
			First uint32 `json:"first"`
			Last  uint32 `json:"last"`
		} `json:"reservedWireValues"`
		Malformed []struct {
			Name      string `json:"name"`
			WireValue uint32 `json:"wireValue"`
			Error     string `json:"error"`
		} `json:"malformed"`
	} `json:"frameworkErrors"`
}

func loadDecoderFixtures(t testing.TB) decoderFixtures {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "service-decoder-fixtures-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f decoderFixtures
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if f.Schema != "zlink-service-wire-decoder-fixtures-v1" || f.WireMajor != WireMajor {
		t.Fatalf("unexpected fixture file %q wire major %d", f.Schema, f.WireMajor)
	}
	return f
}

func intsToBytes(t testing.TB, in []int) []byte {
	t.Helper()
	out := make([]byte, len(in))
	for i, v := range in {
		if v < 0 || v > 255 {
			t.Fatalf("fixture byte %d out of range", v)
		}
		out[i] = byte(v)
	}
	return out
}

func TestGoldenCanonicalRecords(t *testing.T) {
	f := loadDecoderFixtures(t)
	probe, err := strconv.ParseUint(f.ProbeID, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Canonical) == 0 {
		t.Fatal("no canonical fixtures")
	}
	for _, fx := range f.Canonical {
		t.Run(fx.Name, func(t *testing.T) {
			b := intsToBytes(t, fx.Bytes)
			r, err := Decode([][]byte{b})
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if int(r.Command) != fx.CommandID || r.Command.String() != fx.Name {
				t.Fatalf("command %d %q, want %d %q", r.Command, r.Command, fx.CommandID, fx.Name)
			}
			var id uint64
			switch body := r.Body.(type) {
			case *LivenessProbe:
				id = body.ProbeID
			case *LivenessAck:
				id = body.ProbeID
			default:
				t.Fatalf("unexpected body %T", r.Body)
			}
			if id != probe {
				t.Fatalf("probe id %d, want %d", id, probe)
			}
			frames, err := Encode(r)
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			if len(frames) != 1 || !bytes.Equal(frames[0], b) {
				t.Fatalf("re-encoded %x, want %x", frames, b)
			}
		})
	}
}

func TestGoldenMalformedRecords(t *testing.T) {
	f := loadDecoderFixtures(t)
	if len(f.Malformed) == 0 {
		t.Fatal("no malformed fixtures")
	}
	for _, fx := range f.Malformed {
		t.Run(fx.Name, func(t *testing.T) {
			_, err := Decode([][]byte{intsToBytes(t, fx.Bytes)})
			var pe *ProtocolError
			if !errors.As(err, &pe) || !errors.Is(err, ErrProtocol) {
				t.Fatalf("got %v, want a *ProtocolError", err)
			}
			if got := pe.Kind.FixtureName(); got != fx.Error {
				t.Fatalf("kind %s (fixture name %q), want %q: %v", pe.Kind, got, fx.Error, err)
			}
		})
	}
}

// replyWithFailure builds a reply frame 0 by hand so that the test does not
// depend on the encoder accepting the value under test.
func replyWithFailure(result TerminalResult, code uint32) []byte {
	b := []byte{'Z', 'M', 1, byte(CmdReply), 0}
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 7) // correlation
	b = append(b, byte(result>>24), byte(result>>16), byte(result>>8), byte(result))
	b = append(b, byte(code>>24), byte(code>>16), byte(code>>8), byte(code))
	return b
}

func TestGoldenFrameworkErrors(t *testing.T) {
	f := loadDecoderFixtures(t)
	fe := f.FrameworkErrors
	if fe.PublicMapping != "wire-value-minus-one" {
		t.Fatalf("unexpected public mapping %q", fe.PublicMapping)
	}
	for _, fx := range fe.Canonical {
		t.Run(fx.Name, func(t *testing.T) {
			code := FrameworkErrorCode(fx.WireValue)
			if code.String() != fx.Name {
				t.Fatalf("wire %d named %q, want %q", fx.WireValue, code, fx.Name)
			}
			pub, ok := code.PublicValue()
			if fx.PublicValue == nil {
				if ok {
					t.Fatalf("public value %d, want none", pub)
				}
			} else if !ok || int(pub) != *fx.PublicValue {
				t.Fatalf("public value %d/%v, want %d", pub, ok, *fx.PublicValue)
			}
			r, err := Decode([][]byte{replyWithFailure(code.TerminalResult(), fx.WireValue)})
			if err != nil {
				t.Fatalf("reply with failure code %d: %v", fx.WireValue, err)
			}
			if got := r.Body.(*Reply).FailureCode; got != code {
				t.Fatalf("decoded failure code %d", got)
			}
		})
	}
	bad := append([]uint32{}, fe.Reserved.First, fe.Reserved.Last)
	for _, fx := range fe.Malformed {
		bad = append(bad, fx.WireValue)
		if fx.Error != "unknown-framework-error" {
			t.Fatalf("unexpected fixture error %q", fx.Error)
		}
	}
	for v := fe.Reserved.First; v <= fe.Reserved.Last; v++ {
		bad = append(bad, v)
	}
	for _, v := range bad {
		for _, result := range []TerminalResult{ResultOK, ResultInternalError, ResultConflict} {
			_, err := Decode([][]byte{replyWithFailure(result, v)})
			var pe *ProtocolError
			if !errors.As(err, &pe) || pe.Kind != UnknownFrameworkError || pe.Kind.FixtureName() != "unknown-framework-error" {
				t.Fatalf("failure code %d with %s: got %v, want unknown-framework-error", v, result, err)
			}
		}
	}
}
