// Package display shows what the controller has committed: the table's
// public and pit views, last-game recall and health over HTTP, the roads,
// and the web display. It only ever shows what the audit trail already
// holds.
//
// Its subpackages carry the table over MQTT: mqttpub publishes the trail
// and the table's state on a table's topics (docs/mqtt.md), command checks
// the supervisors' signed commands, broker is the embedded broker, and
// mqtttest helps tests talk to real brokers.
package display
