package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kyma-project/serverless-manager/hack/cluster/process"
)

// bootstrapObjects creates what the cluster needs beyond its defaults
// (bootstrapYAML) and waits until kwok reports the simulated nodes Ready.
// Its down has nothing to do: the objects go with etcd's data.
type bootstrapObjects struct{}

func (bootstrapObjects) Name() string { return "bootstrap objects" }

func (bootstrapObjects) Up(ctx context.Context, ac *actionContext) error {
	for i := range ac.pvs {
		if err := os.MkdirAll(ac.volumeDir(i), 0o755); err != nil {
			return err
		}
	}
	if ac.caCert == nil {
		return errors.New("no cluster CA: the certificates action has not run")
	}
	cmd := ac.kubectlCommand("apply", "-f", "-")
	cmd.Stdin = strings.NewReader(bootstrapYAML(ac.config, ac.caCert))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply: %w: %s", err, out)
	}
	return waitFor(ctx, 120*time.Second, fmt.Sprintf("%d simulated nodes Ready", ac.nodes), func() error {
		if err := ac.checkAlive("kwok"); err != nil {
			return process.StopWaiting{Err: err}
		}
		return ac.simulatedNodesReady()
	})
}

func (bootstrapObjects) Down(context.Context, *actionContext) error { return nil }

// bootstrapYAML is what the cluster needs beyond its defaults: the default
// StorageClass, the RBAC of the parts that have no built-in binding (the API
// server's calls to kubelets, CoreDNS, metrics-server), the metrics API
// served by metrics-server on the node's address, the simulated nodes kwok
// manages (selected by the kwok.x-k8s.io/node annotation) and a pool of
// static volumes (Retain: scrubbed and handed back when released by the
// volume recycler, recycler.go).
func bootstrapYAML(c config, ca []byte) string {
	gw := c.gateway().String()
	metricsPort := strconv.Itoa(c.metricsServerPort)
	docs := []string{`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: Immediate`,
		`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kube-apiserver-kubelet-client
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:kubelet-api-admin}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver-kubelet-client}`,
		`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
- apiGroups: [""]
  resources: [services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]`,
		`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:coredns}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: system:coredns}`,
		// the volume recycler watches the pool and clears a released
		// volume's claim
		`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: serverless-local:volume-recycler
rules:
- apiGroups: [""]
  resources: [persistentvolumes]
  verbs: [get, list, watch, update]`,
		`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: serverless-local:volume-recycler
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: serverless-local:volume-recycler}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: serverless-local:volume-recycler}`,
		// metrics-server reads nodes and Pods, calls kubelets' resource
		// metrics and asks the API server who may read the metrics API
		`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:metrics-server
rules:
- apiGroups: [""]
  resources: [nodes/metrics]
  verbs: [get]
- apiGroups: [""]
  resources: [pods, nodes]
  verbs: [get, list, watch]`,
		`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:metrics-server
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:metrics-server}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: system:metrics-server}`,
		`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: metrics-server:system:auth-delegator
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:auth-delegator}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: system:metrics-server}`,
		`apiVersion: v1
kind: Service
metadata:
  name: metrics-server
  namespace: kube-system
spec:
  ports: [{name: https, port: 443, targetPort: ` + metricsPort + `}]`,
		`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: metrics-server
  namespace: kube-system
  labels: {kubernetes.io/service-name: metrics-server}
addressType: IPv4
ports: [{name: https, port: ` + metricsPort + `, protocol: TCP}]
endpoints: [{addresses: ["` + gw + `"]}]`,
		`apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.metrics.k8s.io
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  service: {namespace: kube-system, name: metrics-server, port: 443}
  caBundle: ` + base64.StdEncoding.EncodeToString(ca),
	}
	zones := []string{"a", "b", "c"}
	for i := range c.nodes {
		name := fmt.Sprintf("kwok-node-%d", i)
		docs = append(docs, `apiVersion: v1
kind: Node
metadata:
  name: `+name+`
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    `+labelType+`: kwok
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    kubernetes.io/hostname: `+name+`
    topology.kubernetes.io/zone: zone-`+zones[i%len(zones)]+`
status:
  addresses: [{type: InternalIP, address: 10.0.0.`+strconv.Itoa(i+10)+`}, {type: Hostname, address: `+name+`}]
  capacity: {cpu: "32", memory: 256Gi, pods: "110", ephemeral-storage: 500Gi}
  allocatable: {cpu: "32", memory: 256Gi, pods: "110", ephemeral-storage: 500Gi}`)
	}
	for i := range c.pvs {
		docs = append(docs, `apiVersion: v1
kind: PersistentVolume
metadata:
  name: local-pv-`+strconv.Itoa(i)+`
  labels:
    `+poolLabel+`: static
spec:
  capacity: {storage: 100Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: standard
  volumeMode: Filesystem
  hostPath: {path: "`+c.volumeDir(i)+`", type: DirectoryOrCreate}`)
	}
	return strings.Join(docs, "\n---\n") + "\n"
}
