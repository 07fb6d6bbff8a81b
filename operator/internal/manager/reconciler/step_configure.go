package reconciler

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/apply"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// +kubebuilder:rbac:groups="",resources=services,verbs=list

// stepConfigure turns the spec and what the cluster holds into chart values
// and the effective configuration shown in the status.
func (r *Reconciler) stepConfigure(ctx context.Context, s *state) (steps.Outcome, error) {
	facts, err := r.facts(ctx, s.cr)
	facts.Mode = values.ModeFacts{
		Annotation: s.cr.Annotations[v1alpha1.BuildlessModeAnnotation],
		InEffect:   s.cr.Status.FunctionMode,
		TakenOver:  s.upstream.mode(),
	}
	if err != nil {
		return r.fail(s, v1alpha1.ConditionConfigured, v1alpha1.ReasonClusterReadFailed, fmt.Errorf("reading the cluster: %w", err), true)
	}
	built, err := values.Build(s.cr.Spec, facts)
	var cfgErr *values.ConfigError
	if errors.As(err, &cfgErr) {
		s.cr.Status.ObservedGeneration = s.cr.Generation
		return r.fail(s, v1alpha1.ConditionConfigured, cfgErr.Reason, err, false)
	}
	if err != nil {
		return r.fail(s, v1alpha1.ConditionConfigured, v1alpha1.ReasonConfigurationInvalid, err, false)
	}
	if built.Values.DockerRegistry.EnableInternal {
		s.nodePort = built.Values.Global.RegistryNodePort
	}
	if c := facts.InternalCredentials; c != nil && c.From != "" {
		// Credentials read from their Secret go back to that Secret only.
		secret := inventory.Ref{GroupKind: schema.GroupKind{Kind: "Secret"}, Namespace: s.cr.Namespace, Name: module.RegistrySecretName}
		s.pins = apply.Pins{secret.ID(): c.From}
	}
	s.values, err = built.Values.Map()
	if err != nil {
		return r.fail(s, v1alpha1.ConditionConfigured, v1alpha1.ReasonConfigurationInvalid, err, false)
	}
	s.changes = values.Changes(s.cr.Status.EffectiveConfiguration, built.Effective)
	s.cr.Status.EffectiveConfiguration = built.Effective
	for _, w := range built.Warnings {
		s.warnings = append(s.warnings, w.String())
	}
	msg := "configuration is valid"
	reason := v1alpha1.ReasonConfigured
	// The first warning (else note) is the condition's cause; the others
	// follow with their own causes.
	if all := append(slices.Clone(built.Warnings), built.Notes...); len(all) > 0 {
		reason, msg = all[0].Cause, all[0].Message
		for _, n := range all[1:] {
			msg += "; " + n.String()
		}
	}
	if ignored := built.Effective.BuildExecutorArgsIgnored; ignored != "" {
		msg += "; functionBuildExecutorArgs without effect on the module's builder: " + ignored
	}
	if built.Values.FunctionMode == v1alpha1.FunctionModeBuildless && built.Values.DockerRegistry.EnableInternal {
		msg += "; Functions run buildless: the internal registry stays until dockerRegistry.enableInternal is false"
	}
	s.setCondition(v1alpha1.ConditionConfigured, metav1.ConditionTrue, reason, msg)
	return steps.Next(), nil
}

