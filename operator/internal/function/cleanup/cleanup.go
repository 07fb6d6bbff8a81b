// Package cleanup keeps in the internal Function registry only what
// Functions use. A round, run a short delay after a Function's Deployment
// changed its image or went away (and at a long interval regardless):
//
//  1. registry: read the module's registry Secret. The internal registry
//     is cleaned whole; an external one is the user's: only with the
//     opt-in (dockerRegistry.deleteUnusedExternalImages), and then only in
//     the repositories the module pushes Function images to (Repositories).
//     In buildless mode with a registry still on (after a switch), the
//     images no Deployment runs go; without it there is nothing to do.
//  2. pause: no build starts until the round ends, and the round waits
//     until none runs, so nothing pushes while images are deleted and the
//     registry collects garbage (no build fails because of a clean-up; they
//     wait for their slot).
//  3. keep: every image a cluster object refers to — the Function
//     Deployments' images, the images of their ReplicaSets that still have
//     Pods and of the revision before the current one (a rollback finds its
//     image), build Jobs' destinations, runtime base images and overrides.
//  4. delete: every other image of the registry, and each kept dependency
//     layer no kept image has (Plan).
//  5. collect: the registry's garbage collection removes the blobs nothing
//     refers to any more, which frees the volume. An external registry
//     has no agent of ours: deleting manifests is all its API allows, and
//     it frees their blobs by its own garbage collection.
package cleanup

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/pkg/buildflags"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
)

// Informers gives the cache's informers.
type Informers interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// Builds pauses the starting of builds (reconciler.BuildSlots).
type Builds interface {
	Pause(ctx context.Context) (resume func(), err error)
}

// GarbageCollector reclaims the blobs no manifest refers to any more (the
// registry's agent sidecar).
type GarbageCollector interface {
	GC(ctx context.Context) (registryagent.GCResult, error)
}

// Connect opens the registry at the registry Secret's push address with
// its credentials, and its garbage collector (nil: none, deleted images
// then free their space only when the registry collects by other means).
type Connect func(address string, creds authn.Basic, insecure bool) (Registry, GarbageCollector, error)

// Result is what a round did.
type Result struct {
	// Skipped says why nothing was done ("" when the round ran).
	Skipped          string
	Kept, Deleted    []Image
	GC               *registryagent.GCResult
	PausedFor, Total time.Duration
	// External tells that the registry was the user's (opt-in): no
	// garbage collection of ours there.
	External bool
	// Unreadable are the module's repositories there the credentials may
	// not list (left as they are).
	Unreadable []string
	// Again asks for another round soon: images were kept only for Pods
	// of Deployments that went (ReplicaSets are not watched), or running
	// builds kept the round from pausing them.
	Again bool
}

// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=list

// Cleaner runs clean-up rounds.
type Cleaner struct {
	// Reader is the controller's cache: Deployments, build Jobs,
	// Functions, the base namespace's ConfigMaps and Secrets.
	Reader client.Reader
	// API reads ReplicaSets, which the controller does not cache.
	API client.Reader
	// Informers tell when a Function Deployment's image changes or the
	// Deployment goes (the cache's).
	Informers Informers
	// Builds are paused during a round (nil in buildless mode).
	Builds  Builds
	Connect Connect
	// Repositories records the external registry's repositories the
	// module pushes to.
	Repositories Repositories
	Config       *config.Config
	// Delay after a trigger, Interval between rounds regardless, PauseFor
	// the longest wait for running builds.
	Delay, Interval, PauseFor time.Duration
	Log                       logr.Logger

	trigger chan struct{}
}

// maxAgain bounds the rounds asked for in a row by Result.Again.
const maxAgain = 30

// Trigger asks for a round after the delay.
func (c *Cleaner) Trigger() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// NeedLeaderElection: one replica cleans.
func (c *Cleaner) NeedLeaderElection() bool { return true }

// Start runs rounds until ctx ends (a manager.Runnable).
func (c *Cleaner) Start(ctx context.Context) error {
	inf, err := c.Informers.GetInformer(ctx, &appsv1.Deployment{})
	if err != nil {
		return fmt.Errorf("registry clean-up: watching Deployments: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			o, okOld := old.(*appsv1.Deployment)
			n, okNew := cur.(*appsv1.Deployment)
			if okOld && okNew && !equality.Semantic.DeepEqual(images(&o.Spec.Template.Spec), images(&n.Spec.Template.Spec)) {
				c.Trigger()
			}
		},
		DeleteFunc: func(any) { c.Trigger() },
	})
	if err != nil {
		return fmt.Errorf("registry clean-up: watching Deployments: %w", err)
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	interval := time.NewTimer(c.Interval)
	defer interval.Stop()
	var delay <-chan time.Time
	again := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.trigger:
			if delay == nil {
				delay = time.After(c.Delay)
			}
			continue
		case <-delay:
		case <-interval.C:
		}
		delay = nil
		res, err := c.Round(ctx)
		switch {
		case err != nil:
			c.Log.Error(err, "registry clean-up")
		case res.Skipped != "":
			c.Log.V(1).Info("registry clean-up skipped", "reason", res.Skipped)
		default:
			kv := []any{"kept", len(res.Kept), "deleted", len(res.Deleted), "buildsPaused", res.PausedFor.String(), "took", res.Total.String()}
			if res.GC != nil {
				kv = append(kv, "bytesBefore", res.GC.BytesBefore, "bytesAfter", res.GC.BytesAfter, "gcTook", res.GC.Duration().String())
			}
			if res.External {
				kv = append(kv, "garbageCollection", "the external registry's own")
			}
			if len(res.Unreadable) > 0 {
				kv = append(kv, "unreadableRepositories", res.Unreadable)
			}
			c.Log.Info("registry clean-up", kv...)
		}
		// Bounded: ReplicaSets that outlive their Deployment for long (an
		// orphaning delete) are left to the interval.
		if again = again + 1; !res.Again {
			again = 0
		} else if again <= maxAgain {
			c.Trigger()
		}
		interval.Reset(c.Interval)
	}
}

