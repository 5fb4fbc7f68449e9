package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/config"
)

// ctl key takes the Location Store's namespace from the same layers as
// 'meshnode run' — the file named by MESHNODE_CONFIG or --config, the
// MESHNODE_ environment, the configuration flags — and --namespace on top.
// Before, it read only --namespace and otherwise printed the default
// namespace's Redis key, whatever the node's configuration said: an
// operator with MESHNODE_CONFIG set got a key the node never wrote.
func TestCtlKeyNamespaceFromConfiguration(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(file, []byte("location_store:\n  provider: redis\n  redis:\n    addrs: [\"127.0.0.1:6379\"]\n    namespace: fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	envNS := config.EnvName("location_store.redis.namespace")
	tests := []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string // on stdout (ExitOK) or stderr
	}{
		{"default", nil, nil, ExitOK, "redis key:    {meshnode}:k:owner-lease:"},
		{"MESHNODE_CONFIG", map[string]string{config.EnvConfigFile: file}, nil, ExitOK, "redis key:    {fromfile}:k:owner-lease:"},
		{"--config", nil, []string{"--config", file}, ExitOK, "redis key:    {fromfile}:k:owner-lease:"},
		{"environment", map[string]string{envNS: "fromenv"}, nil, ExitOK, "redis key:    {fromenv}:k:owner-lease:"},
		{"environment over the file", map[string]string{config.EnvConfigFile: file, envNS: "fromenv"}, nil, ExitOK, "{fromenv}:k:"},
		{"configuration flag over both", map[string]string{config.EnvConfigFile: file, envNS: "fromenv"},
			[]string{"--location_store.redis.namespace", "fromflag"}, ExitOK, "{fromflag}:k:"},
		{"--namespace over the file", map[string]string{config.EnvConfigFile: file}, []string{"--namespace", "prod"}, ExitOK, "{prod}:k:"},
		{"--namespace and the configuration flag agree", nil,
			[]string{"--namespace", "prod", "--location_store.redis.namespace", "prod"}, ExitOK, "{prod}:k:"},
		{"--namespace and the configuration flag disagree", nil,
			[]string{"--namespace", "prod", "--location_store.redis.namespace", "other"}, ExitUsage, "--namespace"},
		{"a config file that does not exist", map[string]string{config.EnvConfigFile: filepath.Join(dir, "missing.yaml")}, nil,
			ExitUsage, "missing.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(config.EnvConfigFile, "")
			t.Setenv(envNS, "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out, errb bytes.Buffer
			args := append([]string{"ctl", "key", "owner-lease", "o1"}, tc.args...)
			code := Main(context.Background(), args, &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %s; stderr %s", code, tc.code, out.String(), errb.String())
			}
			got := out.String()
			if tc.code != ExitOK {
				got = errb.String()
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("output lacks %q:\nstdout %s\nstderr %s", tc.want, out.String(), errb.String())
			}
		})
	}
}

// Every ctl command that reads the configuration refuses a key or value
// the loader could not take (exit 2, each problem named with its source,
// nothing on stdout), as run does: until 2026-12-06 ctl silently used the
// default for them, so a mistyped namespace pointed ctl key at the default
// namespace and the store commands at another namespace's data.
func TestCtlConfigurationProblemsAreUsageErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "node.yaml")
	body := "location_store:\n  provider: redis\n  redis:\n    addrs: [\"127.0.0.1:1\"]\n    namespac: typo\n    db: first\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"key", "owner-lease", "o"},
		{"record", "authority:00"},
		{"topology"},
		{"locate", "actor", "a"},
		{"list", "--kind", "actor"},
		{"reclaim", "--all", "--dry-run"},
	} {
		t.Run(args[0], func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), append(append([]string{"ctl"}, args...), "--config", file), &out, &errb)
			for _, want := range []string{
				"meshnode ctl " + args[0] + ": config: location_store.redis.db: must be an integer, got \"first\" (in file ",
				"config: location_store.redis.namespac: unknown key; did you mean location_store.redis.namespace? (in file ",
			} {
				if !strings.Contains(errb.String(), want) {
					t.Errorf("stderr lacks %q", want)
				}
			}
			if code != ExitUsage || out.Len() != 0 {
				t.Errorf("exit %d, stdout %q; want %d and nothing", code, out.String(), ExitUsage)
			}
			if t.Failed() {
				t.Logf("stderr:\n%s", errb.String())
			}
		})
	}
}
