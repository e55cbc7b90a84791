package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"

	"github.com/nats-io/nats.go"
	"github.com/tablectl/tablectl/internal/config"
)

// floorTLS are the flags of a floor client's and the floor view's TLS
// (docs/floor.md): the floor's CA to trust the broker with, the view's
// certificate and key to serve HTTPS with.
type floorTLS struct {
	natsCA, cert, key *string
}

func tlsFlags(fs *flag.FlagSet) floorTLS {
	return floorTLS{
		natsCA: fs.String("nats-ca", "", "the floor's CA `file` (tablectl-floor init's ca.crt): the broker is reached over TLS, verified with it"),
		cert:   fs.String("tls-cert", "", "the floor view's certificate `file` (PEM; tablectl-floor init --view-host makes one): HTTPS"),
		key:    fs.String("tls-key", "", "the floor view's key `file` (PEM, with --tls-cert)"),
	}
}

// natsOptions are the broker connection's TLS options.
func (t floorTLS) natsOptions() []nats.Option {
	if *t.natsCA == "" {
		return nil
	}
	return []nats.Option{nats.RootCAs(*t.natsCA)}
}

// listenView listens for the floor view on addr: HTTPS with --tls-cert
// and --tls-key; plain HTTP only on loopback (the view shows every
// table's alerts and asks for a password, which travels in clear on
// plain HTTP).
func (t floorTLS) listenView(addr string) (net.Listener, string, error) {
	if (*t.cert == "") != (*t.key == "") {
		return nil, "", errors.New("--tls-cert and --tls-key go together")
	}
	var cfg *tls.Config
	if *t.cert != "" {
		pair, err := tls.LoadX509KeyPair(*t.cert, *t.key)
		if err != nil {
			return nil, "", fmt.Errorf("--tls-cert, --tls-key: %w", err)
		}
		cfg = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	} else if !config.Loopback(addr) {
		return nil, "", fmt.Errorf("%s is off this machine: the floor view serves plain HTTP only on loopback (its password and every table's alerts would cross the network in clear); give --tls-cert and --tls-key (tablectl-floor init --view-host HOST makes them)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	if cfg == nil {
		return ln, "http", nil
	}
	return tls.NewListener(ln, cfg), "https", nil
}
