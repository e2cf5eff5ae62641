package config

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/afero"
	"golang.org/x/mod/modfile"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kbconfig "sigs.k8s.io/kubebuilder/v4/pkg/config"
	yamlstore "sigs.k8s.io/kubebuilder/v4/pkg/config/store/yaml"
	cfgv3 "sigs.k8s.io/kubebuilder/v4/pkg/config/v3"
	"sigs.k8s.io/kubebuilder/v4/pkg/machinery"
	"sigs.k8s.io/kubebuilder/v4/pkg/model/resource"
	"sigs.k8s.io/yaml"
)

// The repository's root, seen from this package's directory (where go test runs it).
const repoRoot = ".."

// TestProjectFile checks that PROJECT declares what the repository holds: the module of go.mod as
// its repo, and exactly the custom resources of config/crd/bases, each with the group, version,
// kind, plural and scope of its CRD and the Go package that defines it.
func TestProjectFile(t *testing.T) {
	for _, problem := range projectProblems(t, filepath.Join(repoRoot, "PROJECT")) {
		t.Error(problem)
	}
}

// TestProjectFileWrong checks that TestProjectFile's checks catch each way PROJECT can drift from the
// repository, so that a test which passes means something.
func TestProjectFileWrong(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(repoRoot, "PROJECT"))
	if err != nil {
		t.Fatal(err)
	}
	const market = "  kind: Market\n"
	const resources = "resources:\n- api:\n    crdVersion: v1\n    namespaced: true\n  controller: true\n" +
		"  domain: pmx.dev\n  kind: Market\n  path: github.com/pmx-dev/pmx/api/v1alpha1\n  version: v1alpha1\n" +
		"- api:\n    crdVersion: v1\n    namespaced: true\n  controller: true\n" +
		"  domain: pmx.dev\n  kind: Event\n  path: github.com/pmx-dev/pmx/api/v1alpha1\n  version: v1alpha1\n" +
		"- api:\n    crdVersion: v1\n    namespaced: true\n  controller: true\n" +
		"  domain: pmx.dev\n  kind: MarketSeries\n  path: github.com/pmx-dev/pmx/api/v1alpha1\n  version: v1alpha1\n" +
		"- api:\n    crdVersion: v1\n    namespaced: true\n  controller: true\n" +
		"  domain: pmx.dev\n  kind: ShardPool\n  path: github.com/pmx-dev/pmx/api/v1alpha1\n  version: v1alpha1\n"
	for _, tc := range []struct{ name, old, new, want string }{
		{"module", "repo: github.com/pmx-dev/pmx\n", "repo: github.com/pmx-dev/pmx2\n", "go.mod's module"},
		{"no repo", "repo: github.com/pmx-dev/pmx\n", "", "go.mod's module"},
		{"domain", "  domain: pmx.dev\n", "  domain: pmx.io\n", "no CRD"},
		{"group", market, market + "  group: pmx\n", "no CRD"},
		{"version", "  version: v1alpha1\n", "  version: v1\n", "no CRD"},
		{"kind", market, "  kind: Markets\n", "no CRD"},
		{"plural", market, market + "  plural: marketz\n", "plural"},
		{"cluster scope", "    namespaced: true\n", "", "namespaced"},
		{"no api", "- api:\n    crdVersion: v1\n    namespaced: true\n  controller", "- controller", "crdVersion"},
		{"path", "path: github.com/pmx-dev/pmx/api/v1alpha1", "path: github.com/pmx-dev/pmx/api/v1", "path"},
		{"path outside", "path: github.com/pmx-dev/pmx/api/v1alpha1", "path: example.com/api/v1alpha1", "path"},
		{"unknown field", "    namespaced: true\n", "    namespace: true\n", "unknown field"},
		{"no resources", resources, "", "no resource"},
		{"two of one", "resources:\n", "resources:\n- domain: pmx.dev\n  kind: Market\n  version: v1alpha1\n", "twice"},
		{"config version", "version: \"3\"", "version: \"2\"", "version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(good), tc.old) {
				t.Fatalf("PROJECT has no %q to replace", tc.old)
			}
			path := filepath.Join(t.TempDir(), "PROJECT")
			wrong := strings.Replace(string(good), tc.old, tc.new, 1)
			if err := os.WriteFile(path, []byte(wrong), 0o644); err != nil {
				t.Fatal(err)
			}
			problems := projectProblems(t, path)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("PROJECT with %q for %q: problems %q, want one about %q", tc.new, tc.old, problems, tc.want)
			}
		})
	}
}

