package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/meshnode/meshnode/config"
)

// Every command parses its flags through parseFlags, so that they all
// behave alike for an operator: --help prints the command's usage once, to
// stdout, and exits 0; a flag error prints one line naming the flag and
// what is wrong, then a hint to --help, to stderr, and exits 2. pflag under
// ContinueOnError prints nothing itself, which is why each case is handled
// here instead of by its default output.

// newFlagSet returns a flag set named by the command's full name
// ("meshnode ctl topology"), which prefixes every message about it.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // --help is printed by parseFlags, once
	fs.SortFlags = false
	return fs
}

// parseFlags parses args into fs. done reports that the command must return
// code at once: --help was asked for (usage printed to stdout, ExitOK) or a
// flag was wrong (reported on stderr, ExitUsage). usage writes the command's
// help text (see helpText).
func parseFlags(fs *pflag.FlagSet, args []string, usage func(io.Writer), stdout, stderr io.Writer) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		if msg, ok := boolValueApart(fs, args); ok {
			return usageError(stderr, fs.Name(), "%s", msg), true
		}
		return ExitOK, false
	case errors.Is(err, pflag.ErrHelp):
		usage(stdout)
		return ExitOK, true
	}
	return usageError(stderr, fs.Name(), "%s", describeFlagError(fs, err)), true
}

// boolValueApart finds a boolean flag given its value as a separate
// argument (--relocation.drain_on_shutdown false): pflag takes the bare
// flag as true and "false" as a positional argument, which would silently
// mean the opposite or end in a bare "unexpected argument". Only the
// literals true and false right after a boolean flag without "=" count.
func boolValueApart(fs *pflag.FlagSet, args []string) (string, bool) {
	for i := 1; i < len(args); i++ {
		prev, v := args[i-1], args[i]
		if prev == "--" {
			break // what follows is positional by request
		}
		if v != "true" && v != "false" || !strings.HasPrefix(prev, "-") || strings.Contains(prev, "=") {
			continue
		}
		name := strings.TrimLeft(prev, "-")
		f := fs.Lookup(name)
		if f == nil && len(name) == 1 {
			f = fs.ShorthandLookup(name)
		}
		if f == nil || f.Value.Type() != "bool" {
			continue
		}
		return fmt.Sprintf("--%s %s: a boolean flag takes its value after '=' (--%s=%s); --%s alone means true",
			f.Name, v, f.Name, v, f.Name), true
	}
	return "", false
}

// usageError reports bad usage of the command named cmd on stderr, with
// the hint every usage error carries, and returns ExitUsage.
func usageError(stderr io.Writer, cmd, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\n", cmd, fmt.Sprintf(format, args...))
	fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd)
	return ExitUsage
}

// describeFlagError turns a pflag error into a message that names the flag
// and says what is wrong with it in the operator's terms.
func describeFlagError(fs *pflag.FlagSet, err error) string {
	var invalid *pflag.InvalidValueError
	var unknown *pflag.NotExistError
	var noValue *pflag.ValueRequiredError
	switch {
	case errors.As(err, &invalid):
		f := invalid.GetFlag()
		return fmt.Sprintf("invalid value %q for --%s: %s", invalid.GetValue(), f.Name, valueProblem(f, invalid.GetValue(), errors.Unwrap(invalid)))
	case errors.As(err, &unknown):
		if unknown.GetSpecifiedShortnames() != "" {
			return err.Error() // a one-letter flag: pflag's text names it
		}
		name := unknown.GetSpecifiedName()
		if env, ok := secretKeyEnv(name); ok {
			return fmt.Sprintf("--%s is not a flag: a secret on the command line is visible to every local user; set %s or put %s in the config file",
				name, env, name)
		}
		msg := "unknown flag --" + name
		if s := closestFlag(fs, name); s != "" {
			msg += " (did you mean --" + s + "?)"
		}
		return msg
	case errors.As(err, &noValue):
		if noValue.GetSpecifiedShortnames() != "" {
			return err.Error()
		}
		return fmt.Sprintf("flag --%s needs a value", noValue.GetSpecifiedName())
	}
	return err.Error()
}

