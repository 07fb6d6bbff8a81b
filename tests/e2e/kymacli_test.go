//go:build e2e

package e2e

// The `kyma function` commands as the Kyma CLI runs them, without the CLI
// binary: the extension is read from the cluster the way the CLI reads it
// (the ConfigMap labelled kyma-cli/extension=commands), a command line is
// resolved against it and its configuration filled with
// tests/support/cliext (the CLI's format v1 and templating, see
// docs/contributor/kyma-cli-extension.md), and each action does what the
// CLI's does: create, get and delete the resource, write init's files, and
// for eject forward a port to the controller Pod the extension names (this
// repository's kubectl port-forward) and write the files it answers.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/tests/support/cliext"
)

// kymaCLI runs command lines in dir (relative paths of flags are dir's)
// with the shell variables vars.
type kymaCLI struct {
	f    *fnEnv
	ext  *cliext.Extension
	dir  string
	vars map[string]string
}

// cliResult is what a command did: the objects it created, read or
// deleted, and the files it wrote (relative to dir).
type cliResult struct {
	objects []*unstructured.Unstructured
	files   []string
	message string
}

// newKymaCLI reads the `kyma function` extension from the cluster.
func newKymaCLI(t *testing.T, f *fnEnv, dir string, vars map[string]string) *kymaCLI {
	t.Helper()
	var cms corev1.ConfigMapList
	require.NoError(t, f.c.List(t.Context(), &cms, client.MatchingLabels{cliext.LabelExtension: cliext.LabelExtensionValue}))
	for _, cm := range cms.Items {
		ext, err := cliext.Parse([]byte(cm.Data[cliext.DataKey]))
		require.NoError(t, err, "ConfigMap %s/%s", cm.Namespace, cm.Name)
		if ext.Word() == "function" {
			require.Equal(t, cliext.Version, cm.Labels[cliext.LabelExtensionVersion], "ConfigMap %s/%s", cm.Namespace, cm.Name)
			return &kymaCLI{f: f, ext: ext, dir: dir, vars: vars}
		}
	}
	require.Failf(t, "no extension", "no ConfigMap labelled %s=%s gives `kyma function` (%d found)", cliext.LabelExtension, cliext.LabelExtensionValue, len(cms.Items))
	return nil
}

// run runs one `kyma function …` command line.
func (k *kymaCLI) run(t *testing.T, line string) cliResult {
	t.Helper()
	words, err := cliext.Words(line, k.vars)
	require.NoError(t, err, line)
	require.True(t, len(words) > 2 && words[0] == "kyma" && words[1] == k.ext.Word(), "not a `kyma %s` command: %s", k.ext.Word(), line)
	inv, err := k.ext.Resolve(words[2:])
	require.NoError(t, err, line)
	for _, f := range inv.Command.Flags {
		if vals := inv.Flags[f.Name]; f.Type == cliext.TypePath {
			for i, v := range vals {
				vals[i] = k.path(v)
			}
		}
	}
	cfg, err := inv.Command.Configure(inv.Arg, inv.Flags)
	require.NoError(t, err, line)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := k.act(ctx, inv.Command.Uses, cfg)
	require.NoError(t, err, "%s (%s)", line, inv.Command.Uses)
	return res
}

// path is a path as the CLI, started in dir, opens it.
func (k *kymaCLI) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(k.dir, p)
}

