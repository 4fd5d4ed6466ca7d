package daytonatest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// WithTLS serves both planes over TLS (https and wss), as Daytona does,
// with a self-signed certificate for 127.0.0.1, ::1 and localhost made
// when the server starts: CertPEM gives it to clients that are to trust
// it (a Go program through SSL_CERT_FILE, a test through a cert pool).
// With WithNetwork the handshake costs its round trip.
func WithTLS() Option { return func(c *config) { c.tls = true } }

// CertPEM is the PEM of the certificate the server presents under
// WithTLS, nil otherwise. It is its own issuer, so a client trusts it by
// adding it to its roots.
func (s *Server) CertPEM() []byte {
	s.init()
	return s.certPEM
}

// selfSigned makes a key and a certificate for the loopback names that is
// its own CA (so it can be a trust root) and lasts a day longer than any
// emulator run.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "daytonatest emulator", Organization: []string{"daytonatest"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("daytonatest: certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