// New returns a Cleaner with its trigger.
func New(c Cleaner) *Cleaner {
	c.trigger = make(chan struct{}, 1)
	return &c
}

// Round runs the steps once.
func (c *Cleaner) Round(ctx context.Context) (Result, error) {
	start := time.Now()
	// 1. registry
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: c.Config.BaseNamespace, Name: c.Config.ImageRegistryDefaultDockerConfigSecretName}
	if err := c.Reader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			// Buildless mode without the internal registry: nothing to clean.
			return Result{Skipped: "no registry Secret " + key.String()}, nil
		}
		return Result{}, fmt.Errorf("reading the registry Secret %s: %w", key, err)
	}
	reg, err := resources.RegistryFromSecret(secret)
	if err != nil {
		return Result{}, err
	}
	if !reg.Internal && !c.Config.RegistryCleanupExternal {
		return Result{Skipped: "the Function registry is external and dockerRegistry.deleteUnusedExternalImages is not set"}, nil
	}
	registry, gc, err := c.Connect(reg.PushAddress, authn.Basic{Username: string(secret.Data["username"]), Password: string(secret.Data["password"])},
		buildflags.Parse(c.Config.Build.ExecutorArgs).Insecure)
	if err != nil {
		return Result{}, err
	}
	if !reg.Internal {
		gc = nil
	}

	// 2. pause (buildless mode: nothing builds)
	paused := time.Now()
	if c.Builds != nil {
		pauseCtx, cancel := context.WithTimeout(ctx, c.PauseFor)
		resume, err := c.Builds.Pause(pauseCtx)
		cancel()
		if err != nil {
			// Builds kept running: try again after the delay rather than the interval.
			return Result{Skipped: err.Error(), Again: true}, nil
		}
		paused = time.Now()
		defer resume()
	}

	// 3. keep
	addresses := []string{reg.PushAddress, reg.PullAddress}
	if reg.Internal {
		addresses = InternalAddresses(reg.PushAddress, reg.PullAddress)
	}
	keep, going, err := c.keepRefs(ctx, addresses...)
	if err != nil {
		return Result{}, err
	}
	// 4. delete
	var repos *external
	if !reg.Internal {
		if repos, err = c.externalRepositories(ctx, reg.PushAddress); err != nil {
			return Result{}, err
		}
	}
	stored, unreadable, err := registry.Images(ctx, repos.list())
	if err != nil {
		return Result{}, err
	}
	kept, deleted := Plan(stored, keep, resources.DependencyCacheRepository)
	res := Result{Kept: kept, Deleted: deleted, Again: going, External: !reg.Internal, Unreadable: unreadable}
	for _, img := range deleted {
		if err := registry.Delete(ctx, img); err != nil {
			return res, err
		}
	}
	if err := repos.forgetEmptied(ctx, c.Repositories, kept); err != nil {
		return res, err
	}
	// 5. collect
	if gc != nil && len(deleted) > 0 {
		collected, err := gc.GC(ctx)
		if err != nil {
			return res, fmt.Errorf("registry garbage collection: %w", err)
		}
		res.GC = &collected
	}
	res.PausedFor, res.Total = time.Since(paused), time.Since(start)
	return res, nil
}

// external are the repositories of an external registry the clean-up may
// touch: those recorded for its address, each with 1.8.4's kaniko cache
// below it, and the dependency layers' repository.
type external struct {
	address string
	// recorded repositories; functions: those of existing Functions.
	recorded, functions []string
}

// externalRepositories records the repositories of the existing Functions
// (built before the opt-in, or before the record existed) and returns
// every recorded one.
func (c *Cleaner) externalRepositories(ctx context.Context, address string) (*external, error) {
	var fns v1alpha2.FunctionList
	if err := c.Reader.List(ctx, &fns); err != nil {
		return nil, fmt.Errorf("listing Functions: %w", err)
	}
	ext := &external{address: address}
	for i := range fns.Items {
		ext.functions = append(ext.functions, resources.Repository(&fns.Items[i]))
	}
	known, err := c.Repositories.Known(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.Repositories.Remember(ctx, address, ext.functions...); err != nil {
		return nil, err
	}
	for _, repo := range ext.functions {
		known[repo] = address
	}
	for repo, addr := range known {
		if addr == address {
			ext.recorded = append(ext.recorded, repo)
		}
	}
	slices.Sort(ext.recorded)
	return ext, nil
}

// list is nil for the internal registry (all of it).
func (e *external) list() []string {
	if e == nil {
		return nil
	}
	out := []string{resources.DependencyCacheRepository}
	for _, repo := range e.recorded {
		out = append(out, repo, repo+kanikoCacheSuffix)
	}
	return out
}

// kanikoCacheSuffix: 1.8.4's kaniko cached layers in <destination
// repository>/cache (its default without --cache-repo).
const kanikoCacheSuffix = "/cache"

// forgetEmptied drops from the record the repositories of departed
// Functions that keep no image: a new Function of that name records it
// again before it pushes.
func (e *external) forgetEmptied(ctx context.Context, record Repositories, kept []Image) error {
	if e == nil {
		return nil
	}
	var gone []string
	for _, repo := range e.recorded {
		if slices.Contains(e.functions, repo) || slices.ContainsFunc(kept, func(img Image) bool {
			return img.Repository == repo || img.Repository == repo+kanikoCacheSuffix
		}) {
			continue
		}
		gone = append(gone, repo)
	}
	return record.Forget(ctx, gone...)
}
