// Package eject answers `kyma function eject`: the kyma CLI forwards a
// port to a Function controller Pod and asks it, over HTTP, for the files
// that run an inline Function as an application of its own
// (docs/contributor/kyma-cli-extension.md): the handler, its dependencies,
// and a Deployment and a Service like buildless mode's, under the
// application's name and labels, so that the controller never takes them
// for the Function's.
package eject

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
)

const (
	// Port and Path are where the CLI extension's eject command calls
	// (charts/serverless/files/cli/kyma-commands.yaml), as release 1.13.
	Port = 12137
	Path = "/internal/function/eject/"
	// Address is loopback only: the CLI comes through a port forward
	// (which needs the pods/portforward permission in the module's
	// namespace); other Pods cannot read Functions' sources here.
	Address = "127.0.0.1:12137"
)

// File is one file of the answer; Data is base64, Name relative to the
// directory the CLI writes into.
type File struct {
	Name string `json:"name"`
	Data string `json:"data"`
}

// Answer is what the CLI reads: it writes Files and prints OutputMessage.
type Answer struct {
	OutputMessage string `json:"outputMessage"`
	Files         []File `json:"files"`
}

type errorAnswer struct {
	Error string `json:"error"`
}

// Server answers eject requests. Reader reads Functions (uncached: any
// namespace, as the user asks); Config gives the runtime images.
type Server struct {
	Reader client.Reader
	Config *config.Config
	Log    logr.Logger
	// Addr defaults to Address.
	Addr string
}

// NeedLeaderElection is false: the CLI calls any controller Pod.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends. An address in use is logged, not fatal.
func (s *Server) Start(ctx context.Context) error {
	addr := s.Addr
	if addr == "" {
		addr = Address
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		// Only `kyma function eject` needs the endpoint: the controller
		// keeps running Functions without it.
		s.Log.Error(err, "not serving kyma function eject", "address", addr)
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle(Path, s)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("eject endpoint: %w", err)
	}
	return nil
}

// ServeHTTP answers GET ?name=&namespace=&targetAppName=.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeJSON(w, http.StatusMethodNotAllowed, errorAnswer{Error: "only GET is served"})
		return
	}
	q := r.URL.Query()
	ns, name, app := q.Get("namespace"), q.Get("name"), q.Get("targetAppName")
	if err := validateParams(ns, name, app); err != nil {
		writeJSON(w, http.StatusBadRequest, errorAnswer{Error: err.Error()})
		return
	}
	fn := &v1alpha2.Function{}
	if err := s.Reader.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, fn); err != nil {
		status := http.StatusInternalServerError
		if apierrors.IsNotFound(err) {
			status = http.StatusNotFound
		}
		writeJSON(w, status, errorAnswer{Error: fmt.Sprintf("reading Function %s/%s: %v", ns, name, err)})
		return
	}
	files, err := Files(fn, s.Config, app)
	if err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, errorAnswer{Error: err.Error()})
		return
	}
	s.Log.Info("ejected", "function", ns+"/"+name, "files", len(files))
	writeJSON(w, http.StatusOK, Answer{OutputMessage: outputMessage(fn, appName(fn, app)), Files: files})
}

func validateParams(ns, name, app string) error {
	if ns == "" || name == "" {
		return errors.New("name and namespace are required")
	}
	for param, v := range map[string]string{"namespace": ns, "name": name, "targetAppName": app} {
		if v == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
			return fmt.Errorf("%s %q: %s", param, v, strings.Join(errs, "; "))
		}
	}
	return nil
}

func appName(fn *v1alpha2.Function, app string) string {
	if app != "" {
		return app
	}
	return fn.Name + "-ejected"
}

