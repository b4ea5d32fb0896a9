package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// signalled is the cause of a context that a signal ended. It is also
// context.Canceled, as signal.NotifyContext's cause is.
type signalled struct{ sig os.Signal }

func (s signalled) Error() string { return s.sig.String() + " signal received" }

func (s signalled) Is(target error) bool { return target == context.Canceled }

// notifyContext is signal.NotifyContext whose cause names the signal, so
// that a command can exit with 128 + its number, as a shell reports a
// command a signal ended. stop unregisters the signals: a second one then
// gets Go's default handling.
func notifyContext(parent context.Context, sigs ...os.Signal) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case s := <-ch:
			cancel(signalled{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(context.Canceled)
	}
}

// signalExit is 128 + the number of the signal that ended ctx, or
// fallback when no signal did.
func signalExit(ctx context.Context, fallback int) int {
	var s signalled
	if errors.As(context.Cause(ctx), &s) {
		if n, ok := s.sig.(syscall.Signal); ok {
			return 128 + int(n)
		}
	}
	return fallback
}
