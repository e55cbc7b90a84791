// Package natsserver runs a NATS cluster on loopback, JetStream and the
// MQTT listener on in each node: the floor broker of the floor's tests,
// the bench and the laptop demo. Nodes are killed and started again to
// play a node's failure. Start runs each node as a nats-server child
// process (one named by TABLECTL_NATS_SERVER, the build of go.mod's
// version that .ci/test caches, or Debian's, 2.9 or later): what a floor
// runs, killed as a crash would.
// StartEmbedded runs them in this process (github.com/nats-io/nats-server
// as a library, the same configuration): the laptop demo, nothing to
// install.
package natsserver

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tablectl/tablectl/internal/freeport"
)

// BinaryEnv names a nats-server binary to use instead of the one on PATH.
const BinaryEnv = "TABLECTL_NATS_SERVER"

// CacheDir keeps a nats-server built from go.mod's version
// (.ci/test builds it there when missing): 2.11 or later, which the
// witnesses' pinned consumer needs and Debian's 2.9 is not.
const CacheDir = "/var/cache/tablectl"

// ModuleVersion is the version of github.com/nats-io/nats-server/v2 this
// program is built with, go.mod's ("v2.15.2").
func ModuleVersion() string { return "v" + server.VERSION }

// CachedBinary is where CacheDir keeps the nats-server of ModuleVersion.
func CachedBinary() string {
	return filepath.Join(CacheDir, "nats-server-"+ModuleVersion())
}

// Binary is the nats-server to run: the one BinaryEnv names, else the
// build of go.mod's version in CacheDir, else one on PATH (Debian's).
func Binary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		return p, nil
	}
	if fi, err := os.Stat(CachedBinary()); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return CachedBinary(), nil
	}
	for _, p := range []string{"nats-server", "/usr/sbin/nats-server", "/usr/local/bin/nats-server"} {
		if q, err := exec.LookPath(p); err == nil {
			return q, nil
		}
	}
	return "", errors.New("nats-server is not installed (Debian package nats-server)")
}

// Node is one server of the cluster.
type Node struct {
	Name       string
	ClientPort int
	MQTTPort   int
	RoutePort  int
	conf       string
	tls        bool

	mu   sync.Mutex
	cmd  *exec.Cmd
	srv  *server.Server // embedded
	done chan struct{}
	log  strings.Builder
}

// Cluster is a running cluster.
type Cluster struct {
	Nodes    []*Node
	bin      string
	dir      string
	embedded bool
	auth     string // appended to each node's configuration
	tls      *TLS
}

// Options say what cluster StartFloor runs.
type Options struct {
	// Nodes is how many (3 on a floor).
	Nodes int
	// Auth is the nodes' nats-auth.conf (floor.AuthConfig): the floor's
	// logins, no anonymous client.
	Auth string
	// TLS are the floor's CA and the nodes' certificate (for 127.0.0.1).
	TLS TLS
	// Embedded runs the nodes in this process (the laptop demo).
	Embedded bool
}

// TLS are the files of the floor's TLS: the CA every client trusts, and
// the certificate and key every node of a cluster on loopback serves.
type TLS struct{ CAFile, CertFile, KeyFile string }

// NodeTemplate is deploy/nats/floor-node.conf, the node configuration a
// floor runs as shipped (a test checks the copies agree): every listener
// TLS, the routes verifying each other, the logins included.
//
//go:embed floor-node.conf
var NodeTemplate string

// NodeVars are what floor-node.vars.conf says of one node: everything of
// NodeTemplate that differs from node to node.
type NodeVars struct {
	Name                         string
	ClientListen, MQTTListen     string // host:port
	RouteListen                  string
	Routes                       []string // nats-route://host:port of every node
	StoreDir                     string
	MaxMemoryStore, MaxFileStore string // "64MB", "200GB"
	Replicas                     int
	CAFile, CertFile, KeyFile    string
}

// Conf is the node's floor-node.vars.conf.
func (v NodeVars) Conf() string {
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	routes := make([]string, len(v.Routes))
	for i, r := range v.Routes {
		routes[i] = q(r)
	}
	return fmt.Sprintf(`# floor-node.vars.conf: what floor-node.conf says of this node (tablectl-floor init).
FLOOR_NODE_NAME: %s
FLOOR_CLIENT_LISTEN: %s
FLOOR_MQTT_LISTEN: %s
FLOOR_ROUTE_LISTEN: %s
FLOOR_ROUTES: [%s]
FLOOR_STORE_DIR: %s
FLOOR_MAX_MEMORY_STORE: %s
FLOOR_MAX_FILE_STORE: %s
FLOOR_REPLICAS: %d
FLOOR_CA_FILE: %s
FLOOR_CERT_FILE: %s
FLOOR_KEY_FILE: %s
`, q(v.Name), q(v.ClientListen), q(v.MQTTListen), q(v.RouteListen), strings.Join(routes, ", "), q(v.StoreDir),
		v.MaxMemoryStore, v.MaxFileStore, v.Replicas, q(v.CAFile), q(v.CertFile), q(v.KeyFile))
}

// StartFloor runs a cluster as a floor runs it: each node on NodeTemplate
// as shipped, in a folder of its own under dir beside its
// floor-node.vars.conf and nats-auth.conf; every listener TLS with
// o.TLS, the routes verifying each other, o.Auth's logins. Two nodes or
// more (the template is a cluster's).
func StartFloor(ctx context.Context, dir string, o Options) (*Cluster, error) {
	if o.Nodes < 2 {
		return nil, fmt.Errorf("natsserver: a floor of %d nodes: want 2 or more", o.Nodes)
	}
	if o.Auth == "" || o.TLS.CAFile == "" {
		return nil, errors.New("natsserver: a floor runs with its logins and its TLS")
	}
	c := &Cluster{dir: dir, embedded: o.Embedded, auth: o.Auth, tls: &o.TLS}
	if !o.Embedded {
		bin, err := Binary()
		if err != nil {
			return nil, err
		}
		c.bin = bin
	}
	return start(ctx, c, o.Nodes)
}

// Start runs n nodes (n >= 1; a cluster of routes when n > 1) with their
// JetStream stores under dir, and returns once every node answers and the
// JetStream meta group has a leader.
func Start(ctx context.Context, dir string, n int) (*Cluster, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	return start(ctx, &Cluster{bin: bin, dir: dir}, n)
}

// StartEmbedded is Start with the nodes in this process.
func StartEmbedded(ctx context.Context, dir string, n int) (*Cluster, error) {
	return start(ctx, &Cluster{dir: dir, embedded: true}, n)
}

// StartEmbeddedAuth is StartEmbedded with the floor's logins (StartAuth).
func StartEmbeddedAuth(ctx context.Context, dir string, n int, auth string) (*Cluster, error) {
	return start(ctx, &Cluster{dir: dir, embedded: true, auth: auth}, n)
}

// StartAuth is Start with each node's configuration given auth (the
// floor's logins and permissions: floor.AuthConfig): no anonymous client.
func StartAuth(ctx context.Context, dir string, n int, auth string) (*Cluster, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	return start(ctx, &Cluster{bin: bin, dir: dir, auth: auth}, n)
}

