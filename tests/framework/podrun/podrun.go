// Package podrun runs a container of a Deployment as a process on this
// machine, with the configuration its Pod would get: the container's
// command, arguments and environment, its ConfigMap, Secret and emptyDir
// volumes materialised under a local directory (and kept in sync with the
// cluster while the process runs, as kubelet does), and listen addresses
// moved to free loopback ports. On the local cluster Pods are simulated, so
// this is how the module's controllers really run there; e2e tests
// (tests/framework) and `make run` (hack/podrun) share it.
//
// The ServiceAccount is reported, not applied: the caller gives the process
// a kubeconfig of that ServiceAccount.
package podrun

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Spec names the container to run.
type Spec struct {
	Namespace, Deployment string
	// Container is the container's name; empty means the first one.
	Container string
	// BinDir holds the binaries; the command's file name is looked up there
	// (an image entrypoint /registry-agent runs BinDir/registry-agent).
	BinDir string
	// Dir is where volumes are materialised, one directory per mount path
	// (/appconfig → Dir/appconfig).
	Dir string
	// FreePort returns a free loopback port; nil picks one from the kernel.
	FreePort func() (int, error)
	// Images tells how to run containers that give no command (the image's
	// entrypoint runs), keyed by the image's repository name
	// ("…/external/library/registry:3.0.0" → "registry").
	Images map[string]Image
}

// Image is what runs here for a container of an image that is not ours,
// when the container gives no command.
type Image struct {
	// Entrypoint is the image's entrypoint as a command on this machine
	// (absolute path first); the container's args follow it.
	Entrypoint []string
	// ListenEnv names, per port the software listens on, the environment
	// variable that overrides the address its configuration file gives;
	// each gets a free loopback port (Plan.Addresses, by port name where
	// the container declares the port, else by number).
	ListenEnv map[int32]string
	// InProcess, instead of Entrypoint, does the container's work in the
	// caller's process with the plan's mounts (an init container's small
	// job, e.g. writing a file from a Secret).
	InProcess func(ctx context.Context, p *Plan) error
}

// Plan is how the container runs here.
type Plan struct {
	// Path of the binary and its arguments.
	Path string
	Args []string
	// Env is NAME=value, the container's variables with mount paths and
	// listen addresses rewritten, in the container's order.
	Env []string
	// Namespace and ServiceAccount the Pod would run as.
	Namespace, ServiceAccount string
	// Addresses maps a container port's name to the loopback address the
	// process listens on instead (only ports an env variable sets).
	Addresses map[string]string
	// Ports maps a container port number to the same loopback address.
	Ports map[int32]string
	// Mounts maps each mount path to its local directory.
	Mounts map[string]string
	// InProcess is set for an image whose work runs in the caller's process
	// (Image.InProcess); Path and Args are then empty.
	InProcess func(ctx context.Context, p *Plan) error

	volumes []volume
	// deployment and template are what the plan was made from (Rolled).
	deployment types.NamespacedName
	template   corev1.PodTemplateSpec
}

// volume is one materialised ConfigMap or Secret volume.
type volume struct {
	dir      string
	kind     string // ConfigMap or Secret
	name     string
	items    []corev1.KeyToPath
	optional bool
}

// listenAddress is a bind address on every interface: ":8080", "0.0.0.0:8080", "[::]:8080".
var listenAddress = regexp.MustCompile(`^(|0\.0\.0\.0|\[::\]):([0-9]+)$`)

// Prepare reads the Deployment, materialises its volumes under spec.Dir and
// returns the plan to run its container.
func Prepare(ctx context.Context, c client.Reader, spec Spec) (*Plan, error) {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: spec.Namespace, Name: spec.Deployment}, d); err != nil {
		return nil, fmt.Errorf("reading Deployment %s/%s: %w", spec.Namespace, spec.Deployment, err)
	}
	p, err := prepare(ctx, c, spec, d.Name+"-local", d.Spec.Template.Spec)
	if err != nil {
		return nil, fmt.Errorf("Deployment %s/%s: %w", spec.Namespace, spec.Deployment, err)
	}
	p.deployment = types.NamespacedName{Namespace: spec.Namespace, Name: spec.Deployment}
	p.template = *d.Spec.Template.DeepCopy()
	return p, nil
}

