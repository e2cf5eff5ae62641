package depcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// consumers are the packages that name, as interfaces of their own, what they use of the store,
// instead of taking the aggregate *store.Store: the shard above all, whose engine-level logic is
// then tested without Postgres (internal/shard/scenario_*_test.go). Add a package here once it
// takes interfaces; the wiring (cmd/pmx) and the test harnesses still build the aggregate and
// hand it over.
var consumers = []string{
	"internal/shard",
	"internal/market",
	"internal/market/marketspec",
	"internal/eventrec",
	"internal/pages/marketpages",
	"internal/pages/settings",
	"controllers",
	"apiserver",
}

// storeAggregate reports whether a type expression names the aggregate store (store.Store, or a
// pointer to it), given the name the file imports internal/store under ("" if it does not).
func storeAggregate(expr ast.Expr, storeName string) bool {
	if star, ok := expr.(*ast.StarExpr); ok {
		expr = star.X
	}
	sel, ok := expr.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && storeName != "" && id.Name == storeName && sel.Sel.Name == "Store"
}

// TestConsumersNameInterfaces fails when a consumer's exported API (an exported struct type's
// exported fields, an exported function's or method's parameters) takes the aggregate store.
func TestConsumersNameInterfaces(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, pkg := range consumers {
		dir := filepath.Join(root, filepath.FromSlash(pkg))
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("reading %s: %v", pkg, err)
		}
		files := 0
		for _, e := range entries {
			name := e.Name()
			if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			files++
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			storeName := ""
			for _, imp := range f.Imports {
				if path, _ := strconv.Unquote(imp.Path.Value); path == module+"internal/store" {
					storeName = "store"
					if imp.Name != nil {
						storeName = imp.Name.Name
					}
				}
			}
			report := func(pos token.Pos, what string) {
				t.Errorf("%s: %s takes *store.Store; name the small interface it uses instead (see internal/shard/storage.go)", fset.Position(pos), what)
			}
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() {
						continue
					}
					for _, p := range d.Type.Params.List {
						if storeAggregate(p.Type, storeName) {
							report(p.Pos(), pkg+"."+d.Name.Name)
						}
					}
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						ts, ok := spec.(*ast.TypeSpec)
						if !ok || !ts.Name.IsExported() {
							continue
						}
						st, ok := ts.Type.(*ast.StructType)
						if !ok {
							continue
						}
						for _, field := range st.Fields.List {
							exported := len(field.Names) == 0 // an embedded field is promoted
							for _, n := range field.Names {
								exported = exported || n.IsExported()
							}
							if exported && storeAggregate(field.Type, storeName) {
								report(field.Pos(), pkg+"."+ts.Name.Name)
							}
						}
					}
				}
			}
		}
		if files == 0 {
			t.Errorf("%s has no Go files: has it moved?", pkg)
		}
	}
}
