package config

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestNewLogger(t *testing.T) {
	tests := []struct {
		name      string
		cfg       LogConfig
		wantDebug bool
		wantInfo  bool
		json      bool
	}{
		{name: "defaults", cfg: Default().Log, wantInfo: true},
		{name: "json debug", cfg: LogConfig{Format: "json", Level: "debug"}, wantDebug: true, wantInfo: true, json: true},
		{name: "capitals", cfg: LogConfig{Format: "JSON", Level: "WARN"}, json: true},
		{name: "error level", cfg: LogConfig{Format: "text", Level: "error"}},
		{name: "invalid falls back to text/info", cfg: LogConfig{Format: "xml", Level: "loud"}, wantInfo: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			c := Default()
			c.Log = tc.cfg
			log := c.Logger(&buf)
			log.Debug("d-msg")
			log.Info("i-msg", "node", "n1")
			log.Error("e-msg")
			out := buf.String()
			if got := strings.Contains(out, "d-msg"); got != tc.wantDebug {
				t.Errorf("debug logged = %v, want %v:\n%s", got, tc.wantDebug, out)
			}
			if got := strings.Contains(out, "i-msg"); got != tc.wantInfo {
				t.Errorf("info logged = %v, want %v:\n%s", got, tc.wantInfo, out)
			}
			if !strings.Contains(out, "e-msg") {
				t.Errorf("error not logged:\n%s", out)
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var m map[string]any
				isJSON := json.Unmarshal([]byte(line), &m) == nil
				if isJSON != tc.json {
					t.Errorf("line %q: JSON = %v, want %v", line, isJSON, tc.json)
				}
			}
		})
	}
}

func TestValidLevel(t *testing.T) {
	for s, want := range map[string]bool{"debug": true, "INFO": true, "Warn": true, "error": true, "": false, "verbose": false, "warning": false} {
		if got := ValidLevel(s); got != want {
			t.Errorf("ValidLevel(%q) = %v, want %v", s, got, want)
		}
	}
}