// Files are the ejected files of an inline Function.
func Files(fn *v1alpha2.Function, cfg *config.Config, targetApp string) ([]File, error) {
	inline := fn.Spec.Source.Inline
	if inline == nil {
		return nil, fmt.Errorf("Function %s/%s takes its source from Git: only inline Functions can be ejected (the code is in the repository already)", fn.Namespace, fn.Name)
	}
	if resources.BuildlessRuntimeImage(fn, cfg) == "" {
		return nil, fmt.Errorf("no image is configured for runtime %q", fn.Spec.Runtime)
	}
	app := appName(fn, targetApp)
	labels := map[string]string{"app.kubernetes.io/name": app, "app.kubernetes.io/instance": app}

	deploy := resources.BuildlessDeployment(resources.BuildlessInputs{Function: fn, Config: cfg})
	deploy.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	deploy.ObjectMeta = metav1.ObjectMeta{Name: app, Namespace: fn.Namespace, Labels: labels}
	deploy.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
	podLabels := map[string]string{}
	for k, v := range fn.Spec.Labels {
		podLabels[k] = v
	}
	for k, v := range labels {
		podLabels[k] = v
	}
	deploy.Spec.Template.Labels = podLabels

	svc := resources.BuildlessService(fn)
	svc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	svc.ObjectMeta = metav1.ObjectMeta{Name: app, Namespace: fn.Namespace, Labels: labels}
	svc.Spec.Selector = labels

	deployYAML, err := manifest(deploy)
	if err != nil {
		return nil, err
	}
	svcYAML, err := manifest(svc)
	if err != nil {
		return nil, err
	}
	handler, deps := "handler.js", "package.json"
	if strings.HasPrefix(string(fn.Spec.Runtime), "python") {
		handler, deps = "handler.py", "requirements.txt"
	}
	files := []File{file(handler, inline.Source)}
	if inline.Dependencies != "" {
		files = append(files, file(deps, inline.Dependencies))
	}
	return append(files,
		file("k8s/deployment.yaml", deployYAML),
		file("k8s/service.yaml", svcYAML),
		file("README.md", readme(fn, app, handler, deps, inline.Dependencies != "")),
	), nil
}

// manifest is an object as YAML without server-side fields.
func manifest(obj client.Object) (string, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", obj.GetName(), err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", fmt.Errorf("writing %s: %w", obj.GetName(), err)
	}
	delete(m, "status")
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	if tmpl, ok := m["spec"].(map[string]any)["template"].(map[string]any); ok {
		if meta, ok := tmpl["metadata"].(map[string]any); ok {
			delete(meta, "creationTimestamp")
		}
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", obj.GetName(), err)
	}
	return string(out), nil
}

func file(name, content string) File {
	return File{Name: name, Data: base64.StdEncoding.EncodeToString([]byte(content))}
}

func outputMessage(fn *v1alpha2.Function, app string) string {
	return fmt.Sprintf("The files run Function %s/%s as the application %s: its handler and dependencies, "+
		"and in k8s/ a Deployment and a Service (kubectl apply -f k8s/). README.md says what is where.", fn.Namespace, fn.Name, app)
}

func readme(fn *v1alpha2.Function, app, handler, deps string, hasDeps bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\nFunction `%s` of namespace `%s` (runtime %s), ejected as the application `%s`.\n\n", app, fn.Name, fn.Namespace, fn.Spec.Runtime, app)
	fmt.Fprintf(&b, "- `%s`: the handler.\n", handler)
	if hasDeps {
		fmt.Fprintf(&b, "- `%s`: its dependencies.\n", deps)
	}
	b.WriteString("- `k8s/deployment.yaml`, `k8s/service.yaml`: the application, run without a build as buildless Functions run: " +
		"the runtime image starts the handler and installs the dependencies at start. " +
		"The handler and dependencies are in the Deployment's environment (FUNC_HANDLER_SOURCE, FUNC_HANDLER_DEPENDENCIES): edit them there, or build an image of your own.\n\n")
	fmt.Fprintf(&b, "Run it beside the Function:\n\n```bash\nkubectl apply -f k8s/\n```\n\n"+
		"It answers on port 80 of the Service `%s`. Delete the Function once the application answers:\n\n"+
		"```bash\nkyma function delete %s -n %s\n```\n", app, fn.Name, fn.Namespace)
	return b.String()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		status, raw = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(raw)
}
