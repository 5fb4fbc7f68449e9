package transport

import (
	"io"
	"log"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// The zmq4 crash reproduction re-executes the test binary as a child
	// hosting a stock ROUTER (zmq4bugs_test.go).
	if os.Getenv(crashChildEnv) != "" {
		runCrashChild()
	}
	if os.Getenv(senderChildEnv) != "" {
		runSenderChild()
	}
	os.Exit(m.Run())
}

func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }
