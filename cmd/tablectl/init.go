package main

import (
	"fmt"
	"io"
	"os"

	"github.com/tablectl/tablectl/internal/provision"
)

func init() {
	register(command{Name: "init", Short: "make a new box's keys and passwords (never overwrites) and say what to copy off it", Run: runInit})
}

// defaultConfigPath is the installed controller's config, as the package
// puts it.
const defaultConfigPath = "/etc/tablectl/tablectl.json"

func runInit(args []string, stdout io.Writer) error {
	fs := newFlagSet("init")
	fs.Usage = func() {
		usageHead(fs.Output(), "init", "--supervisor NAME [flags]", `Makes what the config file names and a new table box lacks: the checkpoint
key pair, the controller's and the pages' MQTT passwords, the pit view's
HTTP password, the supervisors' keyring with a first supervisor, and
Mosquitto's password file and ACL for the table. Files the service reads
are root's, mode 0640, group --group. It never overwrites a file: run it
again and it makes only what is missing. What must leave the box (the
supervisor's private key, the screens' and tools' broker passwords, the
checkpoint public key) is listed with where it goes. On a floor's table,
--floor-login, --floor-ca and --floor-node write Mosquitto's bridge to the
floor (conf.d/tablectl-bridge.conf, 0600): the table's floor login, TLS
verified with the floor's CA, a client id with a random part
(docs/floor.md).`)
		printFlags(fs.Output(), fs)
	}
	o := provision.Options{}
	fs.StringVar(&o.Config, "config", defaultConfigPath, "the controller's config `FILE`: init makes the files it names")
	fs.StringVar(&o.Supervisor, "supervisor", "", "the first supervisor's `NAME` (A-Z a-z 0-9 . _ @ -)")
	fs.StringVar(&o.Handoff, "handoff", "/root/tablectl-handoff", "the `DIR` (mode 0700) for what must be copied off the box")
	fs.StringVar(&o.Mosquitto, "mosquitto", "/etc/mosquitto", "Mosquitto's config `DIR` for tablectl.passwd and tablectl/acl; empty leaves Mosquitto alone")
	fs.StringVar(&o.MosquittoACL, "mosquitto-acl", "/usr/share/tablectl/mosquitto/acl", "the ACL template `FILE` (deploy/mosquitto/acl)")
	fs.StringVar(&o.Group, "group", "tablectl", "the service's `GROUP`, which reads the files it needs (as root)")
	fs.StringVar(&o.FloorLogin, "floor-login", "", "the table's floor login: the password `FILE` tablectl-floor init made for it (bridge-ID.password); writes Mosquitto's bridge to the floor")
	fs.StringVar(&o.FloorCA, "floor-ca", "", "the floor's CA `FILE` (tablectl-floor init's ca.crt), with --floor-login")
	fs.Func("floor-node", "a floor node's MQTT listener `HOST:PORT` (repeatable, in the order the bridge tries them), with --floor-login", func(s string) error {
		o.FloorNodes = append(o.FloorNodes, s)
		return nil
	})
	fs.StringVar(&o.Bridge, "bridge-template", "/usr/share/tablectl/mosquitto/bridge.conf", "the bridge template `FILE` (deploy/mosquitto/bridge.conf)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.Supervisor == "" {
		return usageError(fs, "--supervisor is required")
	}
	if o.FloorLogin != "" && (o.FloorCA == "" || len(o.FloorNodes) == 0) {
		return usageError(fs, "--floor-login needs --floor-ca and at least one --floor-node: the bridge goes to the floor over TLS only")
	}
	if _, err := os.Stat(o.MosquittoACL); err != nil {
		o.MosquittoACL = ""
	}
	r, err := provision.Run(o)
	if *asJSON {
		b, jerr := r.JSON()
		if jerr != nil {
			return jerr
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		r.Print(stdout)
	}
	return err
}
