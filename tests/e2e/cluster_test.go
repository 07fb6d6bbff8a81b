//go:build e2e

package e2e

// Tests of the local cluster itself: what the manager's e2e tests and
// benchmarks rely on (schedulable simulated nodes and the real node,
// workloads that become ready on both, volumes that bind and come back
// scrubbed, ServiceAccount credentials with RBAC, the audit log).

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/hack/cluster/localimage"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

func TestNodesAreReadyAndSchedulable(t *testing.T) {
	t.Parallel()
	c := framework.ClusterFor(t)
	want, err := strconv.Atoi(c.Setting("NODES"))
	require.NoError(t, err, "NODES recorded by hack/cluster.sh")

	var nodes corev1.NodeList
	require.NoError(t, c.Client().List(t.Context(), &nodes, client.MatchingLabels{"type": "kwok"}))
	require.Len(t, nodes.Items, want)
	for _, n := range nodes.Items {
		require.Equal(t, corev1.ConditionTrue, nodeCondition(n, corev1.NodeReady), "node %s Ready", n.Name)
		require.Empty(t, n.Spec.Taints, "node %s must take pods without tolerations", n.Name)
		for _, list := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
			require.Equal(t, "32", list.Cpu().String(), n.Name)
			require.Equal(t, "256Gi", list.Memory().String(), n.Name)
			require.Equal(t, "110", list.Pods().String(), n.Name)
		}
	}
}

func TestRealNodeIsReady(t *testing.T) {
	t.Parallel()
	c := framework.ClusterFor(t)
	var n corev1.Node
	require.NoError(t, c.Client().Get(t.Context(), client.ObjectKey{Name: c.Setting("NODE_NAME")}, &n))
	require.Equal(t, corev1.ConditionTrue, nodeCondition(n, corev1.NodeReady), "node %s Ready", n.Name)
	require.Equal(t, "real", n.Labels["type"], "the label a namespace's node selector names")
	require.Empty(t, n.Spec.Taints, "node %s must take pods without tolerations", n.Name)
	require.Contains(t, n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://")

	// The Pods' gateway keeps its hardware address while Pods come and go:
	// one the bridge took from a port changes when that port leaves, and
	// the other Pods lose the gateway until their ARP entries expire.
	bridge := interfaceWith(t, c.Setting("NODE_IP"))
	assign, err := os.ReadFile(filepath.Join("/sys/class/net", bridge, "addr_assign_type"))
	require.NoError(t, err)
	require.Equal(t, "3", strings.TrimSpace(string(assign)), "%s's hardware address was set (3), not taken from a port", bridge)
}

// interfaceWith is the name of this machine's interface that has address ip.
func interfaceWith(t *testing.T, ip string) string {
	t.Helper()
	ifaces, err := net.Interfaces()
	require.NoError(t, err)
	for _, i := range ifaces {
		addrs, err := i.Addrs()
		require.NoError(t, err)
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.String() == ip {
				return i.Name
			}
		}
	}
	require.FailNow(t, "no interface has the node's address", ip)
	return ""
}

// A Deployment becomes available where its namespace puts it: on the
// simulated nodes with an image nobody pulls, on the real node with a
// local image whose container really runs.
func TestDeploymentBecomesAvailable(t *testing.T) {
	t.Parallel()
	c := framework.ClusterFor(t)
	for _, tc := range []struct {
		where   framework.Placement
		image   string
		command []string
		node    string
	}{
		{framework.Simulated, "nginx:1.27", nil, "kwok-node-"},
		{framework.RealNode, localimage.Ref(c.NodeRegistry(), localimage.Busybox), []string{"sleep", "3600"}, c.Setting("NODE_NAME")},
	} {
		t.Run(tc.where.String(), func(t *testing.T) {
			t.Parallel()
			ns := c.Namespace(t, "e2e-deploy")
			require.NoError(t, c.PlacePods(t.Context(), ns, tc.where))
			deployAndWait(t, c, ns, tc.image, tc.command, tc.node)
		})
	}
}

func deployAndWait(t *testing.T, c *framework.Cluster, ns, image string, command []string, node string) {
	labels := map[string]string{"app": "web"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: image, Command: command,
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
					}},
				}}},
			},
		},
	}
	require.NoError(t, c.Client().Create(t.Context(), deploy))

	framework.WaitFor(t, time.Minute, "Deployment web with 3 available replicas", func(ctx context.Context) (bool, string, error) {
		var d appsv1.Deployment
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(deploy), &d); err != nil {
			return false, "", err
		}
		available := false
		for _, cond := range d.Status.Conditions {
			available = available || cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue
		}
		return available && d.Status.AvailableReplicas == 3,
			fmt.Sprintf("Available=%v, %d/3 replicas available", available, d.Status.AvailableReplicas), nil
	}, framework.DumpObject(c.Client(), deploy), framework.DumpPods(c.Client(), ns), framework.DumpEvents(c.Client(), ns))

	var pods corev1.PodList
	require.NoError(t, c.Client().List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels(labels)))
	require.Len(t, pods.Items, 3)
	for _, p := range pods.Items {
		require.Equal(t, corev1.PodRunning, p.Status.Phase, p.Name)
		require.True(t, strings.HasPrefix(p.Spec.NodeName, node), "%s runs on %s, not %s", p.Name, p.Spec.NodeName, node)
		require.NotEmpty(t, p.Status.PodIP, "%s has an IP", p.Name)
	}

	dump := framework.DumpObject(c.Client(), deploy)()
	require.Contains(t, dump, "kind: Deployment")
	require.Contains(t, dump, "availableReplicas: 3")
	require.NotContains(t, dump, "managedFields", "dumps leave out managedFields")
}

