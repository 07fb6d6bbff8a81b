package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// ManagerNamespace is where the module's binaries run under their
// ServiceAccounts (module.Identity); the audit policy of hack/cluster.sh
// records exactly their requests.
const ManagerNamespace = module.DefaultNamespace

// InstallManagerPrerequisites applies what the manager needs before it
// starts, straight from config/: the Serverless CRD and the RBAC (ClusterRole,
// ServiceAccount, bindings), into ManagerNamespace.
func (c *Cluster) InstallManagerPrerequisites(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ManagerNamespace}}
	if err := c.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ManagerNamespace, err)
	}
	for _, dir := range []string{"config/crd/bases", "config/rbac"} {
		objs, err := manifest.ReadDir(filepath.Join(c.root, dir))
		if err != nil {
			return err
		}
		if err := c.Apply(ctx, ManagerNamespace, objs...); err != nil {
			return err
		}
	}
	return nil
}

// Apply server-side applies objects as the test user; namespaced objects
// without a namespace go to namespace.
func (c *Cluster) Apply(ctx context.Context, namespace string, objs ...*unstructured.Unstructured) error {
	for _, o := range objs {
		namespaced, err := c.client.IsObjectNamespaced(o)
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		if namespaced && o.GetNamespace() == "" {
			o.SetNamespace(namespace)
		}
		if err := c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("e2e"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// StartBinary runs bin/<id.Binary> under id's own ServiceAccount in
// ManagerNamespace (so the RBAC the module gives that identity is all it
// gets), logging to <name>.log. env is added to the test's environment.
func (c *Cluster) StartBinary(ctx context.Context, id module.Identity, name string, env []string, args ...string) (*Process, error) {
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, ManagerNamespace, id.ServiceAccount)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of %s's ServiceAccount: %w", id.Name, err)
	}
	return StartProcess(ProcessSpec{
		Name: name,
		Path: filepath.Join(c.root, "bin", id.Binary),
		Args: args,
		Env:  append([]string{"KUBECONFIG=" + kubeconfig}, env...),
	})
}

// StartManager runs bin/manager as the manager's ServiceAccount (so its RBAC
// from config/rbac is what it gets), serving ManagerNamespace, with the
// chart's images that cannot be pulled here pointed at the local ones
// (LocalImageEnv). extraArgs and env are added to the defaults.
func (c *Cluster) StartManager(ctx context.Context, name string, env []string, extraArgs ...string) (*Process, error) {
	env = append(c.LocalImageEnv(), env...)
	args := append([]string{
		"--namespace=" + ManagerNamespace,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--leader-elect=false",
		"--log-format=console",
	}, extraArgs...)
	return c.StartBinary(ctx, module.Manager(), name, env, args...)
}

// LogHas tells whether the log of the current run contains s (the log file
// also holds earlier runs, of this test binary and of earlier ones).
func (p *Process) LogHas(s string) bool {
	data, err := os.ReadFile(p.LogPath())
	if err != nil {
		return false
	}
	log := string(data)
	if i := strings.LastIndex(log, "=== "+p.Name()+" start #"); i >= 0 {
		log = log[i:]
	}
	return strings.Contains(log, s)
}

// RestartAPIServer kills kube-apiserver (SIGKILL) and starts it again on the
// same etcd, returning once it is ready and the components that watch it
// (controller manager, scheduler, the node's kube-proxy and CoreDNS) have
// been restarted, so the next test finds Services routed without delay.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	_, err := runScript(ctx, c.root, "restart", "kube-apiserver")
	return err
}
