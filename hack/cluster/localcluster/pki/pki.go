// Package pki writes the PKI of the local cluster (hack/node's
// certificates action): a CA, the serving certificates of kube-apiserver and of
// the real node's kubelet, client certificates for the admin, the
// control-plane and node components, and the key pair that signs
// service-account tokens. All keys are ECDSA P-256, which every component
// accepts and which is fast to generate.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// validity of every certificate; the cluster is throw-away.
const validity = 365 * 24 * time.Hour

// serving names of the kube-apiserver: reachable from the host as 127.0.0.1
// or localhost, from Pods at the node's address and by the in-cluster names
// and the first service IP of the service range hack/node configures
// (10.96.0.0/16).
var (
	servingIPs = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}
	servingDNS = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
)

// node is the real node the certificates are for.
type node struct {
	name string
	ip   net.IP
}

// clients maps a file name to the identity its certificate carries. The
// component users are the ones the built-in RBAC roles are bound to.
var clients = []struct {
	file, user string
	groups     []string
}{
	{"admin", "kubernetes-admin", []string{"system:masters"}},
	{"kube-controller-manager", "system:kube-controller-manager", nil},
	{"kube-scheduler", "system:kube-scheduler", nil},
	// kwok plays the kubelet of every fake node and patches nodes, pods,
	// leases and volumes cluster-wide.
	{"kwok", "kwok-controller", []string{"system:masters"}},
	// The real node's parts; the built-in roles of kube-proxy and of the
	// API server's calls to kubelets are bound to these users, CoreDNS's
	// role is among hack/node's bootstrap objects.
	{"kube-proxy", "system:kube-proxy", nil},
	{"kube-apiserver-kubelet-client", "kube-apiserver-kubelet-client", nil},
	{"coredns", "system:coredns", nil},
	// metrics-server reads nodes and Pods and calls kubelets' resource
	// metrics; its role is among hack/node's bootstrap objects.
	{"metrics-server", "system:metrics-server", nil},
	// hack/node's volume recycler hands the pool's released volumes back;
	// its role is among hack/node's bootstrap objects.
	{"volume-recycler", "serverless-local:volume-recycler", nil},
}

// Generate writes the PKI into dir (created) for the real node nodeName
// at nodeIP.
func Generate(dir, nodeName string, nodeIP net.IP, now time.Time) error {
	if nodeName == "" || nodeIP == nil {
		return fmt.Errorf("certificates need the node's name and IP address (got %q, %v)", nodeName, nodeIP)
	}
	return generate(dir, node{name: nodeName, ip: nodeIP}, now)
}

func generate(dir string, n node, now time.Time) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, caKey, err := newCA(dir, "ca", "serverless-local-ca", now)
	if err != nil {
		return err
	}

	serving := template(now, pkix.Name{CommonName: "kube-apiserver"})
	serving.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	serving.IPAddresses = append(append([]net.IP{}, servingIPs...), n.ip)
	serving.DNSNames = servingDNS
	if err := issue(dir, "apiserver", serving, ca, caKey); err != nil {
		return err
	}

	// kubelet: serves the API server (logs, exec) at the node's address
	// and calls it as the node (the Node authorizer's identity).
	kubelet := template(now, pkix.Name{CommonName: n.name})
	kubelet.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	kubelet.IPAddresses = []net.IP{n.ip}
	kubelet.DNSNames = []string{n.name}
	if err := issue(dir, "kubelet", kubelet, ca, caKey); err != nil {
		return err
	}
	nodeClient := template(now, pkix.Name{CommonName: "system:node:" + n.name, Organization: []string{"system:nodes"}})
	nodeClient.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if err := issue(dir, "node", nodeClient, ca, caKey); err != nil {
		return err
	}

	// metrics-server serves the aggregated metrics API at the node's
	// address, behind the Service kube-system/metrics-server.
	metrics := template(now, pkix.Name{CommonName: "metrics-server"})
	metrics.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	metrics.IPAddresses = []net.IP{n.ip}
	metrics.DNSNames = []string{"metrics-server.kube-system.svc"}
	if err := issue(dir, "metrics-server-serving", metrics, ca, caKey); err != nil {
		return err
	}

	// The aggregation layer: the API server proxies to metrics-server with
	// the front-proxy client certificate, which metrics-server trusts for
	// the user headers it carries. Its own CA, as kubeadm does, so that no
	// other client certificate can assert a user that way.
	if err := frontProxy(dir, now); err != nil {
		return err
	}

	for _, c := range clients {
		tmpl := template(now, pkix.Name{CommonName: c.user, Organization: c.groups})
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		if err := issue(dir, c.file, tmpl, ca, caKey); err != nil {
			return err
		}
	}

	// service-account token signing key (private, for kube-apiserver and
	// kube-controller-manager) and its public half (for verification)
	saKey, err := newKey()
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, "sa.key"), saKey); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub, 0o644)
}

// frontProxy writes front-proxy-ca and the front-proxy-client certificate
// it signs.
func frontProxy(dir string, now time.Time) error {
	ca, key, err := newCA(dir, "front-proxy-ca", "front-proxy-ca", now)
	if err != nil {
		return err
	}
	client := template(now, pkix.Name{CommonName: "front-proxy-client"})
	client.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return issue(dir, "front-proxy-client", client, ca, key)
}

// newCA writes a self-signed CA named commonName as <file>.crt and
// <file>.key and returns it with its key, to issue certificates.
func newCA(dir, file, commonName string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	tmpl := template(now, pkix.Name{CommonName: commonName})
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	if err := writePair(dir, file, der, key); err != nil {
		return nil, nil, err
	}
	return ca, key, nil
}

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func template(now time.Time, subject pkix.Name) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour), // tolerate small clock differences
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

// issue signs tmpl with the CA and writes NAME.crt and NAME.key.
func issue(dir, name string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := newKey()
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return writePair(dir, name, der, key)
}

func writePair(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, name+".key"), key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}
