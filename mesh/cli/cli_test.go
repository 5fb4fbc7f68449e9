package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runMain runs Main with args and returns its exit code, stdout and stderr.
func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// A flag error names the flag and what is wrong with it, points to --help
// and exits 2, for every command; nothing goes to stdout.
func TestFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string // on stderr, after "<command>: "
	}{
		{[]string{"run", "--lease.ttl=15"}, `meshnode run: invalid value "15" for --lease.ttl: missing unit in duration (e.g. 15s`},
		{[]string{"run", "--lease.ttl", "1x"}, `meshnode run: invalid value "1x" for --lease.ttl: unknown unit "x" in duration`},
		{[]string{"run", "--lease.tll=15s"}, `meshnode run: unknown flag --lease.tll (did you mean --lease.ttl?)`},
		{[]string{"run", "--relocation.drain_on_shutdown=maybe"}, `invalid value "maybe" for --relocation.drain_on_shutdown: want true or false`},
		{[]string{"run", "--node.placement_weight=99999999999999999999"}, `for --node.placement_weight: out of range`},
		{[]string{"run", "--nonsense"}, `meshnode run: unknown flag --nonsense`},
		{[]string{"run", "--admin.token=abcdefghijklmnopq"}, `meshnode run: --admin.token is not a flag: a secret on the command line is visible to every local user; set MESHNODE_ADMIN__TOKEN or put admin.token in the config file`},
		{[]string{"run", "extra"}, `meshnode run: unexpected argument "extra"`},
		// A boolean flag's value as a separate argument: pflag reads the flag
		// as true and the value as a positional argument.
		{[]string{"run", "--relocation.drain_on_shutdown", "false"}, `meshnode run: --relocation.drain_on_shutdown false: a boolean flag takes its value after '=' (--relocation.drain_on_shutdown=false)`},
		{[]string{"ctl", "reclaim", "actor", "x", "--dry-run", "true"}, `meshnode ctl reclaim: --dry-run true: a boolean flag takes its value after '=' (--dry-run=true)`},
		{[]string{"demo", "--nodes=x"}, `meshnode demo: invalid value "x" for --nodes: not a whole number`},
		{[]string{"demo", "--nodes=0"}, `meshnode demo: invalid value 0 for --nodes: want 1..64`},
		{[]string{"demo", "--nodes"}, `meshnode demo: flag --nodes needs a value`},
		{[]string{"demo", "--node=2"}, `unknown flag --node (did you mean --nodes?)`},
		{[]string{"demo", "--log-level=verbose"}, `meshnode demo: invalid value "verbose" for --log-level: want debug, info, warn or error`},
		// A timeout that is not positive started every node and then failed
		// their discovery at once, exit 1: "node 1 discovery: directory:
		// round: read descriptor change counter: locstore memory read:
		// context deadline exceeded" (until 2026-12-07).
		{[]string{"demo", "--timeout=0"}, `meshnode demo: invalid value 0s for --timeout: want a positive duration (e.g. 30s)`},
		{[]string{"demo", "--timeout=-5s"}, `meshnode demo: invalid value -5s for --timeout: want a positive duration (e.g. 30s)`},
		{[]string{"ctl", "list", "--kind=actor", "--limit=0"}, `meshnode ctl list: query: invalid argument: list: limit 0 outside 1..1000`},
		{[]string{"ctl", "topology", "--lease.tll=1s"}, `meshnode ctl topology: unknown flag --lease.tll (did you mean --lease.ttl?)`},
		{[]string{"ctl", "topology", "--mesh"}, `meshnode ctl topology: flag --mesh needs a value`},
		{[]string{"ctl", "record", "--location_store.redis.operation_timeout=2"}, `meshnode ctl record: invalid value "2" for --location_store.redis.operation_timeout: missing unit`},
		{[]string{"ctl", "key", "--namespce=x", "owner-lease", "o"}, `meshnode ctl key: unknown flag --namespce (did you mean --namespace?)`},
		{[]string{"ctl", "locate", "actor", "a", "--lease.ttl=5"}, `meshnode ctl locate: invalid value "5" for --lease.ttl`},
		{[]string{"ctl", "list", "--limit=many"}, `meshnode ctl list: invalid value "many" for --limit: not a whole number`},
		{[]string{"ctl", "list", "-x"}, `meshnode ctl list: unknown shorthand flag: 'x' in -x`},
		{[]string{"ctl", "reclaim", "--dry-run=perhaps"}, `meshnode ctl reclaim: invalid value "perhaps" for --dry-run: want true or false`},
		{[]string{"ctl", "keygen", "--oot=x"}, `meshnode ctl keygen: unknown flag --oot (did you mean --out?)`},
		{[]string{"wire", "decode", "--hex=00"}, `meshnode wire decode: unknown flag --hex`},
		{[]string{"version", "--short"}, `meshnode version: unknown flag --short`},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := runMain(t, tc.args...)
			if code != ExitUsage || out != "" {
				t.Fatalf("exit %d, stdout %q; want %d and nothing\nstderr %s", code, out, ExitUsage, errs)
			}
			if !strings.Contains(errs, tc.want) {
				t.Fatalf("stderr lacks %q:\n%s", tc.want, errs)
			}
			lines := strings.Split(strings.TrimSpace(errs), "\n")
			cmd, _, _ := strings.Cut(tc.want, ":")
			if !strings.HasPrefix(cmd, "meshnode") {
				cmd, _, _ = strings.Cut(lines[0], ":")
			}
			if hint := "Run '" + cmd + " --help' for usage."; len(lines) != 2 || lines[1] != hint {
				t.Fatalf("want the message and then %q, got:\n%s", hint, errs)
			}
		})
	}
}

