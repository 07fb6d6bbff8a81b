package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kyma-project/serverless-manager/hack/cluster/localcluster/pki"
)

// kubeconfigComponents are the components that reach the API server with a
// client certificate of their own (pki's clients).
var kubeconfigComponents = []string{"kube-controller-manager", "kube-scheduler", "kwok", "node", "kube-proxy", "coredns", "metrics-server", "volume-recycler"}

// certificates writes the cluster's PKI and the kubeconfigs of the admin
// and the components, and hands the CA's certificate to later actions. Its
// down has nothing to do: they go with the state directory.
type certificates struct{}

func (certificates) Name() string { return "certificates" }

func (certificates) Up(_ context.Context, ac *actionContext) error {
	if err := pki.Generate(filepath.Join(ac.state, "pki"), ac.name, ac.gateway(), time.Now()); err != nil {
		return err
	}
	ca, err := os.ReadFile(ac.pki("ca.crt"))
	if err != nil {
		return err
	}
	ac.caCert = ca
	if err := ac.writeKubeconfig(filepath.Join(ac.state, "kubeconfig"), "admin", ""); err != nil {
		return err
	}
	for _, c := range kubeconfigComponents {
		if err := ac.writeKubeconfig(ac.kubeconfig(c), c, ""); err != nil {
			return err
		}
	}
	return nil
}

func (certificates) Down(context.Context, *actionContext) error { return nil }

// writeKubeconfig writes a kubeconfig for user: with the client
// certificate pki/<user>.crt, or with token when one is given.
func (c config) writeKubeconfig(file, user, token string) error {
	read := func(name string) (string, error) {
		data, err := os.ReadFile(c.pki(name))
		return base64.StdEncoding.EncodeToString(data), err
	}
	ca, err := read("ca.crt")
	if err != nil {
		return err
	}
	auth := "    token: " + token
	if token == "" {
		crt, err := read(user + ".crt")
		if err != nil {
			return err
		}
		key, err := read(user + ".key")
		if err != nil {
			return err
		}
		auth = "    client-certificate-data: " + crt + "\n    client-key-data: " + key
	}
	config := `apiVersion: v1
kind: Config
clusters:
- name: serverless-local
  cluster:
    server: https://` + c.gateway().String() + `:` + strconv.Itoa(c.apiServerPort) + `
    certificate-authority-data: ` + ca + `
users:
- name: ` + user + `
  user:
` + auth + `
contexts:
- name: ` + user + `@serverless-local
  context:
    cluster: serverless-local
    user: ` + user + `
current-context: ` + user + `@serverless-local
`
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, []byte(config), 0o600)
}

// kubeconfigSA writes a kubeconfig of ServiceAccount ns/sa (a token valid
// for a day) and returns its path.
func (ac *actionContext) kubeconfigSA(ns, sa string) (string, error) {
	out, err := ac.kubectl("create", "token", sa, "-n", ns, "--duration=24h")
	if err != nil {
		return "", fmt.Errorf("a token for ServiceAccount %s/%s (is the cluster up? hack/cluster.sh status): %w", ns, sa, err)
	}
	file := ac.kubeconfig("sa-" + ns + "-" + sa)
	return file, ac.writeKubeconfig(file, "system:serviceaccount:"+ns+":"+sa, strings.TrimSpace(string(out)))
}
