package config

import (
	"strings"
	"testing"
)

// TestWrongTypeProblemsNeverShowASecret: a secret that YAML reads as a
// number or a boolean (an unquoted all-digit Redis password or admin token)
// is refused with "must be a string (quote it in YAML)" — naming the key and
// the file, but never the value itself. docs/store-redis.md: "A password is
// never logged or printed: … errors never contain it"; docs/OPERATIONS.md,
// admin token: "the token itself is never printed"; "The node never prints
// its secret key".
func TestWrongTypeProblemsNeverShowASecret(t *testing.T) {
	tests := []struct {
		name, key, yaml, secret string
	}{
		{"redis password", "location_store.redis.password",
			"location_store:\n  redis:\n    password: 987654321\n", "987654321"},
		{"relocation store password", "relocation_store.redis.password",
			"relocation_store:\n  redis:\n    password: 31415926535\n", "31415926535"},
		{"sentinel password", "location_store.redis.sentinel_password",
			"location_store:\n  redis:\n    sentinel_password: 1234.5678\n", "1234.5678"},
		{"admin token", "admin.token",
			"admin:\n  token: 98765432109876543\n", "98765432109876543"},
		{"curve secret key", "transport.curve.secret_key",
			"transport:\n  curve:\n    secret_key: 12345678901234567890\n", "12345678901234567890"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeYAML(t, tc.yaml)
			cfg := mustLoad(t, nil, LoadOptions{File: path, Environ: noEnv})
			err := cfg.Validate(nil)
			var named bool
			for _, p := range problemsOf(t, err) {
				if p.Key == tc.key && strings.Contains(p.Message, `in file "`+path+`"`) {
					named = true
				}
			}
			if !named {
				t.Errorf("no problem names %s and the file: %v", tc.key, err)
			}
			if strings.Contains(err.Error(), tc.secret) {
				t.Errorf("the error shows the secret %s:\n%s", tc.secret, err)
			}
			if lp := cfg.LoadProblems(); lp != nil && strings.Contains(lp.Error(), tc.secret) {
				t.Errorf("LoadProblems (ctl's check) shows the secret %s:\n%s", tc.secret, lp)
			}
		})
	}
}

// TestRuleProblemOfADottedStableTypeNamesItsSource: a per-type spot limit
// out of range names where it was read, as it does for "Room", also for a
// stable type with dots in its name — the form docs/node.example.yaml
// shows (com.example.Room: 50). docs/OPERATIONS.md, Validation: "reports
// every problem at once, one per line, each naming its key and, for values
// read from a source, where it came from".
func TestRuleProblemOfADottedStableTypeNamesItsSource(t *testing.T) {
	path := writeYAML(t, "node:\n  limits:\n    spot_types:\n      com.example.Room: -5\n      Room: -5\n")
	tests := []struct {
		name string
		args []string
		opts LoadOptions
		from string
	}{
		{"file", nil, LoadOptions{File: path, Environ: noEnv}, `in file "` + path + `"`},
		{"environment", nil, LoadOptions{Environ: []string{"MESHNODE_NODE__LIMITS__SPOT_TYPES=com.example.Room=-5,Room=-5"}},
			"from environment variable MESHNODE_NODE__LIMITS__SPOT_TYPES"},
		{"flag", []string{"--node.limits.spot_types=com.example.Room=-5,Room=-5"}, LoadOptions{Environ: noEnv},
			"from flag --node.limits.spot_types"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustLoad(t, tc.args, tc.opts)
			err := cfg.Validate(nil)
			for _, typ := range []string{"Room", "com.example.Room"} {
				want := "config: node.limits.spot_types." + typ + ": must be 0 (no limit) or 1..2147483647, got -5 (" + tc.from + ")\n"
				if !strings.Contains(err.Error()+"\n", want) {
					t.Errorf("problems lack the line\n%sgot:\n%s", want, err)
				}
			}
		})
	}
}
