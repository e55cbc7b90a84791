// Package display shows what the controller has committed: the table's
// public and pit views, last-game recall and health over HTTP, and (as the
// project grows) MQTT topics, roads and the web display. It only ever shows
// what the audit trail already holds.
package display
