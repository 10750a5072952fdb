// Command funclen lists the function declarations of Go files with their
// length in lines (from "func" to the closing brace) and their cyclomatic
// complexity (gocyclo's count), longest first:
//
//	go run ./test/funclen $(git ls-files '*.go' | grep -v _test.go) | awk '$1 > 80'
//
// It measures the shape the project keeps: functions a reader holds in
// their head. Its test (TestShape) fails when a function of the module
// outside tests is longer than maxLines or more complex than maxComplexity.
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
	lines      int
	complexity int
	name       string
	pos        string
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
		fmt.Println(f.lines, f.name, f.pos, "complexity", f.complexity)
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
		out = append(out, fn{end.Line - start.Line + 1, complexity(fd), name, fmt.Sprintf("%s:%d", path, start.Line)})
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

// complexity is gocyclo's cyclomatic complexity of fd: one, plus one per
// if, for, range, non-default case and communication clause, && and ||.
func complexity(fd *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fd, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}
