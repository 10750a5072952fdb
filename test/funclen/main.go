// Command funclen lists the function declarations of Go files with their
// length in lines (from "func" to the closing brace), longest first:
//
//	go run ./test/funclen $(git ls-files '*.go' | grep -v _test.go) | awk '$1 > 80'
//
// With gocyclo's complexity it measures the shape the project keeps:
// functions a reader holds in their head.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
)

// fn is one function: its length, name and position.
type fn struct {
	lines int
	name  string
	pos   string
}

func main() {
	fset := token.NewFileSet()
	var all []fn
	for _, path := range os.Args[1:] {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		all = append(all, funcs(fset, path, f)...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].lines > all[j].lines })
	for _, f := range all {
		fmt.Println(f.lines, f.name, f.pos)
	}
}

// funcs are the function declarations of f.
func funcs(fset *token.FileSet, path string, f *ast.File) []fn {
	var out []fn
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) > 0 {
			name = "(" + recv(fd.Recv.List[0].Type) + ")." + name
		}
		out = append(out, fn{end.Line - start.Line + 1, name, fmt.Sprintf("%s:%d", path, start.Line)})
	}
	return out
}

// recv names a receiver type (*T, T, T[P]).
func recv(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "*" + recv(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return recv(t.X)
	case *ast.IndexListExpr:
		return recv(t.X)
	}
	return "?"
}
