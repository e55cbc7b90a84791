package floor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/internal/floortest"
	"github.com/tablectl/tablectl/internal/testenv"
)

// TestFloorLogins: a floor broker with AuthConfig's logins (a real
// nats-server) refuses an anonymous client and a wrong password; a
// table's login publishes its own rows and checkpoints, which a witness
// on its own login witnesses, and is refused another table's subjects,
// floor alerts and the JetStream API; the witness's login cannot delete
// or change the stream or the consumer; the admin's makes them.
func TestFloorLogins(t *testing.T) {
	testenv.Long(t, "the floor's logins (nats-server, PostgreSQL)")
	subj := Subjects{}
	logins := Logins{Admin: NATSLogin{"admin", "admin-password-0123456789"}, Witnesses: []NATSLogin{{"witness-w1", "w1-password-0123456789"}},
		Tables: map[string]NATSLogin{"FLOOR-01": {TableUser("FLOOR-01"), "t1-password-0123456789"}, "FLOOR-02": {TableUser("FLOOR-02"), "t2-password-0123456789"}}}
	auth, err := AuthConfig(logins, subj, DefaultStream, DefaultStatusStream, DefaultConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(auth, "t1-password") || strings.Contains(auth, "admin-password") {
		t.Fatal("a password in the node's configuration, not its hash")
	}
	cluster := floortest.ClusterAuth(t, 1, auth)
	pool, schema := floortest.Postgres(t)
	store, err := OpenStore(context.Background(), pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := cluster.URLs()
	// Anonymous, and a wrong password: refused.
	for _, opts := range [][]nats.Option{nil, {nats.UserInfo("bridge-FLOOR-01", "wrong")}} {
		if nc, err := nats.Connect(url, opts...); err == nil {
			nc.Close()
			t.Fatalf("connected with %d options: want an authorization violation", len(opts))
		}
	}
	connect := func(l NATSLogin) (*nats.Conn, jetstream.JetStream, chan error) {
		t.Helper()
		errs := make(chan error, 16)
		nc, err := nats.Connect(url, nats.UserInfo(l.User, l.Password), nats.Timeout(ConnectTimeout), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
		if err != nil {
			t.Fatalf("%s: %v", l.User, err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		return nc, js, errs
	}
	reg := &Registry{Heartbeat: time.Hour, Tables: map[string]TableEntry{}}
	c1, c2 := newChain(t, "FLOOR-01", 3), newChain(t, "FLOOR-02", 3)
	c1.registry(reg)
	c2.registry(reg)
	// The admin makes the streams and the consumer (a witness run once
	// with its login).
	adminNC, _, _ := connect(logins.Admin)
	cfg := Config{Name: "admin", NATS: url, NATSOptions: []nats.Option{nats.UserInfo(logins.Admin.User, logins.Admin.Password)},
		Replicas: 1, Store: store, Registry: reg, Logger: quietLog(), ShoeKeep: -1}
	aw, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("the admin's witness: %v", err)
	}
	aw.Close()
	adminNC.Close()
	// The witness on its own login: starts on what the admin made.
	cfg.Name, cfg.NATSOptions = "w1", []nats.Option{nats.UserInfo(logins.Witnesses[0].User, logins.Witnesses[0].Password)}
	w, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("the witness on its login: %v", err)
	}
	defer w.Close()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	// A refused request has no answer: each waits out a short context.
	refused := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		t.Cleanup(cancel)
		return c
	}
	_, wjs, _ := connect(logins.Witnesses[0])
	if err := wjs.DeleteStream(refused(), DefaultStream); err == nil {
		t.Fatal("the witness's login deleted the stream")
	}
	if err := wjs.DeleteConsumer(refused(), DefaultStream, DefaultConsumer); err == nil {
		t.Fatal("the witness's login deleted the shared consumer")
	}
	// FLOOR-01's login: its own subjects pass, the others are refused.
	nc1, js1, errs1 := connect(logins.Tables["FLOOR-01"])
	for _, r := range c1.rows {
		if _, err := js1.Publish(ctx, "tablectl.FLOOR-01.pit.events", rowPayload(r)); err != nil {
			t.Fatalf("FLOOR-01's own row: %v", err)
		}
		cp, _ := json.Marshal(c1.checkpoint(r.Seq, t0.Add(time.Duration(r.Seq)*time.Millisecond)))
		if _, err := js1.Publish(ctx, "tablectl.FLOOR-01.pit.checkpoint", cp); err != nil {
			t.Fatalf("FLOOR-01's own checkpoint: %v", err)
		}
	}
	for _, subject := range []string{"tablectl.FLOOR-02.pit.events", "tablectl.FLOOR-02.status", AlertsSubject, "$JS.API.STREAM.DELETE." + DefaultStream, "$JS.API.INFO"} {
		if err := nc1.Publish(subject, []byte("not json")); err != nil {
			t.Fatal(err)
		}
		nc1.Flush()
		select {
		case err := <-errs1:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				t.Fatalf("FLOOR-01 on %s: %v", subject, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("FLOOR-01 published on %s without a permissions violation", subject)
		}
	}
	if _, err := js1.Stream(refused(), DefaultStream); err == nil {
		t.Fatal("FLOOR-01's login read the stream's state")
	}
	// FLOOR-01's rows are witnessed; nothing of FLOOR-02 is.
	testenv.EventuallyErr(t, 60*time.Second, "FLOOR-01's 3 rows witnessed", func() error {
		var n1, n2 int64
		pool.QueryRow(ctx, store.sql(`SELECT count(*) FILTER (WHERE table_id = 'FLOOR-01'), count(*) FILTER (WHERE table_id = 'FLOOR-02') FROM S.rows`)).Scan(&n1, &n2)
		if n2 != 0 {
			t.Fatalf("%d rows of FLOOR-02 witnessed: FLOOR-01's login wrote them", n2)
		}
		if n1 != 3 {
			return fmt.Errorf("%d witnessed", n1)
		}
		return nil
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAuthConfigRefusesWeakPasswords: the logins' hashes have the lowest
// work factor because their passwords are random; a short one, which
// could be a person's, is refused.
func TestAuthConfigRefusesWeakPasswords(t *testing.T) {
	strong := strings.Repeat("a", MinPasswordLen)
	for _, c := range []struct {
		name  string
		admin string
		ok    bool
	}{
		{"random", strong, true},
		{"one short", strong[1:], false},
		{"a person's", "letmein", false},
	} {
		l := Logins{Admin: NATSLogin{User: "admin", Password: c.admin}, Tables: map[string]NATSLogin{"T1": {User: TableUser("T1"), Password: strong}}}
		_, err := AuthConfig(l, Subjects{}, DefaultStream, DefaultStatusStream, DefaultConsumer)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// TestAuthConfigGroups: a witness's login may take messages through the
// shared consumer and each group's, and no other consumer; a table's
// login through none.
func TestAuthConfigGroups(t *testing.T) {
	strong := strings.Repeat("a", MinPasswordLen)
	l := Logins{Admin: NATSLogin{User: "admin", Password: strong}, Witnesses: []NATSLogin{{User: "witness-w1", Password: strong}},
		Tables: map[string]NATSLogin{"T1": {User: TableUser("T1"), Password: strong}}, Groups: []string{"east", "west"}}
	auth, err := AuthConfig(l, Subjects{}, DefaultStream, DefaultStatusStream, DefaultConsumer)
	if err != nil {
		t.Fatal(err)
	}
	line := func(user string) string {
		for _, l := range strings.Split(auth, "\n") {
			if strings.Contains(l, `user: "`+user+`"`) {
				return l
			}
		}
		t.Fatalf("no line for %s in:\n%s", user, auth)
		return ""
	}
	w, tb := line("witness-w1"), line(TableUser("T1"))
	for _, c := range []string{DefaultConsumer, GroupConsumer(DefaultConsumer, "east"), GroupConsumer(DefaultConsumer, "west")} {
		next := `"$JS.API.CONSUMER.MSG.NEXT.` + DefaultStream + "." + c + `"`
		if !strings.Contains(w, next) {
			t.Errorf("the witness may not take from consumer %s: %s", c, w)
		}
		if strings.Contains(tb, c) {
			t.Errorf("a table's login names consumer %s: %s", c, tb)
		}
	}
	if strings.Contains(w, GroupConsumer(DefaultConsumer, "north")) || strings.Contains(w, "CONSUMER.MSG.NEXT."+DefaultStream+".*") {
		t.Errorf("the witness may take from a consumer of no group: %s", w)
	}
}
