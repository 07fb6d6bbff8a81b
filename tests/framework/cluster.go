// Package framework is the small toolkit of our end-to-end tests: it brings up
// the local control plane of hack/cluster.sh once per test binary, hands out
// clients and ServiceAccount kubeconfigs, runs processes such as bin/manager,
// and waits for conditions with failure messages that say what was observed.
//
// A test package uses it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(framework.RunMain(m)) }
//
// and reaches the cluster in its tests with framework.ClusterFor(t).
package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kyma-project/serverless-manager/hack/cluster/localcluster"
	"github.com/kyma-project/serverless-manager/hack/cluster/process"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// Cluster is the local control plane the tests run against.
type Cluster struct {
	root       string
	kubeconfig string
	config     *rest.Config
	client     client.Client
}

var (
	ensureMu sync.Mutex
	ensured  *Cluster
)

// EnsureCluster starts the local cluster with `hack/cluster.sh up` the first
// time a test binary calls it (a healthy running cluster is reused) and
// returns the same Cluster on later calls. The script's progress goes to
// stderr; a cold start that has to build the tools takes several minutes.
//
// The test process registers itself as a user of the cluster; Release
// unregisters it, and the last test process to release a cluster that tests
// started tears it down (unless E2E_KEEP_CLUSTER=1). A cluster started with
// `make cluster-up` is never torn down by tests.
func EnsureCluster(ctx context.Context) (*Cluster, error) {
	ensureMu.Lock()
	defer ensureMu.Unlock()
	if ensured != nil {
		return ensured, nil
	}
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	process.KeepInheritedFilesToOurselves()
	if _, err := runScript(ctx, root, "up", "--user", fmt.Sprint(os.Getpid())); err != nil {
		return nil, err
	}
	c := &Cluster{root: root, kubeconfig: filepath.Join(root, ".cluster", "kubeconfig")}
	if c.config, err = clientcmd.BuildConfigFromFlags("", c.kubeconfig); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", c.kubeconfig, err)
	}
	c.config.QPS, c.config.Burst = 50, 100
	if c.client, err = c.NewClient(nil); err != nil {
		return nil, err
	}
	ensured = c
	return c, nil
}

// ClusterFor is EnsureCluster for use inside a test: it fails the test when
// the cluster cannot be brought up.
func ClusterFor(t testing.TB) *Cluster {
	t.Helper()
	c, err := EnsureCluster(t.Context())
	if err != nil {
		t.Fatalf("local cluster: %v", err)
	}
	return c
}

// RunMain is the body of a TestMain: it brings the cluster up, loads the
// images of `make image` into its real node, runs the tests, saves the
// cluster logs under tests/.artifacts/ when a test failed, releases the
// cluster and returns the exit code for os.Exit.
func RunMain(m *testing.M) int {
	// The tests' clients have nothing to log; without a logger
	// controller-runtime prints a warning with a stack trace instead.
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute) // cold tool builds are slow
	c, err := EnsureCluster(ctx)
	if err == nil {
		err = c.LoadImages(ctx)
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cannot bring up the local cluster:", err)
		if c != nil {
			_ = c.Release()
		}
		return 1
	}
	code := m.Run()
	if code != 0 {
		if dir, err := c.SaveArtifacts(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: saving cluster logs:", err)
		} else {
			fmt.Fprintln(os.Stderr, "e2e: tests failed; cluster logs copied to", dir)
		}
	}
	if err := c.Release(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: releasing the cluster:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Release tells hack/cluster.sh that this test process is done with the
// cluster (see EnsureCluster for when that stops it).
func (c *Cluster) Release() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := runScript(ctx, c.root, "release", fmt.Sprint(os.Getpid()))
	return err
}

// Root is the repository root.
func (c *Cluster) Root() string { return c.root }

// KubeconfigPath is the admin (system:masters) kubeconfig.
func (c *Cluster) KubeconfigPath() string { return c.kubeconfig }

// RESTConfig returns a copy of the admin rest config.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.config) }

// Client is an admin client that knows the client-go and apiextensions types.
func (c *Cluster) Client() client.Client { return c.client }

