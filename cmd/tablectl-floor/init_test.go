package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestInit: init makes a password file per table of the registry, per
// witness and the admin's (0600), and nodes' authorization block with
// their hashes only; run again, it keeps every password and adds the
// new table's.
func TestInit(t *testing.T) {
	dir := t.TempDir()
	pub, _, _ := ed25519.GenerateKey(nil)
	k := base64.StdEncoding.EncodeToString(pub)
	writeReg := func(tables ...string) string {
		var e []string
		for _, tb := range tables {
			e = append(e, fmt.Sprintf(`%q: {"public_keys": [%q]}`, tb, k))
		}
		p := filepath.Join(dir, "floor.json")
		if err := os.WriteFile(p, []byte(`{"tables": {`+strings.Join(e, ",")+`}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	logins := filepath.Join(dir, "logins")
	var out bytes.Buffer
	if err := runInit([]string{"--registry", writeReg("BAC-07", "BAC-08"), "--dir", logins}, &out); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(logins, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	files := []string{"admin.password", "witness-w1.password", "witness-w2.password", "bridge-BAC-07.password", "bridge-BAC-08.password"}
	first := map[string]string{}
	for _, f := range files {
		first[f] = read(f)
		if fi, _ := os.Stat(filepath.Join(logins, f)); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, fi.Mode().Perm())
		}
		if strings.Contains(read("nats-auth.conf"), strings.TrimSpace(first[f])) {
			t.Errorf("nats-auth.conf holds %s's password", f)
		}
	}
	auth := read("nats-auth.conf")
	for _, want := range []string{`user: "bridge-BAC-07"`, `"tablectl.BAC-07.>"`, `user: "witness-w1"`, `"$JS.API.CONSUMER.MSG.NEXT.TABLECTL.witness"`, `user: "admin"`} {
		if !strings.Contains(auth, want) {
			t.Errorf("nats-auth.conf does not say %s:\n%s", want, auth)
		}
	}
	if err := runInit([]string{"--registry", writeReg("BAC-07", "BAC-08", "BAC-09"), "--dir", logins}, &out); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if read(f) != first[f] {
			t.Errorf("%s changed on the second run", f)
		}
	}
	if read("bridge-BAC-09.password") == "" || !strings.Contains(read("nats-auth.conf"), `"bridge-BAC-09"`) {
		t.Error("the new table has no login")
	}
}

// TestInitTLS: init makes the floor's CA, each --node's folder (its
// certificate for its hosts, its vars, the logins, the CA) and the floor
// view's certificate; keys 0600; run again, every key and certificate is
// kept. Each node's folder with the shipped floor-node.conf is a
// configuration nats-server takes: TLS on the client port, the MQTT
// listener and the routes (verified), a route to every node.
func TestInitTLS(t *testing.T) {
	dir := t.TempDir()
	pub, _, _ := ed25519.GenerateKey(nil)
	reg := filepath.Join(dir, "floor.json")
	if err := os.WriteFile(reg, []byte(`{"tables": {"BAC-07": {"public_keys": [`+fmt.Sprintf("%q", base64.StdEncoding.EncodeToString(pub))+`]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "floor")
	template, err := os.ReadFile("../../deploy/nats/floor-node.conf")
	if err != nil {
		t.Fatal(err)
	}
	args := func(node string) []string {
		return []string{"--registry", reg, "--dir", out, "--node-dir", filepath.Join(out, "nodes", node), "--store-dir", filepath.Join(dir, "js"),
			"--node", "n1=floor-nats-1.casino.internal,10.1.0.1", "--node", "n2=floor-nats-2.casino.internal",
			"--node", "n3=floor-nats-3.casino.internal", "--view-host", "floor.casino.internal"}
	}
	if err := runInit(args("n1"), io.Discard); err != nil {
		t.Fatal(err)
	}
	keys := []string{"ca.key", "floor-view.key", "nodes/n1/node.key", "nodes/n2/node.key", "nodes/n3/node.key"}
	first := map[string][]byte{}
	for _, k := range append(keys, "ca.crt", "nodes/n1/node.crt") {
		b, err := os.ReadFile(filepath.Join(out, k))
		if err != nil {
			t.Fatal(err)
		}
		first[k] = b
	}
	for _, k := range keys {
		if fi, _ := os.Stat(filepath.Join(out, k)); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", k, fi.Mode().Perm())
		}
	}
	caPool := x509.NewCertPool()
	caPool.AppendCertsFromPEM(first["ca.crt"])
	for _, c := range []struct{ file, host string }{
		{"nodes/n1/node.crt", "floor-nats-1.casino.internal"}, {"nodes/n1/node.crt", "10.1.0.1"},
		{"nodes/n2/node.crt", "floor-nats-2.casino.internal"}, {"floor-view.crt", "floor.casino.internal"},
	} {
		b, _ := os.ReadFile(filepath.Join(out, c.file))
		blk, _ := pem.Decode(b)
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: caPool, DNSName: c.host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s for %s: %v", c.file, c.host, err)
		}
		if _, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok {
			t.Errorf("%s: a %T key, want ECDSA", c.file, cert.PublicKey)
		}
	}
	if err := runInit(args("n1"), io.Discard); err != nil {
		t.Fatal(err)
	}
	for k, b := range first {
		if now, _ := os.ReadFile(filepath.Join(out, k)); !bytes.Equal(now, b) {
			t.Errorf("%s changed on the second run", k)
		}
	}
	// n1's folder as its node's /etc/nats, with the shipped template.
	nd := filepath.Join(out, "nodes", "n1")
	if err := os.WriteFile(filepath.Join(nd, "floor-node.conf"), template, 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(filepath.Join(nd, "floor-node.conf"))
	if err != nil {
		t.Fatalf("nats-server refuses n1's configuration: %v", err)
	}
	switch {
	case opts.ServerName != "n1" || opts.Port != 4222 || opts.MQTT.Port != 8883 || opts.Cluster.Port != 6222:
		t.Errorf("n1: name %q, ports %d %d %d", opts.ServerName, opts.Port, opts.MQTT.Port, opts.Cluster.Port)
	case opts.TLSConfig == nil || opts.MQTT.TLSConfig == nil || opts.Cluster.TLSConfig == nil:
		t.Errorf("n1: a listener without TLS: client %v, MQTT %v, routes %v", opts.TLSConfig != nil, opts.MQTT.TLSConfig != nil, opts.Cluster.TLSConfig != nil)
	case opts.Cluster.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert:
		t.Errorf("n1: the routes do not verify each other (%v)", opts.Cluster.TLSConfig.ClientAuth)
	case len(opts.Routes) != 3 || len(opts.Users) != 4:
		t.Errorf("n1: %d routes, %d users; want 3 and 4 (admin, two witnesses, BAC-07)", len(opts.Routes), len(opts.Users))
	}
	// A node name that is no name, a node without a host: refused.
	for _, bad := range []string{"n1", "=h", "n1=", "a/b=h"} {
		if err := runInit([]string{"--registry", reg, "--dir", out, "--node", bad}, io.Discard); err == nil {
			t.Errorf("--node %q taken", bad)
		}
	}
}
