package floor

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The floor's CA signs the certificate of every node and of the floor
// view: the NATS client port, the MQTT listener, the cluster routes and the
// witness's HTTP all speak TLS with it (docs/floor.md), and every client
// (a witness, a bridge, the floor view's browser) trusts it alone.
const (
	CAFile    = "ca.crt"
	CAKeyFile = "ca.key"
	// certLife is how long a certificate made here lasts: ten years for
	// the CA, the nodes' until it is made again (delete and run init).
	caLife   = 10 * 365 * 24 * time.Hour
	certLife = 5 * 365 * 24 * time.Hour
)

// CA is the floor's certificate authority.
type CA struct {
	Cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	CertFile string
}

// EnsureCA reads the floor's CA from dir (ca.crt, ca.key), or makes it
// (ECDSA P-256; the key 0600) when neither is there. One without the other
// is an error: a CA is never made again over a lost key by accident.
func EnsureCA(dir string) (*CA, error) {
	certFile, keyFile := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	_, errC := os.Stat(certFile)
	_, errK := os.Stat(keyFile)
	switch {
	case errC == nil && errK == nil:
		cert, key, err := loadPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("the floor's CA: %w", err)
		}
		if !cert.IsCA {
			return nil, fmt.Errorf("the floor's CA: %s is no CA certificate", certFile)
		}
		return &CA{Cert: cert, key: key, CertFile: certFile}, nil
	case errors.Is(errC, fs.ErrNotExist) && errors.Is(errK, fs.ErrNotExist):
	case errC != nil && !errors.Is(errC, fs.ErrNotExist):
		return nil, errC
	case errK != nil && !errors.Is(errK, fs.ErrNotExist):
		return nil, errK
	default:
		return nil, fmt.Errorf("the floor's CA: one of %s and %s is missing: restore it, or remove both to make a new CA (and every certificate again)", certFile, keyFile)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "tablectl floor CA", Organization: []string{"tablectl floor"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLife),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	if err := writePair(certFile, keyFile, der, key); err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{Cert: cert, key: key, CertFile: certFile}, nil
}

// EnsureCert reads the certificate name.crt and key name.key in dir, or
// makes them (ECDSA P-256, signed by the CA, for a server and a client:
// the cluster's routes are both) for hosts, names or IP addresses. A pair
// already there is kept when the CA signed it and it names every host;
// otherwise it is an error (remove it to have it made again).
func (ca *CA) EnsureCert(dir, name string, hosts []string) (certFile, keyFile string, err error) {
	if len(hosts) == 0 {
		return "", "", fmt.Errorf("certificate %s: no host to name", name)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if _, err := os.Stat(certFile); err == nil {
		cert, _, err := loadPair(certFile, keyFile)
		if err != nil {
			return "", "", err
		}
		if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
			return "", "", fmt.Errorf("%s: not signed by the floor's CA (%s): remove it to have it made again: %w", certFile, ca.CertFile, err)
		}
		for _, h := range hosts {
			if err := cert.VerifyHostname(h); err != nil {
				return "", "", fmt.Errorf("%s does not name %s: remove it to have it made again", certFile, h)
			}
		}
		return certFile, keyFile, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: hosts[0], Organization: []string{"tablectl floor"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certLife),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if !slices.Contains(tmpl.DNSNames, h) {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return "", "", err
	}
	return certFile, keyFile, writePair(certFile, keyFile, der, key)
}

// ClientTLS is the TLS settings of a client of the floor (a witness, the
// floor view, an MQTT client): the floor's CA alone is trusted.
func ClientTLS(caFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func writePair(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	// The key first, 0600, never readable by others even for a moment.
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func loadPair(certFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, fmt.Errorf("%s: not an ECDSA key", keyFile)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	return cert, key, err
}
