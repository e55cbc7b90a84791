package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/smallfile"
)

func init() {
	register(command{Name: "init", Short: "make the floor broker's logins: a password per table, witness and admin, and the nodes' authorization block", Run: runInit})
}

func runInit(args []string, stdout io.Writer) error {
	fs := newFlagSet("init")
	fs.Usage = func() {
		usageHead(fs.Output(), "init", "--registry FILE --dir DIR [flags]", `Makes the floor broker's logins (docs/floor.md, "Logins"): a password
file for the admin (the only login that may create, change or delete
streams and consumers), for each --witness, and for each table of the
registry (its bridge's login: it may publish only its own subjects), and
nats-auth.conf, the authorization block each node's configuration
includes (bcrypt hashes, no password). A password file already there is
kept; nats-auth.conf is written again from them (run it again when a
table joins the registry).`)
		printFlags(fs.Output(), fs)
	}
	registry := fs.String("registry", "", "the tables' registry `file` (required)")
	dir := fs.String("dir", "", "the `folder` for the password files and nats-auth.conf (required; made 0700)")
	var witnesses []string
	fs.Func("witness", "a witness's `name` (repeatable; default w1 and w2)", func(s string) error {
		witnesses = append(witnesses, s)
		return nil
	})
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *registry == "" || *dir == "" {
		return usageError(fs, "--registry and --dir are required")
	}
	if len(witnesses) == 0 {
		witnesses = []string{"w1", "w2"}
	}
	reg, err := floor.LoadRegistry(*registry)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	var l floor.Logins
	if l.Admin, err = login(*dir, "admin"); err != nil {
		return err
	}
	for _, w := range witnesses {
		lw, err := login(*dir, "witness-"+w)
		if err != nil {
			return err
		}
		l.Witnesses = append(l.Witnesses, lw)
	}
	l.Tables = map[string]floor.NATSLogin{}
	var tables []string
	for t := range reg.Tables {
		tables = append(tables, t)
	}
	slices.Sort(tables)
	for _, t := range tables {
		if l.Tables[t], err = login(*dir, floor.TableUser(t)); err != nil {
			return err
		}
	}
	auth, err := floor.AuthConfig(l, floor.Subjects{}, floor.DefaultStream, floor.DefaultStatusStream, floor.DefaultConsumer)
	if err != nil {
		return err
	}
	conf := filepath.Join(*dir, "nats-auth.conf")
	if err := os.WriteFile(conf, []byte(auth), 0o640); err != nil {
		return err
	}
	fmt.Fprintf(stdout, `tablectl-floor init: %d table logins, %d witness logins and the admin's in %s

  nodes        include %s in each node's configuration (docs/floor.md): no anonymous client
  admin        %s: makes the streams (tablectl-floor witness --nats-user admin --nats-password-file ... once)
  witnesses    --nats-user witness-NAME --nats-password-file %s/witness-NAME.password
  tables       each table's bridge: remote_username bridge-ID, remote_password from %s/bridge-ID.password
               (it may publish only tablectl.ID.>; send each box its own file only)
`, len(tables), len(witnesses), *dir, conf, filepath.Join(*dir, "admin.password"), *dir, *dir)
	return nil
}

// login reads user's password file in dir, or makes it.
func login(dir, user string) (floor.NATSLogin, error) {
	path := filepath.Join(dir, user+".password")
	p, err := smallfile.Secret(path)
	switch {
	case err == nil:
		return floor.NATSLogin{User: user, Password: p}, nil
	case !errors.Is(err, fs.ErrNotExist):
		return floor.NATSLogin{}, err
	}
	p = strings.ToLower(rand.Text())
	if err := os.WriteFile(path, []byte(p+"\n"), 0o600); err != nil {
		return floor.NATSLogin{}, err
	}
	return floor.NATSLogin{User: user, Password: p}, nil
}
