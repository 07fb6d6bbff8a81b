// Package render turns the Serverless chart and a set of values into the
// Kubernetes objects to apply, using the Helm v3 SDK's engine.
package render

import (
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
)

// ReleaseName is the Helm release name the chart is rendered with; object
// names in the chart derive from it.
const ReleaseName = "serverless"

// Renderer renders one loaded chart. It is safe for concurrent use: the chart
// is only read.
type Renderer struct {
	chart *chart.Chart
	caps  *chartutil.Capabilities
}

// LoadChart reads a chart from a file system whose root is the chart's
// directory (the one holding Chart.yaml).
func LoadChart(fsys fs.FS) (*chart.Chart, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: path, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading chart files: %w", err)
	}
	chrt, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("loading chart: %w", err)
	}
	return chrt, nil
}

// New returns a Renderer for chrt. caps describes the target cluster (its
// Kubernetes version and API versions); nil means Helm's defaults.
func New(chrt *chart.Chart, caps *chartutil.Capabilities) *Renderer {
	if caps == nil {
		caps = chartutil.DefaultCapabilities.Copy()
	}
	return &Renderer{chart: chrt, caps: caps}
}

// ChartVersion is the version in the chart's Chart.yaml.
func (r *Renderer) ChartVersion() string { return r.chart.Metadata.Version }

// Render renders the chart into namespace with values, validating values
// against the chart's values.schema.json first. It returns the chart's CRDs
// (crds/) followed by its templates' objects, each template file's objects in
// file order and the files sorted by path, so the result is deterministic.
func (r *Renderer) Render(namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	opts := chartutil.ReleaseOptions{Name: ReleaseName, Namespace: namespace, Revision: 1, IsInstall: true}
	renderValues, err := chartutil.ToRenderValues(r.chart, values, opts, r.caps)
	if err != nil {
		return nil, fmt.Errorf("preparing values: %w", err)
	}
	files, err := engine.Engine{Strict: false}.Render(r.chart, renderValues)
	if err != nil {
		return nil, fmt.Errorf("rendering chart: %w", err)
	}

	var objs []*unstructured.Unstructured
	for _, crd := range r.chart.CRDObjects() {
		parsed, err := decode(crd.Filename, crd.File.Data)
		if err != nil {
			return nil, err
		}
		objs = append(objs, parsed...)
	}

	names := make([]string, 0, len(files))
	for name := range files {
		// Partials and notes render to text, not objects.
		if strings.HasSuffix(name, "NOTES.txt") || strings.HasPrefix(pathBase(name), "_") {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		parsed, err := decode(name, []byte(files[name]))
		if err != nil {
			return nil, err
		}
		objs = append(objs, parsed...)
	}
	return objs, nil
}

// decode splits a multi-document YAML file into objects, skipping empty
// documents; every object needs apiVersion, kind and a name.
func decode(name string, data []byte) ([]*unstructured.Unstructured, error) {
	objs, err := manifest.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for i, u := range objs {
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("%s: object %d: apiVersion, kind and metadata.name are required", name, i)
		}
	}
	return objs, nil
}

func pathBase(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[i+1:]
	}
	return p
}
