// Command storagemanifest prints the default StorageClass manifest that kind's node images carry
// (/kind/manifests/default-storage.yaml: local-path-provisioner, installed by `kind create cluster`)
// as the pinned kind release defines it, with its two images replaced by the local ones that
// hack/kind/kind.sh builds. kind keeps the manifest as a Go constant of its node-image builder
// (pkg/build/nodeimage, defaultStorageManifest, which names its images through the constants
// storageProvisionerImage and storageHelperImage); this reads it from the module's source, so that
// a new kind release brings its own manifest.
//
//	storagemanifest KIND_MODULE_DIR PROVISIONER_IMAGE HELPER_IMAGE
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: storagemanifest KIND_MODULE_DIR PROVISIONER_IMAGE HELPER_IMAGE")
		os.Exit(2)
	}
	out, err := manifest(os.Args[1], map[string]string{
		"storageProvisionerImage": os.Args[2],
		"storageHelperImage":      os.Args[3],
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "storagemanifest:", err)
		os.Exit(1)
	}
	fmt.Print(out)
}

// manifest evaluates the constant defaultStorageManifest of kind's nodeimage package: string
// literals joined by +, the named constants among them taken from images.
func manifest(kindDir string, images map[string]string) (string, error) {
	path := filepath.Join(kindDir, "pkg", "build", "nodeimage", "const_storage.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return "", err
	}
	used := map[string]bool{}
	var eval func(ast.Expr) (string, error)
	eval = func(e ast.Expr) (string, error) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return "", fmt.Errorf("%s: a %s literal in the manifest", path, e.Kind)
			}
			return strconv.Unquote(e.Value)
		case *ast.Ident:
			v, ok := images[e.Name]
			if !ok {
				return "", fmt.Errorf("%s: the manifest names %s, which has no local replacement", path, e.Name)
			}
			used[e.Name] = true
			return v, nil
		case *ast.BinaryExpr:
			if e.Op != token.ADD {
				return "", fmt.Errorf("%s: operator %s in the manifest", path, e.Op)
			}
			x, err := eval(e.X)
			if err != nil {
				return "", err
			}
			y, err := eval(e.Y)
			return x + y, err
		case *ast.ParenExpr:
			return eval(e.X)
		}
		return "", fmt.Errorf("%s: unexpected %T in the manifest", path, e)
	}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if name.Name != "defaultStorageManifest" || i >= len(vs.Values) {
					continue
				}
				out, err := eval(vs.Values[i])
				if err != nil {
					return "", err
				}
				for name := range images {
					if !used[name] {
						return "", fmt.Errorf("%s: the manifest no longer names %s: check what it runs", path, name)
					}
				}
				return out, nil
			}
		}
	}
	return "", fmt.Errorf("%s: no constant defaultStorageManifest", path)
}
