package cli

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// runChildEnv makes this test binary act as `meshnode run` with the given
// arguments (space-separated), signals handled as cmd/meshnode does.
const runChildEnv = "CLI_TEST_RUN_CHILD_ARGS"

// A node whose output reader went away keeps running and stops in order.
// `meshnode run … 2>&1 | tee node.log`, then Ctrl-C: the terminal sends
// SIGINT to the whole pipeline, tee ends at once, and the node's next log
// line — the drain's first — was written to a broken pipe. Go kills a
// program that writes to a broken standard output or error with SIGPIPE
// unless it asked for that signal, so the node died in the middle of its
// drain, as if killed with SIGKILL (objects' state lost, lease and
// descriptor left as a crashed run's). A log shipper that restarts does
// the same at any moment.
func TestRunSurvivesItsOutputReaderGoingAway(t *testing.T) {
	if args := os.Getenv(runChildEnv); args != "" {
		ctx, stop := SignalContext(context.Background())
		code := Main(ctx, strings.Fields(args), os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunSurvivesItsOutputReaderGoingAway$")
	cmd.Env = append(os.Environ(), runChildEnv+"=run --location_store.provider=memory --relocation_store.provider=memory "+
		"--node.endpoint=tcp://127.0.0.1:0 --log.level=info")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w // 2>&1 | tee
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	sc := bufio.NewScanner(r)
	serving := false
	for !serving && sc.Scan() {
		serving = strings.Contains(sc.Text(), "serving at")
	}
	if !serving {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("the node did not start")
	}
	r.Close() // tee is gone
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the node ended with %v after its output reader went away and SIGINT; want exit 0 (an orderly stop)", err)
	}
}
