// Package cleanup keeps in the internal Function registry only what
// Functions use. A round, run a short delay after a Function's Deployment
// changed its image or went away (and at a long interval regardless):
//
//  1. registry: read the module's registry Secret; only the internal
//     registry is cleaned (an external one is the user's). In buildless
//     mode with the internal registry still on (after a switch), the
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
//     refers to any more, which frees the volume.
package cleanup

import (
	"context"
	"fmt"
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
	Config  *config.Config
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
				kv = append(kv, "bytesBefore", res.GC.BytesBefore, "bytesAfter", res.GC.BytesAfter)
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
	if !reg.Internal {
		return Result{Skipped: "the Function registry is external"}, nil
	}
	registry, gc, err := c.Connect(reg.PushAddress, authn.Basic{Username: string(secret.Data["username"]), Password: string(secret.Data["password"])},
		buildflags.Parse(c.Config.Build.ExecutorArgs).Insecure)
	if err != nil {
		return Result{}, err
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
	keep, going, err := c.keepRefs(ctx, reg.PushAddress, reg.PullAddress)
	if err != nil {
		return Result{}, err
	}
	// 4. delete
	stored, err := registry.Images(ctx)
	if err != nil {
		return Result{}, err
	}
	kept, deleted := Plan(stored, keep, resources.DependencyCacheRepository)
	res := Result{Kept: kept, Deleted: deleted, Again: going}
	for _, img := range deleted {
		if err := registry.Delete(ctx, img); err != nil {
			return res, err
		}
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
