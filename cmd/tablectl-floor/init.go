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
	"github.com/tablectl/tablectl/internal/natsserver"
	"github.com/tablectl/tablectl/internal/smallfile"
)

func init() {
	register(command{Name: "init", Short: "make the floor's logins (a password per table, witness and admin), its CA and certificates, and each node's files", Run: runInit})
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
table joins the registry).

It also makes the floor's CA (ca.crt, ca.key: ECDSA P-256, the key 0600)
and, for each --node NAME=HOST[,HOST...], the folder nodes/NAME with what
that node's configuration folder (--node-dir) needs beside the shipped
floor-node.conf: its certificate for those hosts, the CA, nats-auth.conf
and floor-node.vars.conf (its name, listeners, routes to every --node,
file paths). With --view-host, a certificate for the floor view's HTTPS
(floor-view.crt, .key). Certificates and keys already there are kept.`)
		printFlags(fs.Output(), fs)
	}
	registry := fs.String("registry", "", "the tables' registry `file` (required)")
	dir := fs.String("dir", "", "the `folder` for the password files and nats-auth.conf (required; made 0700)")
	var witnesses []string
	fs.Func("witness", "a witness's `name` (repeatable; default w1 and w2)", func(s string) error {
		witnesses = append(witnesses, s)
		return nil
	})
	var nodes []floorNode
	fs.Func("node", "a floor node `NAME=HOST[,HOST...]`: its certificate names the hosts, the first is where the others route to (repeatable)", func(s string) error {
		n, err := parseNode(s)
		nodes = append(nodes, n)
		return err
	})
	var viewHosts []string
	fs.Func("view-host", "a `HOST` name or address the floor view is reached at (repeatable): floor-view.crt for witness --tls-cert", func(s string) error {
		viewHosts = append(viewHosts, s)
		return nil
	})
	np := nodePaths{
		confDir:  fs.String("node-dir", "/etc/nats", "the nodes' configuration `folder`, where nodes/NAME's files go (named in floor-node.vars.conf)"),
		storeDir: fs.String("store-dir", "/var/lib/nats", "the nodes' JetStream `folder`"),
		maxFile:  fs.String("max-file-store", "200GB", "each node's JetStream file store `limit`"),
	}
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
	l := floor.Logins{Groups: reg.Groups()} // each group's consumer is the witnesses' too
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
	ca, err := floor.EnsureCA(*dir)
	if err != nil {
		return err
	}
	if err := writeNodes(*dir, ca, nodes, np, auth); err != nil {
		return err
	}
	if len(viewHosts) > 0 {
		if _, _, err := ca.EnsureCert(*dir, "floor-view", viewHosts); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, `tablectl-floor init: %d table logins, %d witness logins and the admin's in %s

  nodes        include %s in each node's configuration (docs/floor.md): no anonymous client
  admin        %s: makes the streams (tablectl-floor witness --nats-user admin --nats-password-file ... once)
  witnesses    --nats-user witness-NAME --nats-password-file %s/witness-NAME.password
  tables       each table's bridge: remote_username bridge-ID, remote_password from %s/bridge-ID.password
               (it may publish only tablectl.ID.>; send each box its own file only):
               tablectl init --floor-login bridge-ID.password --floor-ca ca.crt --floor-node HOST:8883 ... on the box
  TLS          the floor's CA %s (every client trusts it: witness and view --nats-ca, the bridges);
               %d node folders under %s/nodes: copy each into its node's %s beside floor-node.conf
`, len(tables), len(witnesses), *dir, conf, filepath.Join(*dir, "admin.password"), *dir, *dir, ca.CertFile, len(nodes), *dir, *np.confDir)
	return nil
}

// floorNode is one --node: its name and the hosts its certificate names.
type floorNode struct {
	name  string
	hosts []string
}

func parseNode(s string) (floorNode, error) {
	name, hosts, ok := strings.Cut(s, "=")
	n := floorNode{name: name}
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			n.hosts = append(n.hosts, h)
		}
	}
	if !ok || name == "" || strings.ContainsAny(name, "/ ") || len(n.hosts) == 0 {
		return n, fmt.Errorf("%q: want NAME=HOST[,HOST...]", s)
	}
	return n, nil
}

// nodePaths are where a node keeps its files (named in its vars).
type nodePaths struct{ confDir, storeDir, maxFile *string }

// The floor node's ports (deploy/nats/floor-node.conf's listeners).
const (
	clientPort = 4222
	mqttPort   = 8883
	routePort  = 6222
)

// writeNodes writes nodes/NAME for each node: its certificate and key,
// the CA, the logins and floor-node.vars.conf.
func writeNodes(dir string, ca *floor.CA, nodes []floorNode, np nodePaths, auth string) error {
	var routes []string
	for _, n := range nodes {
		routes = append(routes, fmt.Sprintf("nats-route://%s:%d", n.hosts[0], routePort))
	}
	caPEM, err := os.ReadFile(ca.CertFile)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		nd := filepath.Join(dir, "nodes", n.name)
		if err := os.MkdirAll(nd, 0o700); err != nil {
			return err
		}
		if _, _, err := ca.EnsureCert(nd, "node", n.hosts); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		on := func(f string) string { return filepath.Join(*np.confDir, f) }
		v := natsserver.NodeVars{Name: n.name, ClientListen: fmt.Sprintf("0.0.0.0:%d", clientPort), MQTTListen: fmt.Sprintf("0.0.0.0:%d", mqttPort),
			RouteListen: fmt.Sprintf("0.0.0.0:%d", routePort), Routes: routes, StoreDir: *np.storeDir, MaxMemoryStore: "1GB", MaxFileStore: *np.maxFile,
			Replicas: min(len(nodes), 3), CAFile: on(floor.CAFile), CertFile: on("node.crt"), KeyFile: on("node.key")}
		for name, text := range map[string]string{"floor-node.vars.conf": v.Conf(), "nats-auth.conf": auth, floor.CAFile: string(caPEM)} {
			if err := os.WriteFile(filepath.Join(nd, name), []byte(text), 0o600); err != nil {
				return err
			}
		}
	}
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