// A Job's Pods run to completion on the real node; a failing one fails.
func TestJobCompletes(t *testing.T) {
	t.Parallel()
	c := framework.ClusterFor(t)
	ns := c.Namespace(t, "e2e-job")
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once", Namespace: ns},
		Spec: batchv1.JobSpec{
			Completions: ptr.To[int32](2),
			Parallelism: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "work", Image: localimage.Ref(c.NodeRegistry(), localimage.Busybox),
					Command: []string{"sh", "-c", "test -f /etc/passwd"}}},
			}},
		},
	}
	require.NoError(t, c.Client().Create(t.Context(), job))

	framework.WaitFor(t, time.Minute, "Job once to complete", func(ctx context.Context) (bool, string, error) {
		var j batchv1.Job
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(job), &j); err != nil {
			return false, "", err
		}
		for _, cond := range j.Status.Conditions {
			if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
				return false, cond.Message, framework.StopWaiting(fmt.Errorf("job failed: %s", cond.Reason))
			}
			if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
				return j.Status.Succeeded == 2, fmt.Sprintf("Complete, %d succeeded", j.Status.Succeeded), nil
			}
		}
		return false, fmt.Sprintf("%d active, %d succeeded", j.Status.Active, j.Status.Succeeded), nil
	}, framework.DumpObject(c.Client(), job), framework.DumpPods(c.Client(), ns), framework.DumpEvents(c.Client(), ns))
}

func TestPVCBindsAndItsVolumeIsReused(t *testing.T) {
	t.Parallel()
	c := framework.ClusterFor(t)
	ns := c.Namespace(t, "e2e-pvc")
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			// no storageClassName: the default class "standard" must be filled in
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	require.NoError(t, c.Client().Create(t.Context(), pvc))

	var bound corev1.PersistentVolumeClaim
	framework.WaitFor(t, time.Minute, "PVC data to be Bound", func(ctx context.Context) (bool, string, error) {
		err := c.Client().Get(ctx, client.ObjectKeyFromObject(pvc), &bound)
		return err == nil && bound.Status.Phase == corev1.ClaimBound, fmt.Sprintf("phase %s", bound.Status.Phase), err
	}, framework.DumpObject(c.Client(), pvc), framework.DumpEvents(c.Client(), ns))
	require.Equal(t, "standard", ptr.Deref(bound.Spec.StorageClassName, ""))
	require.NotEmpty(t, bound.Spec.VolumeName)

	// what the claim's user wrote there (the volume is a directory of this machine)
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: bound.Spec.VolumeName}}
	require.NoError(t, c.Client().Get(t.Context(), client.ObjectKeyFromObject(pv), pv))
	dir := pv.Spec.HostPath.Path
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "data"), []byte("the claim's"), 0o600))

	// the static volume goes back to the pool once the claim is gone,
	// scrubbed by the local cluster's volume recycler (docs/contributor/local-cluster.md#volumes)
	require.NoError(t, c.Client().Delete(t.Context(), pvc))
	framework.WaitFor(t, 2*time.Minute, "PersistentVolume "+pv.Name+" to be Available again", func(ctx context.Context) (bool, string, error) {
		var v corev1.PersistentVolume
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(pv), &v); err != nil {
			return false, "", err
		}
		return v.Status.Phase == corev1.VolumeAvailable && v.Spec.ClaimRef == nil, fmt.Sprintf("phase %s, claimRef %v", v.Status.Phase, v.Spec.ClaimRef), nil
	}, framework.DumpObject(c.Client(), pv), framework.DumpEvents(c.Client(), "default"))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "the next claim of %s finds nothing of this one", pv.Name)
}