func (k *kymaCLI) act(ctx context.Context, uses string, cfg map[string]any) (cliResult, error) {
	switch uses {
	case "resource_create":
		obj, err := resourceOf(cfg)
		if err != nil {
			return cliResult{}, err
		}
		var opts []client.CreateOption
		if cfg["dryRun"] == true {
			opts = append(opts, client.DryRunAll)
		}
		if err := k.f.c.Create(ctx, obj, opts...); err != nil {
			return cliResult{}, fmt.Errorf("creating %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
		return cliResult{objects: []*unstructured.Unstructured{obj}}, nil
	case "resource_get":
		obj, err := resourceOf(cfg)
		if err != nil {
			return cliResult{}, err
		}
		if obj.GetName() != "" {
			if err := k.f.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return cliResult{}, fmt.Errorf("getting %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
			}
			return cliResult{objects: []*unstructured.Unstructured{obj}}, nil
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(obj.GroupVersionKind().GroupVersion().WithKind(obj.GetKind() + "List"))
		var opts []client.ListOption
		if cfg["fromAllNamespaces"] != true {
			opts = append(opts, client.InNamespace(obj.GetNamespace()))
		}
		if err := k.f.c.List(ctx, list, opts...); err != nil {
			return cliResult{}, fmt.Errorf("listing %s: %w", obj.GetKind(), err)
		}
		res := cliResult{}
		for i := range list.Items {
			res.objects = append(res.objects, &list.Items[i])
		}
		return res, nil
	case "resource_delete":
		obj, err := resourceOf(cfg)
		if err != nil {
			return cliResult{}, err
		}
		var opts []client.DeleteOption
		if cfg["dryRun"] == true {
			opts = append(opts, client.DryRunAll)
		}
		if err := k.f.c.Delete(ctx, obj, opts...); err != nil {
			return cliResult{}, fmt.Errorf("deleting %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
		return cliResult{objects: []*unstructured.Unstructured{obj}}, nil
	case "resource_explain":
		out, _ := cfg["output"].(string)
		return cliResult{message: out}, nil
	case "function_init":
		return k.initFiles(cfg)
	case "call_files_to_save":
		return k.callFilesToSave(ctx, cfg)
	}
	return cliResult{}, fmt.Errorf("action %q is not one the Kyma CLI has", uses)
}

func resourceOf(cfg map[string]any) (*unstructured.Unstructured, error) {
	r, ok := cfg["resource"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the configuration has no resource: %v", cfg)
	}
	obj := &unstructured.Unstructured{Object: r}
	if obj.GroupVersionKind() == (schema.GroupVersionKind{}) || obj.GetKind() == "" {
		return nil, fmt.Errorf("the resource has no apiVersion and kind: %v", r)
	}
	return obj, nil
}

func (k *kymaCLI) initFiles(cfg map[string]any) (cliResult, error) {
	use, _ := cfg["useRuntime"].(string)
	runtimes, _ := cfg["runtimes"].(map[string]any)
	rt, ok := runtimes[use].(map[string]any)
	if !ok {
		return cliResult{}, fmt.Errorf("runtime %q has no files", use)
	}
	outDir, _ := cfg["outputDir"].(string)
	dir := k.path(outDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return cliResult{}, err
	}
	res := cliResult{}
	for _, pair := range [][2]string{{"handlerFilename", "handlerData"}, {"depsFilename", "depsData"}} {
		name, _ := rt[pair[0]].(string)
		data, _ := rt[pair[1]].(string)
		if !filepath.IsLocal(name) {
			return cliResult{}, fmt.Errorf("%s %q is not a local file name", pair[0], name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			return cliResult{}, err
		}
		res.files = append(res.files, filepath.Join(outDir, name))
	}
	res.message, _ = cfg["nextStepsInstructions"].(string)
	return res, nil
}

// forwarding is kubectl port-forward's line naming the local port.
var forwarding = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) ->`)

func (k *kymaCLI) callFilesToSave(ctx context.Context, cfg map[string]any) (cliResult, error) {
	target, _ := cfg["targetPod"].(map[string]any)
	ns, _ := target["namespace"].(string)
	port, _ := target["port"].(string)
	path, _ := target["path"].(string)
	selector := map[string]string{}
	sel, _ := target["selector"].(map[string]any)
	for key, v := range sel {
		selector[key] = fmt.Sprint(v)
	}
	if ns == "" || port == "" || path == "" || len(selector) == 0 {
		return cliResult{}, fmt.Errorf("targetPod needs namespace, selector, port and path: %v", target)
	}
	pod, err := k.f.cluster.ReadyPod(ctx, ns, selector)
	if err != nil {
		return cliResult{}, fmt.Errorf("a Ready Pod in %s with %v: %w", ns, selector, err)
	}
	// Through the API server to the Pod's own network namespace, as the
	// CLI's port forward goes.
	kubectl := filepath.Join(k.f.cluster.Root(), "bin", "assets", "kubectl")
	pf := exec.CommandContext(ctx, kubectl, "--kubeconfig", k.f.cluster.KubeconfigPath(), "port-forward", "-n", ns, "pod/"+pod.Name, ":"+port)
	stdout, err := pf.StdoutPipe()
	if err != nil {
		return cliResult{}, err
	}
	var stderr strings.Builder
	pf.Stderr = &stderr
	if err := pf.Start(); err != nil {
		return cliResult{}, fmt.Errorf("kubectl port-forward: %w", err)
	}
	defer func() { _ = pf.Process.Kill(); _ = pf.Wait() }()
	local := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := forwarding.FindStringSubmatch(sc.Text()); m != nil {
				local <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var localPort string
	select {
	case localPort = <-local:
	case <-time.After(30 * time.Second):
		return cliResult{}, fmt.Errorf("kubectl port-forward to %s/%s:%s printed no local port in 30 s; stderr: %s", ns, pod.Name, port, stderr.String())
	}

	params, _ := cfg["request"].(map[string]any)["parameters"].(map[string]any)
	q := url.Values{}
	for key, v := range params {
		if v != nil {
			q.Set(key, fmt.Sprint(v))
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+localPort+path+"?"+q.Encode(), nil)
	if err != nil {
		return cliResult{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return cliResult{}, fmt.Errorf("GET %s on %s/%s: %w", path, ns, pod.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return cliResult{}, err
	}
	if resp.StatusCode >= 400 {
		return cliResult{}, fmt.Errorf("GET %s on %s/%s: HTTP %d: %s", path, ns, pod.Name, resp.StatusCode, body)
	}
	var answer struct {
		OutputMessage string `json:"outputMessage"`
		Files         []struct {
			Name string `json:"name"`
			Data string `json:"data"`
		} `json:"files"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return cliResult{}, fmt.Errorf("the answer is not the files JSON: %w: %.300s", err, body)
	}
	outDir, _ := cfg["outputDir"].(string)
	res := cliResult{message: answer.OutputMessage}
	for _, f := range answer.Files {
		if !filepath.IsLocal(f.Name) {
			return cliResult{}, fmt.Errorf("the answer names %q, not a path inside the output directory", f.Name)
		}
		data, err := base64.StdEncoding.DecodeString(f.Data)
		if err != nil {
			return cliResult{}, fmt.Errorf("file %s: %w", f.Name, err)
		}
		p := filepath.Join(k.path(outDir), f.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return cliResult{}, err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return cliResult{}, err
		}
		res.files = append(res.files, filepath.Join(outDir, f.Name))
	}
	return res, nil
}

// dumpFiles lists what a command wrote, for failure messages.
func dumpFiles(dir string) func() string {
	return func() string {
		var b strings.Builder
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				fmt.Fprintln(&b, rel)
			}
			return nil
		})
		return "files in " + dir + ":\n" + b.String()
	}
}