// facts gathers what the values depend on besides the spec, from the cache
// (Secret data and the registry's NodePort from the API server, see
// readThrough); only the first install of the internal registry lists
// Services cluster-wide to find a free NodePort.
func (r *Reconciler) facts(ctx context.Context, cr *v1alpha1.Serverless) (values.Facts, error) {
	ns := cr.Namespace
	f := values.Facts{Namespace: ns, ImageOverrides: r.opts.ImageOverrides, FIPSMode: r.opts.FIPSMode, NewSecret: r.opts.NewSecret}
	var err error
	if f.Nodes, err = r.live.NodeCount(ctx); err != nil {
		return f, err
	}
	if err := r.useNamed(ctx, cr); err != nil {
		return f, err
	}
	if cr.Spec.Tracing == nil {
		_, found, err := r.watchedMeta(ctx, corev1.SchemeGroupVersion.WithKind("Service"), types.NamespacedName{Namespace: ns, Name: values.TracingServiceName})
		if err != nil {
			return f, err
		}
		f.TracingServiceExists = found
	}

	reg := cr.Spec.DockerRegistry
	internal := reg != nil && reg.EnableInternal != nil && *reg.EnableInternal
	if !internal {
		if name := userRegistrySecret(cr); name != "" {
			s, found, err := r.secretData(ctx, types.NamespacedName{Namespace: ns, Name: name})
			if err != nil {
				return f, err
			}
			if found {
				f.RegistrySecret = s.data
			}
		}
		return f, nil
	}

	s, found, err := r.secretData(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistrySecretName})
	if err != nil {
		return f, err
	}
	if found && string(s.data["isInternal"]) == "true" {
		f.InternalCredentials = &values.Credentials{Username: string(s.data["username"]), Password: string(s.data["password"]), From: s.uid}
	}
	pvc := &corev1.PersistentVolumeClaim{}
	found, err = r.get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistryPVCName}, pvc)
	if err != nil {
		return f, err
	}
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; found && ok {
		f.PVCSize = q.String()
		if asked := reg.VolumeSize; asked != nil && asked.Cmp(q) > 0 {
			if f.PVCStorageClass, f.PVCExpandable, err = r.expandable(ctx, pvc); err != nil {
				return f, err
			}
		}
	}
	if f.NodePort, _, err = r.serviceNodePort(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistryServiceName}); err != nil {
		return f, err
	}
	if f.NodePort == 0 {
		if f.NodePort, err = r.freeNodePort(ctx); err != nil {
			return f, err
		}
	}
	return f, nil
}

// useNamed declares the users' objects cr's configuration reads, so they
// are watched by name (the cache holds only the module's objects): the
// telemetry traces Service unless the CR names an endpoint, and the
// registry Secret it names for an external registry.
func (r *Reconciler) useNamed(ctx context.Context, cr *v1alpha1.Serverless) error {
	if r.opts.Named == nil {
		return nil
	}
	var keys []watch.NamedKey
	if cr.Spec.Tracing == nil {
		keys = append(keys, watch.NamedKey{GVK: corev1.SchemeGroupVersion.WithKind("Service"),
			NamespacedName: types.NamespacedName{Namespace: cr.Namespace, Name: values.TracingServiceName}})
	}
	if name := userRegistrySecret(cr); name != "" {
		keys = append(keys, watch.NamedKey{GVK: corev1.SchemeGroupVersion.WithKind("Secret"),
			NamespacedName: types.NamespacedName{Namespace: cr.Namespace, Name: name}})
	}
	if err := r.opts.Named.Use(ctx, cr.Namespace+"/"+cr.Name, keys...); err != nil {
		return fmt.Errorf("watching the objects the configuration reads: %w", err)
	}
	return nil
}

// userRegistrySecret is the registry Secret cr names for an external
// registry; empty with the internal registry, which ignores it.
func userRegistrySecret(cr *v1alpha1.Serverless) string {
	reg := cr.Spec.DockerRegistry
	if reg == nil || (reg.EnableInternal != nil && *reg.EnableInternal) || reg.SecretName == nil {
		return ""
	}
	return *reg.SecretName
}

// servicePageSize bounds how many Services one list response holds: the
// search walks every Service of the cluster, page by page.
const servicePageSize = 500

// freeNodePort lists every Service's node ports, a page at a time, and
// picks one for the registry in the NodePort range.
func (r *Reconciler) freeNodePort(ctx context.Context) (int32, error) {
	used := r.refused()
	cont := ""
	for {
		list := &corev1.ServiceList{}
		if err := r.api.List(ctx, list, client.Limit(servicePageSize), client.Continue(cont)); err != nil {
			return 0, fmt.Errorf("listing Services to find a free NodePort: %w", err)
		}
		for _, svc := range list.Items {
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					used[p.NodePort] = true
				}
			}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	rng := r.portRange()
	port := values.PickNodePort(used, rng)
	if port == 0 {
		return 0, fmt.Errorf("no free NodePort left for the internal registry in %s", rng)
	}
	return port, nil
}