// PreparePod is Prepare for a container, or init container, of a Pod
// (spec.Namespace is the Pod's, spec.Deployment is not used).
func PreparePod(ctx context.Context, c client.Reader, pod *corev1.Pod, spec Spec) (*Plan, error) {
	spec.Namespace = pod.Namespace
	p, err := prepare(ctx, c, spec, pod.Name, pod.Spec)
	if err != nil {
		return nil, fmt.Errorf("Pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return p, nil
}

func prepare(ctx context.Context, c client.Reader, spec Spec, podName string, pod corev1.PodSpec) (*Plan, error) {
	ctr, err := container(pod, spec.Container)
	if err != nil {
		return nil, err
	}
	p := &Plan{
		Namespace:      spec.Namespace,
		ServiceAccount: pod.ServiceAccountName,
		Addresses:      map[string]string{},
		Ports:          map[int32]string{},
	}
	image, known := spec.Images[ImageName(ctr.Image)]
	switch {
	case len(ctr.Command) > 0:
		p.Path = filepath.Join(spec.BinDir, filepath.Base(ctr.Command[0]))
		p.Args = append(append([]string{}, ctr.Command[1:]...), ctr.Args...)
	case known && image.InProcess != nil:
		p.InProcess = image.InProcess
	case known && len(image.Entrypoint) > 0:
		p.Path = image.Entrypoint[0]
		p.Args = append(append([]string{}, image.Entrypoint[1:]...), ctr.Args...)
	default:
		return nil, fmt.Errorf("container %s: no command, and the entrypoint of image %s is not known here", ctr.Name, ctr.Image)
	}
	if p.ServiceAccount == "" {
		p.ServiceAccount = "default"
	}
	mounts, err := p.mountVolumes(ctx, c, pod, ctr, spec.Dir)
	if err != nil {
		return nil, err
	}
	p.Mounts = mounts
	for i, a := range p.Args {
		// an argument that is a path inside a mount, alone or as --flag=path
		if flag, value, ok := strings.Cut(a, "="); ok && strings.HasPrefix(flag, "-") {
			p.Args[i] = flag + "=" + rewritePath(value, mounts)
		} else {
			p.Args[i] = rewritePath(a, mounts)
		}
	}
	if _, err := p.Sync(ctx, c); err != nil {
		return nil, err
	}
	freePort := spec.FreePort
	if freePort == nil {
		freePort = FreeLoopbackPort
	}
	ports := map[int32]string{}
	for _, port := range ctr.Ports {
		ports[port.ContainerPort] = port.Name
	}
	for _, e := range ctr.Env {
		value, err := envValue(ctx, c, spec.Namespace, podName, p.ServiceAccount, e)
		if err != nil {
			return nil, err
		}
		value = rewritePath(value, mounts)
		if m := listenAddress.FindStringSubmatch(value); m != nil {
			n, _ := strconv.Atoi(m[2])
			if name, ok := ports[int32(n)]; ok {
				free, err := freePort()
				if err != nil {
					return nil, fmt.Errorf("a free port for %s: %w", e.Name, err)
				}
				value = net.JoinHostPort("127.0.0.1", strconv.Itoa(free))
				p.listen(int32(n), name, value)
			}
		}
		p.Env = append(p.Env, e.Name+"="+value)
	}
	listenEnv := make([]int32, 0, len(image.ListenEnv))
	for port := range image.ListenEnv {
		listenEnv = append(listenEnv, port)
	}
	sort.Slice(listenEnv, func(i, j int) bool { return listenEnv[i] < listenEnv[j] })
	for _, port := range listenEnv {
		free, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("a free port for %s: %w", image.ListenEnv[port], err)
		}
		value := net.JoinHostPort("127.0.0.1", strconv.Itoa(free))
		p.listen(port, ports[port], value)
		p.Env = append(p.Env, image.ListenEnv[port]+"="+value)
	}
	return p, nil
}

// listen records that container port number (named name, or unnamed) is
// served on the loopback address addr.
func (p *Plan) listen(number int32, name, addr string) {
	if name == "" {
		name = strconv.Itoa(int(number))
	}
	p.Addresses[name] = addr
	p.Ports[number] = addr
}

// ImageName is an image reference's repository name without registry,
// path, tag or digest: "europe-docker.pkg.dev/p/external/library/registry:3.0.0" → "registry".
func ImageName(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	name := ref[strings.LastIndex(ref, "/")+1:]
	name, _, _ = strings.Cut(name, ":")
	return name
}

// Rolled tells whether the Deployment's Pod template differs from the one
// the plan was made from: the Deployment controller would replace the Pod
// (e.g. a new log format, read only at start), so the process has to be
// started again from a new plan. Scaling or status changes do not count.
func (p *Plan) Rolled(ctx context.Context, c client.Reader) (bool, error) {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, p.deployment, d); err != nil {
		return false, fmt.Errorf("reading Deployment %s: %w", p.deployment, err)
	}
	return !equality.Semantic.DeepEqual(p.template, d.Spec.Template), nil
}

func container(pod corev1.PodSpec, name string) (corev1.Container, error) {
	for _, c := range append(append([]corev1.Container{}, pod.Containers...), pod.InitContainers...) {
		if name == "" || c.Name == name {
			return c, nil
		}
	}
	return corev1.Container{}, fmt.Errorf("no container %q", name)
}

