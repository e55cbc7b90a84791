// Package command is how pit supervisors and the game server act on the
// table: JSON commands signed with Ed25519, checked against a keyring of
// public keys, and either refused with a reason or turned into table
// inputs. Every command, accepted or refused, is recorded in the audit
// trail before it is answered.
//
// The wire format, the exact bytes that are signed, the keyring file and
// the refusal reasons are documented in docs/mqtt.md.
package signedcmd
