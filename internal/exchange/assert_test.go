package exchange_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoCapabilityFoundAtRunTime: no code outside the tests asks at run time whether an
// implementation of the contract has a capability (a type assertion or a type switch to one of
// package exchange's interfaces). Every capability is part of Exchange (or Shard), which each
// implementation asserts at compile time, so a missing one fails the build, not a request.
func TestNoCapabilityFoundAtRunTime(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var types []ast.Expr
			switch n := n.(type) {
			case *ast.TypeAssertExpr:
				types = append(types, n.Type)
			case *ast.CaseClause:
				types = append(types, n.List...)
			}
			for _, typ := range types {
				if sel, ok := typ.(*ast.SelectorExpr); ok {
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "exchange" {
						found = append(found, fset.Position(typ.Pos()).String()+": exchange."+sel.Sel.Name)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("found by type assertion, where the contract's interfaces should hold it:\n%s", strings.Join(found, "\n"))
	}
}
