// Package compliance holds the test that keeps docs/compliance.md honest:
// every test the map names exists, and every rule the map must cover is
// there. It has no code of its own.
package compliance