// mountVolumes creates a directory per volume mount and records the
// ConfigMaps and Secrets to write there; a PersistentVolumeClaim mounts the
// host path of its bound volume. It returns mount path → local dir.
func (p *Plan) mountVolumes(ctx context.Context, c client.Reader, pod corev1.PodSpec, ctr corev1.Container, dir string) (map[string]string, error) {
	byName := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		byName[v.Name] = v
	}
	mounts := map[string]string{}
	for _, m := range ctr.VolumeMounts {
		v, ok := byName[m.Name]
		if !ok {
			return nil, fmt.Errorf("volume mount %s: no such volume", m.Name)
		}
		if m.SubPath != "" {
			return nil, fmt.Errorf("volume mount %s: subPath is not supported here", m.Name)
		}
		if v.PersistentVolumeClaim != nil {
			local, err := claimPath(ctx, c, p.Namespace, v.PersistentVolumeClaim.ClaimName)
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			mounts[m.MountPath] = local
			continue
		}
		local := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(m.MountPath, "/")))
		if err := os.MkdirAll(local, 0o755); err != nil {
			return nil, err
		}
		mounts[m.MountPath] = local
		switch {
		case v.ConfigMap != nil:
			p.volumes = append(p.volumes, volume{dir: local, kind: "ConfigMap", name: v.ConfigMap.Name, items: v.ConfigMap.Items,
				optional: v.ConfigMap.Optional != nil && *v.ConfigMap.Optional})
		case v.Secret != nil:
			p.volumes = append(p.volumes, volume{dir: local, kind: "Secret", name: v.Secret.SecretName, items: v.Secret.Items,
				optional: v.Secret.Optional != nil && *v.Secret.Optional})
		case v.EmptyDir != nil:
			// the directory is all it needs
		default:
			return nil, fmt.Errorf("volume %s: only ConfigMap, Secret, emptyDir and hostPath-backed claim volumes can be materialised here", v.Name)
		}
	}
	return mounts, nil
}

// rewritePath maps a value that is a path inside a mount to the local directory.
func rewritePath(value string, mounts map[string]string) string {
	paths := make([]string, 0, len(mounts))
	for m := range mounts {
		paths = append(paths, m)
	}
	// the longest mount path that contains the value wins, as in a container
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	for _, m := range paths {
		if value == m || value == strings.TrimSuffix(m, "/") {
			return mounts[m]
		}
		if rest, ok := strings.CutPrefix(value, strings.TrimSuffix(m, "/")+"/"); ok {
			return filepath.Join(mounts[m], filepath.FromSlash(rest))
		}
	}
	return value
}

func envValue(ctx context.Context, c client.Reader, namespace, podName, serviceAccount string, e corev1.EnvVar) (string, error) {
	from := e.ValueFrom
	if from == nil {
		return e.Value, nil
	}
	switch {
	case from.FieldRef != nil:
		switch from.FieldRef.FieldPath {
		case "metadata.namespace":
			return namespace, nil
		case "metadata.name":
			return podName, nil
		case "spec.serviceAccountName":
			return serviceAccount, nil
		}
		return "", fmt.Errorf("env %s: field %s is not known here", e.Name, from.FieldRef.FieldPath)
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		data, _, err := readData(ctx, c, "ConfigMap", namespace, ref.Name, ref.Optional != nil && *ref.Optional)
		if err != nil {
			return "", fmt.Errorf("env %s: %w", e.Name, err)
		}
		return string(data[ref.Key]), nil
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		data, _, err := readData(ctx, c, "Secret", namespace, ref.Name, ref.Optional != nil && *ref.Optional)
		if err != nil {
			return "", fmt.Errorf("env %s: %w", e.Name, err)
		}
		return string(data[ref.Key]), nil
	}
	return "", fmt.Errorf("env %s: this kind of valueFrom is not supported here", e.Name)
}

// readData returns the data of a ConfigMap or Secret; found is false for a
// missing optional one.
func readData(ctx context.Context, c client.Reader, kind, namespace, name string, optional bool) (map[string][]byte, bool, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	out := map[string][]byte{}
	var err error
	switch kind {
	case "ConfigMap":
		cm := &corev1.ConfigMap{}
		if err = c.Get(ctx, key, cm); err == nil {
			for k, v := range cm.Data {
				out[k] = []byte(v)
			}
			for k, v := range cm.BinaryData {
				out[k] = v
			}
		}
	case "Secret":
		s := &corev1.Secret{}
		if err = c.Get(ctx, key, s); err == nil {
			out = s.Data
		}
	}
	if err != nil {
		if optional && client.IgnoreNotFound(err) == nil {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("reading %s %s: %w", kind, key, err)
	}
	return out, true, nil
}

// FreeLoopbackPort asks the kernel for a free port on 127.0.0.1.
func FreeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