// --help is uniform: every command and subcommand prints its usage once,
// to stdout, and exits 0; so do -h and "help <command>".
func TestHelpEverywhere(t *testing.T) {
	cmds := [][]string{{"run"}, {"demo"}, {"ctl"}, {"wire"}, {"wire", "decode"}, {"version"}}
	for _, c := range ctlCommands() { // a new ctl subcommand is covered too
		cmds = append(cmds, []string{"ctl", c.name})
	}
	for _, cmd := range cmds {
		want := "usage: meshnode " + strings.Join(cmd, " ")
		variants := [][]string{
			append(append([]string{}, cmd...), "--help"),
			append(append([]string{}, cmd...), "-h"),
			append(append([]string{}, cmd[:len(cmd)-1]...), "help", cmd[len(cmd)-1]),
		}
		for _, args := range variants {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, out, errs := runMain(t, args...)
				if code != ExitOK || errs != "" {
					t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, errs)
				}
				if !strings.HasPrefix(out, want) || strings.Count(out, "usage:") != 1 {
					t.Fatalf("stdout is not the usage %q once:\n%s", want, out)
				}
			})
		}
	}
	// Each ctl subcommand has a usage of its own, not the ctl list.
	_, out, _ := runMain(t, "ctl", "topology", "--help")
	if strings.Contains(out, "keygen") || !strings.Contains(out, "--mesh") {
		t.Fatalf("ctl topology --help:\n%s", out)
	}
	// wire decode --help is help, not a hex frame.
	if _, out, _ := runMain(t, "wire", "decode", "--help"); !strings.Contains(out, "<frame-hex>") {
		t.Fatalf("wire decode --help:\n%s", out)
	}
}

// A group (meshnode, ctl, wire) without a command prints its usage to
// stderr and exits 2; asked for help it prints it to stdout and exits 0; an
// unknown command is named and exits 2.
func TestCommandGroups(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{nil, ExitUsage, "", "usage: meshnode <command>"},
		{[]string{"help"}, ExitOK, "usage: meshnode <command>", ""},
		{[]string{"--help"}, ExitOK, "usage: meshnode <command>", ""},
		{[]string{"-h"}, ExitOK, "usage: meshnode <command>", ""},
		{[]string{"bogus"}, ExitUsage, "", "meshnode: unknown command \"bogus\"\nRun 'meshnode --help' for usage."},
		{[]string{"help", "bogus"}, ExitUsage, "", `meshnode: help: unknown command "bogus"`},
		{[]string{"--lease.ttl=5s", "run"}, ExitUsage, "", `meshnode: a command comes before any flag, got "--lease.ttl=5s"`},
		{[]string{"ctl"}, ExitUsage, "", "usage: meshnode ctl <command>"},
		{[]string{"ctl", "help"}, ExitOK, "usage: meshnode ctl <command>", ""},
		{[]string{"ctl", "bogus"}, ExitUsage, "", "meshnode ctl: unknown command \"bogus\"\nRun 'meshnode ctl --help' for usage."},
		{[]string{"wire"}, ExitUsage, "", "usage: meshnode wire <command>"},
		{[]string{"wire", "encode"}, ExitUsage, "", `meshnode wire: unknown command "encode"`},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := runMain(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, tc.code, out, errs)
			}
			if tc.inStdout == "" && out != "" || tc.inStderr == "" && errs != "" {
				t.Fatalf("unexpected output: stdout %q, stderr %q", out, errs)
			}
			if !strings.Contains(out, tc.inStdout) || !strings.Contains(errs, tc.inStderr) {
				t.Fatalf("stdout %q / stderr %q; want %q / %q", out, errs, tc.inStdout, tc.inStderr)
			}
		})
	}
	// The top-level list names every ctl subcommand from the ctl table.
	_, out, _ := runMain(t, "help")
	for _, c := range ctlCommands() {
		if !strings.Contains(out, c.name) {
			t.Fatalf("usage does not list ctl %s:\n%s", c.name, out)
		}
	}
}

// "meshnode help ctl <command>" is "meshnode ctl <command> --help", as
// "meshnode help <command>" is "<command> --help": it printed the ctl
// command list and ignored the subcommand, and "help ctl bogus" exited 0.
func TestHelpOfASubcommandFromTheTop(t *testing.T) {
	for _, c := range ctlCommands() {
		code, out, errs := runMain(t, "help", "ctl", c.name)
		if want := "usage: meshnode ctl " + c.name; code != ExitOK || errs != "" || !strings.HasPrefix(out, want) {
			t.Errorf("help ctl %s: exit %d, stderr %q, stdout %.60q…; want 0 and %q", c.name, code, errs, out, want)
		}
	}
	if code, out, _ := runMain(t, "help", "wire", "decode"); code != ExitOK || !strings.HasPrefix(out, "usage: meshnode wire decode") {
		t.Errorf("help wire decode: exit %d, stdout %.60q…", code, out)
	}
	code, out, errs := runMain(t, "help", "ctl", "bogus")
	if code != ExitUsage || out != "" || !strings.Contains(errs, `meshnode ctl: unknown command "bogus"`) {
		t.Errorf("help ctl bogus: exit %d, stdout %.60q…, stderr %q; want 2 and the unknown command named", code, out, errs)
	}
}
