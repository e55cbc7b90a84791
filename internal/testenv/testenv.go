// Package testenv decides, in one place, what a test does when a real part
// it talks to is missing: the shared Mosquitto, a mosquitto binary, headless
// Chromium, root, a writable tmpfs, systemd-analyze.
//
// Policy: `go test -short ./...` must pass on a laptop with none of them, so
// a missing part skips the test with a message naming what is missing and
// how to get it. `.ci/test` sets TABLECTL_TEST_ALL=1: there a missing part
// fails the test instead, so the full suite can never pass by skipping.
//
// It also holds the one wait (Eventually, EventuallyErr, WaitFor): a test
// waits for the thing it means, named, not for a fixed time. It is for
// tests only.
package testenv

import (
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// AllEnv, set to 1, turns every skip for a missing part into a failure
// (.ci/test sets it).
const AllEnv = "TABLECTL_TEST_ALL"

// All reports whether the whole suite is demanded (AllEnv is 1).
func All() bool { return os.Getenv(AllEnv) == "1" }

// Missing skips the test, or fails it under AllEnv, saying what it needs.
func Missing(t testing.TB, what string) {
	t.Helper()
	if All() {
		t.Fatalf("missing: %s (%s=1 demands every part; .ci/test installs them)", what, AllEnv)
	}
	t.Skipf("skipped: needs %s", what)
}

// Long skips a test that is too slow or too heavy for -short, naming what
// it would run; under AllEnv -short is refused, since it would skip.
func Long(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		if All() {
			t.Fatalf("-short with %s=1: %s would be skipped", AllEnv, what)
		}
		t.Skipf("skipped in -short: %s", what)
	}
}

// Command returns the path of a program the test runs, or skips (fails
// under AllEnv) naming the Debian package that has it.
func Command(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" (Debian package "+pkg+")")
	}
	return p
}

// Listening skips (fails under AllEnv) unless something accepts TCP
// connections at addr, named by what.
func Listening(t testing.TB, addr, what string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		Missing(t, what+" on "+addr+" ("+err.Error()+")")
		return
	}
	c.Close()
}

// Root skips (fails under AllEnv) unless the test runs as root, which it
// needs for why.
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "root, "+why)
	}
}
