package floor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// NATSLogin is one login of the floor broker: a user and its password
// (kept in a file of its own by whoever uses it; the nodes hold only its
// bcrypt hash).
type NATSLogin struct{ User, Password string }

// Logins are the floor broker's logins: the admin's (the only one that
// may create, change or delete streams and consumers), each witness's,
// and each table's (its bridge's), by table id.
type Logins struct {
	Admin     NATSLogin
	Witnesses []NATSLogin
	Tables    map[string]NATSLogin
	// Groups are the witnesses' groups (the registry's): a witness may
	// take messages through each group's consumer too.
	Groups []string
}

// TableUser is the user name of a table's login: its bridge's remote_username
// (deploy/mosquitto/bridge.conf).
func TableUser(table string) string { return "bridge-" + table }

// AuthConfig is the nodes' authorization block for these logins, least
// privilege (docs/floor.md's threat model):
//
//   - a table may publish only its own subjects (root.<id>.>) and the
//     MQTT listener's own bookkeeping, and receive only what is meant for
//     it (its commands: resync requests, the pit's signed commands);
//   - a witness may read the stream through the shared consumer, read the
//     status stream through consumers of its own, read the streams' and
//     the consumer's state, publish floor alerts and the tables' resync
//     requests; it can create, change or delete no stream and not the
//     shared consumer;
//   - the admin may do anything (the streams are made with it);
//   - no anonymous client: a connection without a login is refused.
//
// Each password is given as a bcrypt hash: a node's file leaks no login.
func AuthConfig(l Logins, subj Subjects, stream, statusStream, consumer string) (string, error) {
	var b strings.Builder
	b.WriteString("# The floor's logins (tablectl-floor init; docs/floor.md). No anonymous client.\n")
	b.WriteString("authorization {\n  users = [\n")
	user := func(login NATSLogin, pub, sub []string) error {
		if len(login.Password) < MinPasswordLen {
			return fmt.Errorf("login %s: a password of %d characters: want a random one of %d or more (tablectl-floor init makes them)", login.User, len(login.Password), MinPasswordLen)
		}
		h, err := bcrypt.GenerateFromPassword([]byte(login.Password), bcryptCost)
		if err != nil {
			return fmt.Errorf("login %s: %w", login.User, err)
		}
		fmt.Fprintf(&b, "    {user: %s, password: %s, permissions: {publish: {allow: %s}, subscribe: {allow: %s}}}\n",
			strconv.Quote(login.User), strconv.Quote(string(h)), list(pub), list(sub))
		return nil
	}
	if err := user(l.Admin, []string{">"}, []string{">"}); err != nil {
		return "", err
	}
	root := subj.root()
	js := func(f string, a ...any) string { return "$JS.API." + fmt.Sprintf(f, a...) }
	witnessPub := []string{
		"$JS.API.INFO",
		js("STREAM.INFO.%s", stream), js("STREAM.INFO.%s", statusStream),
		// The floor view's own ordered consumers on the status stream.
		js("CONSUMER.CREATE.%s.>", statusStream), js("CONSUMER.DELETE.%s.>", statusStream),
		js("CONSUMER.INFO.%s.>", statusStream), js("CONSUMER.MSG.NEXT.%s.>", statusStream),
		"$JS.ACK." + statusStream + ".>", "$JS.FC.>",
		AlertsSubject, root + ".*.cmd",
	}
	for _, c := range append([]string{consumer}, groupConsumers(consumer, l.Groups)...) {
		witnessPub = append(witnessPub, js("CONSUMER.INFO.%s.%s", stream, c), js("CONSUMER.MSG.NEXT.%s.%s", stream, c), "$JS.ACK."+stream+"."+c+".>")
	}
	witnessSub := []string{"_INBOX.>", AlertsSubject, root + ".*.status", root + ".*.pit.alerts.active"}
	for _, w := range l.Witnesses {
		if err := user(w, witnessPub, witnessSub); err != nil {
			return "", err
		}
	}
	tables := make([]string, 0, len(l.Tables))
	for t := range l.Tables {
		tables = append(tables, t)
	}
	slices.Sort(tables)
	for _, t := range tables {
		if err := checkTable(t); err != nil {
			return "", err
		}
		pub := []string{root + "." + t + ".>"}
		sub := []string{root + "." + t + ".cmd", root + "." + t + ".cmd.>", "_INBOX.>"}
		if err := user(l.Tables[t], pub, sub); err != nil {
			return "", err
		}
	}
	b.WriteString("  ]\n}\n")
	return b.String(), nil
}

func groupConsumers(consumer string, groups []string) []string {
	out := make([]string, len(groups))
	for i, g := range groups {
		out[i] = GroupConsumer(consumer, g)
	}
	return out
}

func list(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// bcryptCost is the work factor of the logins' password hashes. Each
// connection pays it as the server checks the password, and a high one
// made connections time out on a loaded node (seconds a check under the
// race detector). A work factor slows the guessing of passwords people
// choose; the floor's are random (tablectl-floor init: 26 characters of
// base32, 130 bits, and MinPasswordLen at least), which no work factor
// needs, so the lowest bcrypt takes.
const bcryptCost = bcrypt.MinCost

// MinPasswordLen is the shortest password a floor login may have: 20
// random base32 characters are 100 bits.
const MinPasswordLen = 20

// ConnectTimeout bounds a connection to the floor broker up to its first
// answer: with logins, the server checks a bcrypt hash first (tens of
// milliseconds on a quiet node, seconds on a loaded one), which nats.go's
// default of 2 s does not always cover.
const ConnectTimeout = 10 * time.Second