// NewClient returns an admin client for the given scheme (nil: the client-go
// types plus apiextensions/v1), e.g. one that also knows our CRD types.
func (c *Cluster) NewClient(scheme *runtime.Scheme) (client.Client, error) {
	if scheme == nil {
		scheme = runtime.NewScheme()
		for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme} {
			if err := add(scheme); err != nil {
				return nil, err
			}
		}
	}
	return client.New(c.RESTConfig(), client.Options{Scheme: scheme})
}

// LogDir holds one log file per control-plane component.
func (c *Cluster) LogDir() string { return filepath.Join(c.root, ".cluster", "logs") }

// AuditLogPath is the kube-apiserver audit log. It records only the requests
// of system:serviceaccount:kyma-system:serverless-manager (hack/cluster/audit-policy.yaml).
func (c *Cluster) AuditLogPath() string { return filepath.Join(c.root, ".cluster", "audit.log") }

// Setting returns a setting of the running cluster by the name scripts use
// (localcluster.Config.Settings: NODES, PVS, APISERVER_PORT, NODE_IP, ...;
// "" when there is no cluster or no such setting).
func (c *Cluster) Setting(name string) string {
	lc, err := localcluster.Read(filepath.Join(c.root, ".cluster"))
	if err != nil {
		return ""
	}
	return lc.Settings()[name]
}

// Namespace creates a namespace named <prefix>-<random> for one test and
// deletes it when the test ends (a failed test's namespace is kept when
// E2E_KEEP_CLUSTER=1, for a look at what went wrong).
func (c *Cluster) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + utilrand.String(5)}}
	if err := c.client.Create(t.Context(), ns); err != nil {
		t.Fatalf("create namespace %s: %v", ns.Name, err)
	}
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("E2E_KEEP_CLUSTER") == "1" {
			t.Logf("keeping namespace %s of the failed test", ns.Name)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.DeleteNamespace(ctx, ns.Name); err != nil {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// DeleteNamespace deletes the namespace's Functions, then the namespace; a
// namespace that is gone or already being deleted (the API server answers
// Conflict) is no error. Functions first: a namespace being deleted keeps
// its other objects until its Pods are gone (ordered namespace deletion),
// so its Functions would hold the test's uninstall (which waits while a
// Function exists) back for as long as their Pods take to stop. Only a
// speed-up: the namespace's deletion removes them anyway, so a failure to
// delete them is not returned.
func (c *Cluster) DeleteNamespace(ctx context.Context, name string) error {
	fns := &metav1.PartialObjectMetadata{}
	fns.SetGroupVersionKind(functionGVK)
	_ = c.client.DeleteAllOf(ctx, fns, client.InNamespace(name))
	if err := c.client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount ns/sa (a 24h token from the TokenRequest API) and returns
// its path. The ServiceAccount must exist.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, ns, sa string) (string, error) {
	out, err := runScript(ctx, c.root, "kubeconfig-sa", ns, sa)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// SaveArtifacts copies the component logs and the audit log to
// tests/.artifacts/cluster-<time>/ and returns that directory.
func (c *Cluster) SaveArtifacts() (string, error) {
	dir := filepath.Join(c.root, "tests", ".artifacts", "cluster-"+time.Now().Format("20060102-150405"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	files, _ := filepath.Glob(filepath.Join(c.LogDir(), "*.log"))
	files = append(files, c.AuditLogPath())
	var errs []error
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644))
	}
	return dir, errors.Join(errs...)
}

// runScript runs hack/cluster.sh with its progress on our stderr and
// returns its stdout; a failure carries the script's last message.
func runScript(ctx context.Context, root string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "cluster.sh"), args...)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(os.Stderr, &stderr)
	cmd.WaitDelay = 10 * time.Second // after a cancel, do not wait forever for grandchildren holding the pipes
	if err := cmd.Run(); err != nil {
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		return stdout.String(), fmt.Errorf("hack/cluster.sh %s: %w: %s", strings.Join(args, " "), err, lines[len(lines)-1])
	}
	return stdout.String(), nil
}
