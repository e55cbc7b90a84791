package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/display"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/freeport"
)

// TestHTTPS: with http.cert_file and http.key_file the endpoints are
// served over TLS only, and /health names the running build.
func TestHTTPS(t *testing.T) {
	dir := t.TempDir()
	crt, key := testCert(t, dir)
	port, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p, err := coup.BuiltinProfile(coup.ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{TableID: "TLS-1",
		Shoe:  config.ShoeSection{Driver: "v1", Port: device.Config{Path: filepath.Join(dir, "no-shoe")}.WithDefaults()},
		Audit: config.AuditSection{Path: filepath.Join(dir, "trail.db")},
		HTTP:  config.HTTPSection{Listen: addr, CertFile: crt, KeyFile: key}}
	ctx, cancel := context.WithCancel(context.Background())
	ctl, err := Start(ctx, cfg, coup.DefaultTableConfig(p), slog.New(slog.NewTextHandler(io.Discard, nil)), Hooks{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("the controller did not stop")
		}
	}()
	pem, err := os.ReadFile(crt)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get("https://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h display.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || h.Version == "" || h.Audit != "ok" {
		t.Errorf("/health %d %+v", resp.StatusCode, h)
	}
	plain, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/health")
	if err == nil {
		defer plain.Body.Close()
		if plain.StatusCode == http.StatusOK {
			t.Error("plain HTTP answered 200")
		}
	}
	if _, err := c.Get("https://" + addr + "/state"); err != nil {
		t.Error(err)
	}
	if _, ok := config.Check(filepath.Join(dir, "missing.json")); ok {
		t.Error("a missing config checks ok")
	}
}
