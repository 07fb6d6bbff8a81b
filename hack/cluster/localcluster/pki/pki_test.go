package pki

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	require.NoError(t, generate(dir, node{name: "real-node", ip: net.ParseIP("10.240.0.1")}, now))

	roots := x509.NewCertPool()
	ca := readCert(t, filepath.Join(dir, "ca.crt"))
	require.True(t, ca.IsCA)
	roots.AddCert(ca)

	// every certificate matches its key and chains to the CA
	for _, name := range []string{"apiserver", "admin", "kube-controller-manager", "kube-scheduler", "kwok",
		"kubelet", "node", "kube-proxy", "kube-apiserver-kubelet-client", "coredns", "metrics-server", "metrics-server-serving",
		"volume-recycler", "front-proxy-ca", "front-proxy-client"} {
		_, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
		require.NoError(t, err, name)
	}

	t.Run("serving certificate is valid for the addresses clients use", func(t *testing.T) {
		cert := readCert(t, filepath.Join(dir, "apiserver.crt"))
		for _, host := range []string{"127.0.0.1", "localhost", "10.96.0.1", "10.240.0.1", "kubernetes.default.svc"} {
			_, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			require.NoError(t, err, host)
		}
		_, err := cert.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: roots})
		require.Error(t, err, "must not be valid for arbitrary names")
	})

	t.Run("client certificates carry the identities RBAC expects", func(t *testing.T) {
		for _, tc := range []struct{ file, user, group string }{
			{"admin", "kubernetes-admin", "system:masters"},
			{"kube-controller-manager", "system:kube-controller-manager", ""},
			{"kube-scheduler", "system:kube-scheduler", ""},
			{"node", "system:node:real-node", "system:nodes"},
			{"kube-proxy", "system:kube-proxy", ""},
			{"metrics-server", "system:metrics-server", ""},
			{"volume-recycler", "serverless-local:volume-recycler", ""},
		} {
			cert := readCert(t, filepath.Join(dir, tc.file+".crt"))
			_, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			require.NoError(t, err, tc.file)
			require.Equal(t, tc.user, cert.Subject.CommonName)
			if tc.group == "" {
				require.Empty(t, cert.Subject.Organization, tc.file)
			} else {
				require.Equal(t, []string{tc.group}, cert.Subject.Organization, tc.file)
			}
			_, err = cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			require.Error(t, err, "%s must not be usable as a serving certificate", tc.file)
		}
	})

	for _, tc := range []struct {
		name, file string
		hosts      []string
		notHost    string
	}{
		{name: "the kubelet serves at the node's address and name only", file: "kubelet",
			hosts: []string{"10.240.0.1", "real-node"}, notHost: "127.0.0.1"},
		{name: "metrics-server serves at the node's address and its Service's name", file: "metrics-server-serving",
			hosts: []string{"10.240.0.1", "metrics-server.kube-system.svc"}, notHost: "kubernetes.default.svc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert := readCert(t, filepath.Join(dir, tc.file+".crt"))
			for _, host := range tc.hosts {
				_, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
				require.NoError(t, err, host)
			}
			_, err := cert.Verify(x509.VerifyOptions{DNSName: tc.notHost, Roots: roots})
			require.Error(t, err)
		})
	}

	t.Run("the front-proxy client chains to its own CA only", func(t *testing.T) {
		frontRoots := x509.NewCertPool()
		frontRoots.AddCert(readCert(t, filepath.Join(dir, "front-proxy-ca.crt")))
		cert := readCert(t, filepath.Join(dir, "front-proxy-client.crt"))
		require.Equal(t, "front-proxy-client", cert.Subject.CommonName)
		_, err := cert.Verify(x509.VerifyOptions{Roots: frontRoots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		require.NoError(t, err)
		_, err = cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		require.Error(t, err, "the cluster CA does not vouch for the front proxy")
		_, err = readCert(t, filepath.Join(dir, "admin.crt")).Verify(x509.VerifyOptions{Roots: frontRoots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		require.Error(t, err, "the front-proxy CA vouches for no other client")
	})

	t.Run("service-account public key belongs to the signing key", func(t *testing.T) {
		keyPEM, err := os.ReadFile(filepath.Join(dir, "sa.key"))
		require.NoError(t, err)
		block, _ := pem.Decode(keyPEM)
		require.NotNil(t, block)
		key, err := x509.ParseECPrivateKey(block.Bytes)
		require.NoError(t, err)

		pubPEM, err := os.ReadFile(filepath.Join(dir, "sa.pub"))
		require.NoError(t, err)
		block, _ = pem.Decode(pubPEM)
		require.NotNil(t, block)
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		require.NoError(t, err)
		require.True(t, key.PublicKey.Equal(pub.(*ecdsa.PublicKey)))

		info, err := os.Stat(filepath.Join(dir, "sa.key"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "private keys are readable by the owner only")
	})
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	block, _ := pem.Decode(data)
	require.NotNil(t, block, path)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}