func start(ctx context.Context, c *Cluster, n int) (*Cluster, error) {
	dir := c.dir
	ports := make([]int, 0, 3*n)
	for range 3 * n {
		p, err := freeport.Loopback()
		if err != nil {
			return nil, err
		}
		ports = append(ports, p)
	}
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[3*i+2]))
	}
	for i := range n {
		nd := &Node{Name: fmt.Sprintf("n%d", i+1), ClientPort: ports[3*i], MQTTPort: ports[3*i+1], RoutePort: ports[3*i+2], tls: c.tls != nil}
		if c.tls != nil {
			if err := c.writeFloorNode(nd, routes); err != nil {
				return nil, err
			}
			c.Nodes = append(c.Nodes, nd)
			continue
		}
		nd.conf = filepath.Join(dir, nd.Name+".conf")
		conf := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
jetstream { store_dir: %q, max_memory_store: 64MB, max_file_store: 4GB }
mqtt { listen: 127.0.0.1:%d, stream_replicas: %d, ack_wait: "5s", max_ack_pending: 10000 }
`, nd.Name, nd.ClientPort, filepath.Join(dir, nd.Name+"-js"), nd.MQTTPort, min(n, 3))
		if n > 1 {
			conf += fmt.Sprintf("cluster { name: floor, listen: 127.0.0.1:%d, routes: [%s] }\n", nd.RoutePort, strings.Join(routes, ", "))
		}
		conf += c.auth
		if err := os.WriteFile(nd.conf, []byte(conf), 0o600); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, nd)
	}
	for _, nd := range c.Nodes {
		if err := c.startNode(nd); err != nil {
			c.Stop()
			return nil, err
		}
	}
	for _, nd := range c.Nodes {
		if err := nd.waitReady(ctx, 30*time.Second, n > 1); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// writeFloorNode writes node nd's folder: NodeTemplate as shipped, its
// vars and the logins.
func (c *Cluster) writeFloorNode(nd *Node, routes []string) error {
	d := filepath.Join(c.dir, nd.Name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return err
	}
	v := NodeVars{Name: nd.Name, ClientListen: fmt.Sprintf("127.0.0.1:%d", nd.ClientPort), MQTTListen: nd.MQTTAddr(),
		RouteListen: fmt.Sprintf("127.0.0.1:%d", nd.RoutePort), Routes: routes, StoreDir: filepath.Join(d, "js"),
		MaxMemoryStore: "64MB", MaxFileStore: "4GB", Replicas: min(len(routes), 3),
		CAFile: c.tls.CAFile, CertFile: c.tls.CertFile, KeyFile: c.tls.KeyFile}
	nd.conf = filepath.Join(d, "floor-node.conf")
	for name, text := range map[string]string{nd.conf: NodeTemplate, filepath.Join(d, "floor-node.vars.conf"): v.Conf(),
		filepath.Join(d, "nats-auth.conf"): c.auth} {
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// URLs is every node's client URL, comma-separated (nats.Connect's form).
func (c *Cluster) URLs() string {
	var u []string
	for _, nd := range c.Nodes {
		u = append(u, nd.URL())
	}
	return strings.Join(u, ",")
}

// URL is the node's client URL (tls:// on a floor's node).
func (nd *Node) URL() string {
	if nd.tls {
		return fmt.Sprintf("tls://127.0.0.1:%d", nd.ClientPort)
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", nd.ClientPort)
}

// MQTTURL is the node's MQTT listener as an MQTT client's broker URL
// (ssl:// on a floor's node).
func (nd *Node) MQTTURL() string {
	if nd.tls {
		return "ssl://" + nd.MQTTAddr()
	}
	return "tcp://" + nd.MQTTAddr()
}

// Pid is the node's process id, 0 when it is embedded or not running.
func (nd *Node) Pid() int {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd == nil || nd.cmd.Process == nil {
		return 0
	}
	return nd.cmd.Process.Pid
}

// MQTTAddr is the node's MQTT listener.
func (nd *Node) MQTTAddr() string { return fmt.Sprintf("127.0.0.1:%d", nd.MQTTPort) }

func (c *Cluster) startNode(nd *Node) error {
	if c.embedded {
		return c.startEmbedded(nd)
	}
	cmd := exec.Command(c.bin, "-c", nd.conf)
	out, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start nats-server %s: %w", nd.Name, err)
	}
	nd.mu.Lock()
	nd.cmd, nd.done = cmd, make(chan struct{})
	done := nd.done
	nd.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			nd.mu.Lock()
			if nd.log.Len() < 4<<20 {
				nd.log.WriteString(sc.Text() + "\n")
			}
			nd.mu.Unlock()
		}
		io.Copy(io.Discard, out)
		cmd.Wait()
		close(done)
	}()
	return nil
}

// waitReady waits until the node takes client connections and says it
// listens for MQTT (which it does once JetStream is up).
func (nd *Node) waitReady(ctx context.Context, wait time.Duration, clustered bool) error {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		nd.mu.Lock()
		log := nd.log.String()
		done := nd.done
		nd.mu.Unlock()
		select {
		case <-done:
			return fmt.Errorf("nats-server %s exited:\n%s", nd.Name, tail(log, 30))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if strings.Contains(log, "Listening for MQTT clients") && strings.Contains(log, "Server is ready") {
			if c, err := net.DialTimeout("tcp", nd.MQTTAddr(), time.Second); err == nil {
				c.Close()
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return fmt.Errorf("nats-server %s not ready in %s:\n%s", nd.Name, wait, tail(nd.log.String(), 30))
}

// startEmbedded runs nd in this process, on its configuration file.
func (c *Cluster) startEmbedded(nd *Node) error {
	opts, err := server.ProcessConfigFile(nd.conf)
	if err != nil {
		return fmt.Errorf("nats-server %s: %w", nd.Name, err)
	}
	opts.NoSigs = true
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("nats-server %s: %w", nd.Name, err)
	}
	srv.SetLoggerV2(nodeLog{nd}, false, false, false)
	nd.mu.Lock()
	nd.srv, nd.done = srv, make(chan struct{})
	done := nd.done
	nd.mu.Unlock()
	srv.Start()
	go func() {
		srv.WaitForShutdown()
		close(done)
	}()
	return nil
}

// nodeLog keeps what an embedded node says, as a child's stderr is kept.
type nodeLog struct{ nd *Node }

func (l nodeLog) logf(level, format string, v ...any) {
	l.nd.mu.Lock()
	defer l.nd.mu.Unlock()
	if l.nd.log.Len() < 4<<20 {
		fmt.Fprintf(&l.nd.log, "["+level+"] "+format+"\n", v...)
	}
}
func (l nodeLog) Noticef(format string, v ...any) { l.logf("INF", format, v...) }
func (l nodeLog) Warnf(format string, v ...any)   { l.logf("WRN", format, v...) }
func (l nodeLog) Fatalf(format string, v ...any)  { l.logf("FTL", format, v...) }
func (l nodeLog) Errorf(format string, v ...any)  { l.logf("ERR", format, v...) }
func (l nodeLog) Debugf(format string, v ...any)  {}
func (l nodeLog) Tracef(format string, v ...any)  {}

// Kill kills node i as a crash would (an embedded node: shut down).
func (c *Cluster) Kill(i int) {
	nd := c.Nodes[i]
	nd.mu.Lock()
	cmd, srv, done := nd.cmd, nd.srv, nd.done
	nd.mu.Unlock()
	switch {
	case cmd != nil:
		cmd.Process.Kill()
	case srv != nil:
		srv.Shutdown()
	default:
		return
	}
	<-done
	nd.mu.Lock()
	nd.cmd, nd.srv = nil, nil
	nd.mu.Unlock()
}

// Restart starts node i again (after Kill) and waits until it is ready.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	nd := c.Nodes[i]
	nd.mu.Lock()
	nd.log.WriteString("--- restarted ---\n")
	nd.mu.Unlock()
	if err := c.startNode(nd); err != nil {
		return err
	}
	return nd.waitReady(ctx, 30*time.Second, len(c.Nodes) > 1)
}

// Stop kills every node.
func (c *Cluster) Stop() {
	for i := range c.Nodes {
		c.Kill(i)
	}
}

// Log is what node i has said.
func (c *Cluster) Log(i int) string {
	nd := c.Nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.log.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var (
	addressLine = regexp.MustCompile(`(?m)^address .*$`)
	dropLine    = regexp.MustCompile(`(?m)^(bridge_cafile|bridge_insecure|bridge_certfile|bridge_keyfile|remote_username|remote_password) .*\n`)
	restartLine = regexp.MustCompile(`(?m)^restart_timeout .*$`)
)

// Bridge makes deploy/mosquitto/bridge.conf (text) the bridge of table
// to the cluster's MQTT listeners addrs, without TLS or a login (loopback),
// and retrying within a second or two so the tests need not wait.
func Bridge(text, table string, addrs []string) (string, error) {
	if !strings.Contains(text, "BAC-07") || !addressLine.MatchString(text) {
		return "", errors.New("bridge.conf: no address line or no BAC-07 to replace")
	}
	text = strings.ReplaceAll(text, "BAC-07", table)
	text = addressLine.ReplaceAllString(text, "address "+strings.Join(addrs, " "))
	text = dropLine.ReplaceAllString(text, "")
	text = restartLine.ReplaceAllString(text, "restart_timeout 1 3")
	return text, nil
}