// projectProblems loads the project file at path as kubebuilder does and says everything in it that
// go.mod, the Go packages it names and config/crd/bases contradict.
func projectProblems(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	store := yamlstore.New(machinery.Filesystem{FS: afero.NewReadOnlyFs(afero.NewOsFs())})
	if err := store.LoadFrom(path); err != nil {
		return []string{fmt.Sprintf("kubebuilder cannot load PROJECT: %v", err)}
	}
	cfg := store.Config()
	var problems []string
	if cfg.GetVersion().Compare(cfgv3.Version) != 0 {
		problems = append(problems, fmt.Sprintf("PROJECT's version is %s, not %s", cfg.GetVersion(), cfgv3.Version))
	}
	// kubebuilder drops a key it does not know, so a misspelt one would silently declare nothing.
	if err := yaml.UnmarshalStrict(data, &cfgv3.Cfg{}); err != nil {
		problems = append(problems, fmt.Sprintf("PROJECT: %v", err))
	}
	goMod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module := modfile.ModulePath(goMod)
	if cfg.GetRepository() != module {
		problems = append(problems, fmt.Sprintf("PROJECT's repo is %q, go.mod's module %q", cfg.GetRepository(), module))
	}

	resources, err := cfg.GetResources()
	if err != nil {
		t.Fatal(err)
	}
	if len(resources) == 0 {
		problems = append(problems, "PROJECT declares no resource")
	}
	crds := loadCRDs(t)
	declared := map[string]bool{}
	for _, res := range resources {
		problems = append(problems, resourceProblems(res, cfg, crds)...)
		key := gvkKey(res.QualifiedGroup(), res.Version, res.Kind)
		if declared[key] {
			problems = append(problems, fmt.Sprintf("PROJECT declares %s twice", key))
		}
		declared[key] = true
	}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if key := gvkKey(crd.Spec.Group, v.Name, crd.Spec.Names.Kind); !declared[key] {
				problems = append(problems, fmt.Sprintf("CRD %s serves %s, which PROJECT does not declare", crd.Name, key))
			}
		}
	}
	return problems
}

// resourceProblems says what contradicts PROJECT's resource res: its CRD, or the Go package of its path.
func resourceProblems(res resource.Resource, cfg kbconfig.Config, crds []apiextensionsv1.CustomResourceDefinition) []string {
	name := gvkKey(res.QualifiedGroup(), res.Version, res.Kind)
	if err := res.Validate(); err != nil {
		return []string{fmt.Sprintf("%s: %v", name, err)}
	}
	if res.External || res.Core {
		return nil // defined elsewhere: no CRD or package of this repository to compare with
	}
	var problems []string
	if res.Domain != cfg.GetDomain() {
		problems = append(problems, fmt.Sprintf("%s: domain %q, the project's is %q", name, res.Domain, cfg.GetDomain()))
	}
	// Every CRD of config/crd/bases is apiextensions.k8s.io/v1.
	if res.API == nil || res.API.CRDVersion != "v1" {
		problems = append(problems, fmt.Sprintf("%s: no api with crdVersion v1", name))
	}
	if p := packageProblem(res, cfg.GetRepository()); p != "" {
		problems = append(problems, fmt.Sprintf("%s: path %s: %s", name, res.Path, p))
	}

	i := slices.IndexFunc(crds, func(crd apiextensionsv1.CustomResourceDefinition) bool {
		return crd.Spec.Group == res.QualifiedGroup() && crd.Spec.Names.Kind == res.Kind &&
			slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
				return v.Name == res.Version
			})
	})
	if i < 0 {
		return append(problems, fmt.Sprintf("%s: no CRD in config/crd/bases serves it", name))
	}
	crd := crds[i]
	if res.Plural != crd.Spec.Names.Plural {
		problems = append(problems, fmt.Sprintf("%s: plural %q, the CRD's %q", name, res.Plural, crd.Spec.Names.Plural))
	}
	namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
	if res.API != nil && res.API.Namespaced != namespaced {
		problems = append(problems, fmt.Sprintf("%s: namespaced %t, the CRD's scope %s", name, res.API.Namespaced, crd.Spec.Scope))
	}
	return problems
}

// packageProblem says what is wrong with res's Go package, or "": it must be in this module, be
// named after the version and define the kind under the group's +groupName marker, as controller-gen
// reads them to write the CRD.
func packageProblem(res resource.Resource, module string) string {
	rel, ok := strings.CutPrefix(res.Path, module+"/")
	if !ok {
		return "not a package of module " + module
	}
	dir := filepath.Join(repoRoot, filepath.FromSlash(rel))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	var groupMarked, kindDefined bool
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			return err.Error()
		}
		if file.Name.Name != res.Version {
			return fmt.Sprintf("%s is in package %s, not %s", e.Name(), file.Name.Name, res.Version)
		}
		if file.Doc != nil && slices.Contains(strings.Fields(file.Doc.Text()), "+groupName="+res.QualifiedGroup()) {
			groupMarked = true
		}
		for _, decl := range file.Decls {
			if gen, ok := decl.(*ast.GenDecl); ok && gen.Tok == token.TYPE {
				for _, spec := range gen.Specs {
					kindDefined = kindDefined || spec.(*ast.TypeSpec).Name.Name == res.Kind
				}
			}
		}
	}
	switch {
	case !groupMarked:
		return "no +groupName=" + res.QualifiedGroup() + " in its package comment"
	case !kindDefined:
		return "no type " + res.Kind
	}
	return ""
}

// loadCRDs reads every CustomResourceDefinition of config/crd/bases.
func loadCRDs(t *testing.T) []apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("crd", "bases", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if crd.Kind != "CustomResourceDefinition" || crd.Spec.Group == "" || crd.Spec.Names.Kind == "" {
			t.Fatalf("%s: not a CustomResourceDefinition with a group and a kind", path)
		}
		crds = append(crds, crd)
	}
	return crds
}

func gvkKey(group, version, kind string) string {
	return fmt.Sprintf("%s/%s, Kind=%s", group, version, kind)
}
