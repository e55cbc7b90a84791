package viewer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool that trusts it.
func selfSigned(t *testing.T) (cert, key string, pool *x509.CertPool) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "viewer test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "viewer.crt"), filepath.Join(dir, "viewer.key")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return cert, key, pool
}

// serving starts Serve with opt and returns the page's URL; the viewer
// stops at the test's end.
func serving(t *testing.T, opt ServeOptions, tl *Timeline) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, opt, tl, "trail.db", func(u string) { urls <- u }) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case u := <-urls:
		return u
	case err := <-done:
		t.Fatalf("Serve %+v: %v", opt, err)
	}
	return ""
}

// TestServeAttacked: the viewer, which shows every card and signed
// command, is tried as a client on the network would. It listens on
// loopback unless told otherwise; off loopback it refuses to start without
// a password and TLS, saying which is missing, and lets go of the port;
// served off loopback with both, every page and endpoint refuses a request
// without the credentials, with a wrong password or user, or in plain HTTP,
// and a header flood, and answers the right credentials.
func TestServeAttacked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.db")
	writeTrail(t, path, false)
	tl, err := LoadFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, pool := selfSigned(t)

	// No host: loopback.
	if u := serving(t, ServeOptions{Addr: ":0"}, tl); !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Fatalf("--serve :0 listens at %s, want 127.0.0.1", u)
	}

	// Off loopback, each defence missing.
	probe, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	probe.Close()
	for _, tc := range []struct {
		opt  ServeOptions
		want []string
	}{
		{ServeOptions{Addr: addr}, []string{"no password", "no TLS"}},
		{ServeOptions{Addr: addr, Password: "pw"}, []string{"no TLS"}},
		{ServeOptions{Addr: addr, CertFile: cert, KeyFile: key}, []string{"no password"}},
		{ServeOptions{Addr: addr, Password: "pw", CertFile: cert}, []string{"no TLS"}},
	} {
		err := Serve(context.Background(), tc.opt, tl, path, func(string) { t.Errorf("%+v: served", tc.opt) })
		if !errors.Is(err, ErrExposed) {
			t.Fatalf("%+v: %v, want ErrExposed", tc.opt, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %q does not say %q", tc.opt, err, w)
			}
		}
		// The refused listener is closed: the port is free again.
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%+v: the port stayed taken: %v", tc.opt, err)
		}
		ln.Close()
	}

	// Off loopback with both: attacked.
	u := serving(t, ServeOptions{Addr: "0.0.0.0:0", User: "surv", Password: "s3cret pass", CertFile: cert, KeyFile: key}, tl)
	_, port, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(u, "https://"), "/"))
	base := "https://127.0.0.1:" + port
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	do := func(url, user, pass string, header map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		if user != "" || pass != "" {
			req.SetBasicAuth(user, pass)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	paths := []string{"/", "/timeline.json", "/step/3", "/find?coup=1/1", "/web/viewer.js", "/web/viewer.css"}
	for _, p := range paths {
		for _, cred := range [][2]string{{"", ""}, {"surv", "wrong"}, {"admin", "s3cret pass"}, {"surv", "s3cret pass "}, {"", "s3cret pass"}} {
			code, body := do(base+p, cred[0], cred[1], nil)
			if code != http.StatusUnauthorized || strings.Contains(body, "T9") || strings.Contains(body, "card") {
				t.Errorf("GET %s as %q/%q: %d %.80q", p, cred[0], cred[1], code, body)
			}
		}
		if code, _ := do(base+p, "surv", "s3cret pass", nil); code != http.StatusOK {
			t.Errorf("GET %s with the credentials: %d", p, code)
		}
	}
	if _, body := do(base+"/timeline.json", "surv", "s3cret pass", nil); !strings.Contains(body, `"table":"T9"`) {
		t.Errorf("timeline with the credentials: %.200s", body)
	}
	if code, _ := do(base+"/timeline.json", "surv", "s3cret pass", map[string]string{"X-Flood": strings.Repeat("a", 64<<10)}); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 64 KiB header: %d, want 431", code)
	}
	// Plain HTTP on the TLS port, credentials and all: no data.
	plain := &http.Client{Timeout: 10 * time.Second}
	req, _ := http.NewRequest("GET", "http://127.0.0.1:"+port+"/timeline.json", nil)
	req.SetBasicAuth("surv", "s3cret pass")
	if resp, err := plain.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(b), "T9") {
			t.Errorf("plain HTTP on the TLS port: %d %.80q", resp.StatusCode, b)
		}
	}

	// On loopback a password, when given, is asked for too.
	lu := serving(t, ServeOptions{Addr: "127.0.0.1:0", Password: "pw"}, tl)
	if code, _ := do(lu+"timeline.json", "", "", nil); code != http.StatusUnauthorized {
		t.Errorf("loopback with a password, none sent: %d", code)
	}
}
