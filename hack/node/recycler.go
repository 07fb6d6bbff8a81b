package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

// poolLabel marks the static volumes of the local cluster's pool
// (bootstrap.go); the recycler touches no other PersistentVolume.
const poolLabel = "local.serverless.kyma-project.io/pool"

// The pool's volumes have the reclaim policy Retain, and this recycler hands
// them back: kube-controller-manager's own hostPath recycler shares one Pod
// template between concurrent recycles, so two volumes released together
// both end Failed (docs/contributor/local-cluster.md#volumes). A released
// volume's directory is emptied, then its claim reference cleared, which
// makes the volume Available again.
type recycler struct {
	client kubernetes.Interface
	lister corelisters.PersistentVolumeLister
	// root is the directory that holds every volume of the pool; a volume
	// whose path is not directly below it is never scrubbed.
	root string
	log  func(format string, args ...any)
}

// volumeRecycler starts the recycler once the pool exists; its down stops
// it.
type volumeRecycler struct{}

func (volumeRecycler) Name() string { return "volume-recycler" }

// daemon is this program, copied into the state directory (a rebuild of
// bin/node while the cluster runs leaves the daemon's file alone), running
// recycle-volumes; the kubeconfig is its identity.
func (volumeRecycler) daemon(ac *actionContext) daemon {
	kubeconfig := ac.kubeconfig("volume-recycler")
	return daemon{name: "volume-recycler", path: ac.path("volume-recycler"), config: kubeconfig, grace: 5 * time.Second, args: []string{
		"recycle-volumes", kubeconfig, "-state", ac.state, "-assets", ac.assets, "-images", ac.images, "-repo", ac.repo,
	}}
}

func (v volumeRecycler) Up(_ context.Context, ac *actionContext) error {
	d := v.daemon(ac)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := copyFile(self, d.path, 0o755); err != nil {
		return fmt.Errorf("copying this program to %s: %w", d.path, err)
	}
	return ac.start(d)
}

func (v volumeRecycler) Down(_ context.Context, ac *actionContext) error {
	return ac.stop(v.daemon(ac))
}

// recycleVolumes runs the recycler until ctx ends.
func (ac *actionContext) recycleVolumes(ctx context.Context, kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 10*time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = poolLabel }))
	pvs := factory.Core().V1().PersistentVolumes()
	r := recycler{client: cs, lister: pvs.Lister(), root: filepath.Join(ac.state, "volumes"), log: ac.log.Printf}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Status.Phase == corev1.VolumeReleased {
			queue.Add(pv.Name)
		}
	}
	if _, err := pvs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	ac.log.Printf("volume recycler: watching the PersistentVolumes labelled %s, scrubbing below %s", poolLabel, r.root)
	for {
		name, shutdown := queue.Get()
		if shutdown {
			factory.Shutdown()
			return nil
		}
		if err := r.recycle(ctx, name); err != nil {
			ac.log.Printf("volume recycler: %s: %v (retrying)", name, err)
			queue.AddRateLimited(name)
		} else {
			queue.Forget(name)
		}
		queue.Done(name)
	}
}

// recycle hands the released volume name back to the pool: its directory
// emptied, its claim reference cleared. A volume that is not released (any
// more) is left alone.
func (r recycler) recycle(ctx context.Context, name string) error {
	pv, err := r.lister.Get(name)
	if err != nil {
		return err
	}
	if pv.Status.Phase != corev1.VolumeReleased || pv.Spec.ClaimRef == nil {
		return nil // not released, or handed back and about to be Available
	}
	if pv.Spec.HostPath == nil {
		return fmt.Errorf("it is no hostPath volume")
	}
	if err := scrub(r.root, pv.Spec.HostPath.Path); err != nil {
		return err
	}
	pv = pv.DeepCopy()
	claim := *pv.Spec.ClaimRef
	pv.Spec.ClaimRef = nil
	// The update carries the resourceVersion read: a claim that bound the
	// volume meanwhile makes it fail instead of being cut loose.
	if _, err := r.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		return err
	}
	r.log("volume recycler: %s scrubbed and handed back (was claimed by %s/%s)", name, claim.Namespace, claim.Name)
	return nil
}

// scrub removes everything inside dir, which must be a directory (not a
// link) directly below root; dir itself stays, as the volume's hostPath.
// Links inside are removed, never followed.
func scrub(root, dir string) error {
	clean := filepath.Clean(dir)
	if !filepath.IsAbs(clean) || filepath.Dir(clean) != filepath.Clean(root) {
		return fmt.Errorf("refusing to scrub %s: not a directory directly below %s", dir, root)
	}
	info, err := os.Lstat(clean)
	if errors.Is(err, os.ErrNotExist) {
		return nil // the kubelet creates it (DirectoryOrCreate) when next used
	}
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("refusing to scrub %s: %s, not a directory", dir, info.Mode().Type())
	}
	entries, err := os.ReadDir(clean)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(clean, e.Name())))
	}
	return errors.Join(errs...)
}

// copyFile writes src's content to dst with mode, replacing dst by a rename
// (a running copy of dst keeps its file).
func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-"+filepath.Base(dst))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