// get reads an object from the cache; found is false when it does not exist.
func (r *Reconciler) get(ctx context.Context, key types.NamespacedName, into client.Object) (bool, error) {
	err := r.client.Get(ctx, key, into)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// refusedPortMemory is how long a NodePort the API server refused is avoided.
const refusedPortMemory = 10 * time.Minute

// refuse remembers that the API server refused port.
func (r *Reconciler) refuse(port int32) {
	r.portsMu.Lock()
	defer r.portsMu.Unlock()
	r.refusedPorts[port] = time.Now()
}

// refused returns the ports refused recently, as a set.
func (r *Reconciler) refused() map[int32]bool {
	r.portsMu.Lock()
	defer r.portsMu.Unlock()
	out := map[int32]bool{}
	for p, at := range r.refusedPorts {
		if time.Since(at) < refusedPortMemory {
			out[p] = true
		} else {
			delete(r.refusedPorts, p)
		}
	}
	return out
}

// isNodePortTaken tells whether err is the API server refusing a NodePort
// that is allocated already.
func isNodePortTaken(err error) bool {
	for _, c := range nodePortCauses(err) {
		if strings.Contains(c.Message, "already allocated") {
			return true
		}
	}
	return false
}

// validRangeRE finds the range in the API server's refusal of a NodePort
// outside --service-node-port-range.
var validRangeRE = regexp.MustCompile(`range of valid ports is (\d+-\d+)`)

// nodePortOutOfRange tells whether err is the API server refusing a NodePort
// outside its range, and the range it names (ok false when it names none).
func nodePortOutOfRange(err error) (rng values.NodePortRange, refused, ok bool) {
	for _, c := range nodePortCauses(err) {
		if !strings.Contains(c.Message, "not in the valid range") {
			continue
		}
		m := validRangeRE.FindStringSubmatch(c.Message)
		if m == nil {
			return values.NodePortRange{}, true, false
		}
		rng, err := values.ParseNodePortRange(m[1])
		return rng, true, err == nil
	}
	return values.NodePortRange{}, false, false
}

func nodePortCauses(err error) []metav1.StatusCause {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var out []metav1.StatusCause
	for _, c := range status.Status().Details.Causes {
		if strings.HasSuffix(c.Field, ".nodePort") {
			out = append(out, c)
		}
	}
	return out
}

// portRange is the NodePort range to pick from: the one the API server
// named when it refused a port, else the configured one.
func (r *Reconciler) portRange() values.NodePortRange {
	r.portsMu.Lock()
	defer r.portsMu.Unlock()
	if r.learnedRange != nil {
		return *r.learnedRange
	}
	if r.opts.NodePortRange.Max == 0 {
		return values.DefaultNodePortRange()
	}
	return r.opts.NodePortRange
}

// learnRange remembers the range the API server named.
func (r *Reconciler) learnRange(rng values.NodePortRange) {
	r.portsMu.Lock()
	defer r.portsMu.Unlock()
	r.learnedRange = &rng
}

// expandable reads whether the claim's StorageClass lets it grow (only
// asked when a larger volume is wanted).
func (r *Reconciler) expandable(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (string, bool, error) {
	name := ""
	if pvc.Spec.StorageClassName != nil {
		name = *pvc.Spec.StorageClassName
	}
	if name == "" {
		return name, false, nil
	}
	sc := &storagev1.StorageClass{}
	if err := r.api.Get(ctx, types.NamespacedName{Name: name}, sc); err != nil {
		if apierrors.IsNotFound(err) {
			return name, false, nil
		}
		return name, false, fmt.Errorf("reading StorageClass %s: %w", name, err)
	}
	return name, sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion, nil
}
