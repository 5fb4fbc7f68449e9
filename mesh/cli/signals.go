package cli

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// notifySignals delivers the shutdown signals (stopSignals) to c until the
// returned function is called (a variable: tests send their own).
var notifySignals = func(c chan<- os.Signal) (stop func()) {
	signal.Notify(c, stopSignals()...)
	return func() { signal.Stop(c) }
}

// stopSignals are the signals that stop `run` in order: SIGINT, SIGTERM
// and SIGHUP — the terminal it was started in closed (an ssh session
// dropped). Until 2026-12-07 SIGHUP was not handled, and its default action
// killed the process at once, like SIGKILL: no drain, the objects' state
// lost, records, lease and descriptor left as a crashed run's. A process
// started with SIGHUP ignored (nohup) keeps ignoring it: signal.Notify
// would undo that, so it is looked at once, before any Notify.
var stopSignals = sync.OnceValue(func() []os.Signal {
	if signal.Ignored(syscall.SIGHUP) {
		return []os.Signal{os.Interrupt, syscall.SIGTERM}
	}
	return []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}
})

// signalsKey finds a SignalContext's repeat watch in a context.
type signalsKey struct{}

// signalWatch is what SignalContext leaves in its context: repeated is
// closed by the first stop signal that arrives once the context is done.
type signalWatch struct {
	repeated chan struct{}
	once     sync.Once
	sig      os.Signal // the first repeat; read after repeated is closed
}

func (w *signalWatch) repeat(s os.Signal) {
	w.once.Do(func() { w.sig = s; close(w.repeated) })
}

// SignalContext returns a context cancelled by the first SIGINT, SIGTERM or
// SIGHUP (stopSignals; its context.Cause names the signal) and remembers
// any later one, so that `run` stops a drain on a second signal however
// soon it follows the first. Call stop when the program ends. Main is meant to be called with it;
// applications embedding the stock commands should use it instead of
// signal.NotifyContext.
//
// Why not signal.NotifyContext: its channel holds one signal and nothing
// reads it after the first, so a second Ctrl-C sent before `run` began to
// listen for one of its own (between the context's cancellation and the
// drain's start) was swallowed, and the drain ran to its end (a review of
// the second-signal handling).
func SignalContext(parent context.Context) (ctx context.Context, stop func()) {
	w := &signalWatch{repeated: make(chan struct{})}
	ctx, cancel := context.WithCancelCause(context.WithValue(parent, signalsKey{}, w))
	sigs := make(chan os.Signal, 4)
	unnotify := notifySignals(sigs)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case s := <-sigs:
				// Judged in arrival order by this one goroutine: a signal
				// that finds the context already done is a repeat, whether
				// this goroutine or the parent ended it.
				if ctx.Err() == nil {
					cancel(signalError(s.String() + " signal received"))
				} else {
					w.repeat(s)
				}
			case <-quit:
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			unnotify()
			close(quit)
			wg.Wait()
			cancel(context.Canceled)
		})
	}
}

// signalError is the cause SignalContext cancels its context with.
type signalError string

func (e signalError) Error() string { return string(e) }

// secondSignal listens, while the node stops, for one more stop signal:
// during a drain it closes stop (the drain ends where it is and the node
// shuts down at once); during a bare shutdown, which ends within
// shutdown_deadline anyway, it only says so. Without it a second signal
// was swallowed without a word, and an operator who pressed Ctrl-C again
// waited out the drain not knowing whether anything had heard (an operator
// try-out). With a context from SignalContext it sees a repeat that came at
// any time after the first signal; with another context it listens from
// this call on. The returned function stops listening.
func secondSignal(ctx context.Context, log *slog.Logger, drain bool, stop chan<- struct{}) (done func()) {
	var (
		watch    *signalWatch
		repeated <-chan struct{}
		sigs     chan os.Signal
		unnotify = func() {}
	)
	if w, ok := ctx.Value(signalsKey{}).(*signalWatch); ok {
		watch, repeated = w, w.repeated
	} else {
		sigs = make(chan os.Signal, 1)
		unnotify = notifySignals(sigs)
	}
	quit := make(chan struct{})
	go func() {
		var what string
		select {
		case s := <-sigs:
			what = s.String()
		case <-repeated:
			what = watch.sig.String()
		case <-quit:
			return
		}
		if drain {
			log.Warn("second signal: the drain stops now; the objects not moved yet are removed by the shutdown (their state is lost)",
				"signal", what)
			close(stop)
		} else {
			log.Warn("second signal: the node is already shutting down, within shutdown_deadline; SIGKILL stops the process at once",
				"signal", what)
		}
	}()
	return func() { close(quit); unnotify() }
}

// survivePipeReaderGone keeps a running node alive when the reader of its
// standard output or error goes away, until the returned function is
// called: its writes then fail (and are dropped) instead of killing it.
// Go kills a program that writes to a broken stdout or stderr with SIGPIPE
// unless it asked for that signal, and `meshnode run … 2>&1 | tee node.log`
// stopped with Ctrl-C loses tee at once: the node's next log line, its
// drain's first, killed it in the middle of the drain, as SIGKILL would (a
// review, 2026-12-07; a restarting log shipper does the same at any time).
// Only `run` does this: the one-shot commands still end on a closed pipe
// (`ctl list --all | head`), as command-line tools do.
func survivePipeReaderGone() (stop func()) {
	c := make(chan os.Signal, 1) // never read: a notified signal is dropped when it is full
	signal.Notify(c, syscall.SIGPIPE)
	return func() { signal.Stop(c) }
}
