// Package floorbridge writes a table box's Mosquitto bridge to the floor
// (deploy/mosquitto/bridge.conf made the table's): every floor node's
// MQTT listener over TLS with the floor's CA, the table's floor login, a
// client id with a random part. `tablectl init --floor-login` on the box
// and the floor's tests (internal/floorsim) write it with the same code.
package floorbridge

import (
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Options say whose bridge, to where, as whom.
type Options struct {
	// Table is the table's id (BAC-07 in the template is replaced by it).
	Table string
	// Addrs are the floor nodes' MQTT listeners, host:port, in the order
	// the bridge tries them.
	Addrs []string
	// User and Password are the table's floor login (tablectl-floor
	// init's bridge-<id> and its password file).
	User, Password string
	// CAFile is the floor's CA on the box (bridge_cafile).
	CAFile string
	// ClientID is the bridge's client id at the floor; empty: User and a
	// random part (the floor's MQTT listener binds no client id to a
	// login: an id no other login can guess is the binding there is).
	ClientID string
	// RestartTimeout replaces restart_timeout's value when set ("1 3":
	// the tests' quick retry).
	RestartTimeout string
}

// The lines of the template the bridge's own values replace; each must be
// there exactly once.
var keys = []string{"address", "bridge_cafile", "bridge_insecure", "remote_clientid", "remote_username", "remote_password"}

// token is what a value on a Mosquitto config line may be: no blank, no
// line break (Mosquitto splits on blanks).
var token = regexp.MustCompile(`^[^\s#]+$`)

// tableID is what a table id on the floor may be (no '.': NATS's MQTT
// listener refuses it in a topic).
var tableID = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Conf makes the template (deploy/mosquitto/bridge.conf's text, its table
// BAC-07) the bridge of o.Table.
func Conf(template string, o Options) (string, error) {
	switch {
	case !tableID.MatchString(o.Table):
		return "", fmt.Errorf("bridge: table id %q: want letters, digits, '-' and '_' only", o.Table)
	case len(o.Addrs) == 0:
		return "", errors.New("bridge: no floor node's address")
	case o.User == "" || o.Password == "" || o.CAFile == "":
		return "", errors.New("bridge: the table's floor login (user, password) and the floor's CA are needed: no bridge goes to the floor without them")
	case !strings.Contains(template, "BAC-07"):
		return "", errors.New("bridge template: no BAC-07 to replace")
	}
	if o.ClientID == "" {
		o.ClientID = o.User + "-" + strings.ToLower(rand.Text()[:12])
	}
	values := map[string]string{
		"address":         strings.Join(o.Addrs, " "),
		"bridge_cafile":   o.CAFile,
		"bridge_insecure": "false",
		"remote_clientid": o.ClientID,
		"remote_username": o.User,
		"remote_password": o.Password,
	}
	for _, a := range o.Addrs {
		if !token.MatchString(a) {
			return "", fmt.Errorf("bridge: address %q", a)
		}
	}
	for k, v := range values {
		if k != "address" && !token.MatchString(v) {
			return "", fmt.Errorf("bridge: %s %q: no blank, '#' or line break", k, v)
		}
	}
	text := strings.ReplaceAll(template, "BAC-07", o.Table)
	for _, k := range keys {
		re := regexp.MustCompile(`(?m)^` + k + `( .*)?$`)
		if n := len(re.FindAllStringIndex(text, -1)); n != 1 {
			return "", fmt.Errorf("bridge template: %d %s lines, want one", n, k)
		}
		text = re.ReplaceAllLiteralString(text, k+" "+values[k])
	}
	if o.RestartTimeout != "" {
		text = regexp.MustCompile(`(?m)^restart_timeout .*$`).ReplaceAllLiteralString(text, "restart_timeout "+o.RestartTimeout)
	}
	if regexp.MustCompile(`(?m)^bridge_(certfile|keyfile|insecure true)`).MatchString(text) {
		return "", errors.New("bridge template: a client certificate or bridge_insecure true: the floor takes the table's login, and the bridge verifies the floor")
	}
	return text, nil
}

// Values reads back what a bridge config says of the keys Conf sets: for
// checking a written bridge against the floor's logins.
func Values(conf string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(conf, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), " ")
		for _, want := range keys {
			if k == want {
				m[k] = v
			}
		}
	}
	return m
}