// secretKeyEnv reports whether name is a configuration key kept off the
// command line (a secret), and its environment variable.
func secretKeyEnv(name string) (string, bool) {
	for _, k := range config.Keys() {
		if k.Key == name && k.Flag == "" {
			return k.Env, true
		}
	}
	return "", false
}

// valueProblem says why value does not parse as the flag's type. pflag's
// own texts lose the reason ("must be a duration like ...": which part is
// wrong?), so the value is parsed again here for the precise one.
func valueProblem(f *pflag.Flag, value string, cause error) string {
	typ := f.Value.Type()
	switch {
	case typ == "duration":
		if _, err := time.ParseDuration(value); err != nil {
			msg := strings.TrimPrefix(err.Error(), "time: ")
			if i := strings.LastIndex(msg, ` "`); i > 0 {
				msg = msg[:i] // drop the quoted value, already shown
			}
			return msg + " (e.g. 15s, 500ms, 1m30s)"
		}
	case typ == "bool":
		return "want true or false"
	case strings.HasPrefix(typ, "int") && !strings.Contains(typ, "Slice"):
		if _, err := strconv.ParseInt(value, 0, 64); errors.Is(err, strconv.ErrRange) {
			return "out of range"
		}
		return "not a whole number"
	}
	if cause == nil {
		return "not accepted"
	}
	return cause.Error()
}

// closestFlag returns the flag of fs whose name is within two edits of
// name, if exactly one is closest: likely what was meant.
func closestFlag(fs *pflag.FlagSet, name string) string {
	best, bestDist, tie := "", 3, false
	fs.VisitAll(func(f *pflag.Flag) {
		d := config.EditDistance(name, f.Name)
		switch {
		case d < bestDist:
			best, bestDist, tie = f.Name, d, false
		case d == bestDist:
			tie = true
		}
	})
	if tie || bestDist >= len(name) {
		return ""
	}
	return best
}

// configFlagNames are the flags config.Flags registers (--config and one
// per configuration key).
var configFlagNames = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{config.FlagConfigFile: true}
	for _, k := range config.Keys() {
		if k.Flag != "" {
			m[k.Flag] = true
		}
	}
	return m
})

// helpText returns a command's --help output: its usage text, then its own
// flags. The configuration flags that the ctl commands share with run
// (dozens of them) are summed up in one line there, and listed in full only
// where they are the point (allConfig, for run).
func helpText(fs *pflag.FlagSet, text string, allConfig bool) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintln(w, strings.TrimRight(text, "\n"))
		own := pflag.NewFlagSet(fs.Name(), pflag.ContinueOnError)
		own.SortFlags = false
		cfg := pflag.NewFlagSet(fs.Name(), pflag.ContinueOnError)
		cfg.SortFlags = false
		fs.VisitAll(func(f *pflag.Flag) {
			if configFlagNames()[f.Name] {
				cfg.AddFlag(f)
			} else {
				own.AddFlag(f)
			}
		})
		if own.HasFlags() {
			fmt.Fprintf(w, "\nFlags:\n%s", own.FlagUsages())
		}
		switch {
		case !cfg.HasFlags():
		case allConfig:
			fmt.Fprintf(w, "\nConfiguration flags (each overrides the file and MESHNODE_ environment; docs/OPERATIONS.md):\n%s", cfg.FlagUsages())
		default:
			fmt.Fprintln(w, "\nConfiguration flags: --config FILE (or MESHNODE_CONFIG), and one flag per configuration key,\n"+
				"e.g. --location_store.redis.addrs=host:6379, as for 'meshnode run' ('meshnode run --help' lists them).")
		}
	}
}

// loadToolConfig reads the configuration layers of a ctl command. A source
// it cannot read, an unknown key and a value of the wrong type are usage
// errors (exit 2), printed like run's: a mistyped namespace or database
// must not silently become its default and point the command at other
// data (until 2026-12-06 ctl ignored them). The other rules of a running
// node are not checked: ctl needs a few keys only, and may run as a user
// who cannot read the node's key files.
func loadToolConfig(fs *pflag.FlagSet, stderr io.Writer) (config.Config, bool) {
	cfg, err := config.LoadFlagSet(fs, config.LoadOptions{})
	if err == nil {
		err = cfg.LoadProblems()
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return cfg, false
	}
	return cfg, true
}