func TestServiceAccountKubeconfigFollowsRBAC(t *testing.T) {
	t.Parallel()
	c := framework.ClusterFor(t)
	ns := c.Namespace(t, "e2e-sa")
	other := c.Namespace(t, "e2e-sa-other")
	objects := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ns}},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader", Namespace: ns},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmap-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: ns}},
		},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"k": "v"}},
	}
	for _, o := range objects {
		require.NoError(t, c.Client().Create(t.Context(), o))
	}

	path, err := c.ServiceAccountKubeconfig(t.Context(), ns, "reader")
	require.NoError(t, err)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	require.Empty(t, cfg.CertData, "authenticates with the token, not a client certificate")
	sa, err := client.New(cfg, client.Options{Scheme: c.Client().Scheme()})
	require.NoError(t, err)

	// RBAC takes effect once the apiserver's informers have seen the binding
	framework.WaitFor(t, 10*time.Second, "the RoleBinding to take effect", func(ctx context.Context) (bool, string, error) {
		err := sa.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
		return err == nil, "", err
	})

	review := &authenticationv1.SelfSubjectReview{}
	require.NoError(t, sa.Create(t.Context(), review))
	require.Equal(t, "system:serviceaccount:"+ns+":reader", review.Status.UserInfo.Username)

	tests := []struct {
		name    string
		do      func(ctx context.Context) error
		allowed bool
	}{
		{"list configmaps in its namespace", func(ctx context.Context) error {
			return sa.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
		}, true},
		{"get a configmap in its namespace", func(ctx context.Context) error {
			return sa.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, &corev1.ConfigMap{})
		}, true},
		{"create a configmap", func(ctx context.Context) error {
			return sa.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: ns}})
		}, false},
		{"list secrets in its namespace", func(ctx context.Context) error {
			return sa.List(ctx, &corev1.SecretList{}, client.InNamespace(ns))
		}, false},
		{"list configmaps in another namespace", func(ctx context.Context) error {
			return sa.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(other))
		}, false},
		{"list nodes", func(ctx context.Context) error { return sa.List(ctx, &corev1.NodeList{}) }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do(t.Context())
			if tc.allowed {
				require.NoError(t, err)
			} else {
				require.Truef(t, apierrors.IsForbidden(err), "want Forbidden, got %v", err)
			}
		})
	}

	_, err = c.ServiceAccountKubeconfig(t.Context(), ns, "does-not-exist")
	require.Error(t, err, "no kubeconfig for a missing ServiceAccount")
}

// The audit log records the requests of the module's binaries, each under
// its own ServiceAccount, and nothing else; tests and benchmarks count each
// binary's requests with it. Probes: a GET as each ServiceAccount and one as
// the admin, of ConfigMaps nobody else asks for.
func TestAuditLogRecordsOnlyTheModuleBinaries(t *testing.T) {
	t.Parallel()
	c := framework.ClusterFor(t)
	ns := framework.ManagerNamespace
	mark, err := c.MarkAudit()
	require.NoError(t, err)

	// the namespace and ServiceAccounts may exist already (other tests
	// install the module); they are left in place
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}}
	for _, id := range module.APIClients() {
		objs = append(objs, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: id.ServiceAccount, Namespace: ns}})
	}
	for _, o := range objs {
		if err := c.Client().Create(t.Context(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}

	users := map[string]bool{}    // audit user → is a module binary
	probes := map[string]string{} // probe name → the user that sent it
	adminProbe := "audit-probe-admin-" + utilrand.String(6)
	err = c.Client().Get(t.Context(), client.ObjectKey{Namespace: ns, Name: adminProbe}, &corev1.ConfigMap{})
	require.True(t, apierrors.IsNotFound(err), "admin probe: %v", err)
	for _, id := range module.APIClients() {
		user := framework.AuditUser(id)
		users[user] = true
		path, err := c.ServiceAccountKubeconfig(t.Context(), ns, id.ServiceAccount)
		require.NoError(t, err)
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		require.NoError(t, err)
		sa, err := client.New(cfg, client.Options{Scheme: c.Client().Scheme()})
		require.NoError(t, err)
		probe := "audit-probe-" + id.Binary + "-" + utilrand.String(6)
		probes[probe] = user
		err = sa.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: probe}, &corev1.ConfigMap{})
		require.True(t, apierrors.IsNotFound(err) || apierrors.IsForbidden(err), "%s probe: %v", id.Binary, err)
	}

	var events []framework.AuditEvent
	framework.WaitFor(t, 10*time.Second, "every binary's probe in the audit log", func(context.Context) (bool, string, error) {
		events, err = c.ReadAudit(mark)
		var missing []string
		for probe := range probes {
			if !slices.ContainsFunc(events, func(e framework.AuditEvent) bool { return e.ObjectRef.Name == probe }) {
				missing = append(missing, probe)
			}
		}
		return len(missing) == 0, fmt.Sprintf("%d events, none for %v", len(events), missing), err
	})
	for _, e := range events {
		require.Truef(t, users[e.User.Username], "only the module's binaries are audited: %+v", e)
		require.Equal(t, "Metadata", e.Level)
		require.NotEqual(t, adminProbe, e.ObjectRef.Name)
		if user, ok := probes[e.ObjectRef.Name]; ok {
			require.Equal(t, user, e.User.Username, "the probe is logged under its sender")
		}
	}

	counts, err := c.CountAudit(mark)
	require.NoError(t, err)
	for user := range users {
		require.GreaterOrEqual(t, counts[user].Reads(), 1, "%s sent its probe", user)
	}
	for user := range counts {
		require.True(t, users[user], "counted a user that is not a module binary: %s", user)
	}
}

func nodeCondition(n corev1.Node, typ corev1.NodeConditionType) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}
