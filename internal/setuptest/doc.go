// Package setuptest holds the tests that keep a newcomer's set-up honest:
// the test command's install list (.ci/packages, installed by .ci/install)
// names every Debian package a test asks for, installing it into a clean
// Debian 12 container gives every tool the suite uses (waiting for a busy
// package manager), and every command README.md prints runs as printed.
// It has no code of its own.
package setuptest
