// Package mqttpub publishes the table over MQTT: every audit row in order
// on pit/events, the table as the public and the pit see it on retained
// topics, alerts, the remaining shoe's exact odds, checkpoints and command
// replies, all under one prefix per table (docs/mqtt.md is the contract).
//
// Publishing follows the trail. The Publisher is fed the records the
// recorder has committed; it keeps its own copy of the table by running
// those rows through audit.Replayer (the same code restart recovery uses),
// so whatever it publishes, retained state included, is a function of rows
// already in the trail. When its queue overflows or the broker is away it
// drops what it holds and reads the rows back from the trail by sequence
// number, so nothing is lost and nothing is published out of order.
package mqttpub

import (
	"fmt"
	"strings"
)

// Topic names under the prefix.
const (
	TopicStatus          = "status"
	TopicPublicCoup      = "public/coup"
	TopicPublicShoe      = "public/shoe"
	TopicPublicRoads     = "public/roads"
	TopicPitCoup         = "pit/coup"
	TopicPitEvents       = "pit/events"
	TopicPitAlerts       = "pit/alerts"
	TopicPitAlertsActive = "pit/alerts/active"
	TopicPitShoe         = "pit/shoe"
	TopicPitCheckpoint   = "pit/checkpoint"
	TopicCmd             = "cmd"
	TopicCmdReply        = "cmd/reply"
)

// DefaultPrefix is the prefix of a table's topics unless configured.
func DefaultPrefix(table string) string { return "tablectl/" + table }

// Topics names a table's topics.
type Topics struct {
	Prefix string
}

// Topic is the full name of a topic under the prefix.
func (t Topics) Topic(name string) string { return t.Prefix + "/" + name }

// CheckPrefix refuses a prefix MQTT would misread: empty, with wildcards,
// with a NUL, with an empty level, or starting with '$'.
func CheckPrefix(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("topic prefix is empty")
	case strings.ContainsAny(p, "+#\x00"):
		return fmt.Errorf("topic prefix %q: no wildcards or NUL", p)
	case strings.HasPrefix(p, "$"):
		return fmt.Errorf("topic prefix %q: must not start with $", p)
	case strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "//"):
		return fmt.Errorf("topic prefix %q: no empty levels", p)
	case len(p) > 512:
		return fmt.Errorf("topic prefix is %d bytes; keep it under 512", len(p))
	}
	return nil
}

// Message is one MQTT message to publish.
type Message struct {
	Topic    string
	QoS      byte
	Retained bool
	Payload  []byte
}
