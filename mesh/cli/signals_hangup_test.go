package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// signalChildEnv makes this test binary act as a process that only waits
// for SignalContext's first signal (TestHangupStopsTheNodeInOrder).
const signalChildEnv = "CLI_TEST_SIGNAL_CHILD"

// signalChild is the child's body: it takes the binary's signal handling
// as `meshnode run` does (cmd/meshnode/main.go), says so, and prints the
// cause of the context's end. Exit 0 when a signal ended it.
func signalChild() {
	ctx, stop := SignalContext(context.Background())
	defer stop()
	fmt.Println("ready")
	select {
	case <-ctx.Done():
		fmt.Println("cause:", context.Cause(ctx))
		stop()
		os.Exit(0)
	case <-time.After(30 * time.Second):
		fmt.Println("no signal")
		os.Exit(3)
	}
}

// A hangup (the terminal `meshnode run` was started in closes: an ssh
// session dropped, a terminal window shut) stops the node as SIGTERM does:
// its drain, then the §11 shutdown. Before, SIGHUP was not handled and its
// default action killed the process at once (exit 129), like SIGKILL: no
// drain, every object's state lost, its records, lease and descriptor left
// as a crashed run's. A process started with SIGHUP ignored (nohup) keeps
// ignoring it and still stops on SIGTERM.
func TestHangupStopsTheNodeInOrder(t *testing.T) {
	if os.Getenv(signalChildEnv) == "1" {
		signalChild()
		return
	}
	run := func(t *testing.T, ignoreHangup bool, sigs ...syscall.Signal) (string, error) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestHangupStopsTheNodeInOrder$")
		if !ignoreHangup && signal.Ignored(syscall.SIGHUP) {
			// This test process itself runs with SIGHUP ignored (a CI
			// started under nohup): the child would inherit it and rightly
			// keep ignoring it. Started as from a terminal instead, through
			// env(1), which resets the disposition before exec.
			cmd = exec.Command("env", "--default-signal=HUP", os.Args[0], "-test.run=^TestHangupStopsTheNodeInOrder$")
		}
		cmd.Env = append(os.Environ(), signalChildEnv+"=1")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if ignoreHangup {
			// As nohup starts a program: SIGHUP ignored, which the child
			// inherits across exec.
			signal.Ignore(syscall.SIGHUP)
		}
		err = cmd.Start()
		if ignoreHangup {
			signal.Reset(syscall.SIGHUP)
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		if !sc.Scan() || sc.Text() != "ready" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child did not start: %q", sc.Text())
		}
		for _, s := range sigs {
			if err := cmd.Process.Signal(s); err != nil {
				t.Fatal(err)
			}
		}
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		return strings.Join(lines, "\n"), cmd.Wait()
	}

	t.Run("hangup", func(t *testing.T) {
		got, err := run(t, false, syscall.SIGHUP)
		if err != nil {
			t.Fatalf("SIGHUP ended the process with %v (%q); want the context cancelled and an orderly exit", err, got)
		}
		if !strings.Contains(got, "cause: hangup signal received") {
			t.Fatalf("output %q; want the context's cause to name the hangup", got)
		}
	})
	t.Run("nohup", func(t *testing.T) {
		got, err := run(t, true, syscall.SIGHUP, syscall.SIGTERM)
		if err != nil {
			t.Fatalf("exit %v (%q)", err, got)
		}
		if !strings.Contains(got, "cause: terminated signal received") {
			t.Fatalf("output %q; under nohup SIGHUP stays ignored and SIGTERM stops the node", got)
		}
	})
}
