// Package archtest holds the test that keeps the layout honest: it reads
// the package table of docs/architecture.md and checks the module against
// it, so the import rule (the flow is one way; coup imports nothing of
// ours) is enforced and the document cannot drift from the code. It has no
// code of its own.
package archtest
