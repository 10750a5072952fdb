package diff

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
)

// goEval evaluates the literal tables of the MCO's tests (Go source kept
// verbatim in testdata/mco) to plain values: strings, bools, nil, []any,
// map[string]any for maps and for struct literals (by field name), and
// what the registered functions return.
type goEval struct {
	consts map[string]any
	funcs  map[string]func(args []any) (any, error)
	vars   map[string]any
}

// maxDepth bounds the evaluator's recursion.
const maxDepth = 64

// exprName is "pkg.Name" or "Name".
func exprName(x ast.Expr) string {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprName(x.X) + "." + x.Sel.Name
	}
	return ""
}

func (e *goEval) eval(x ast.Expr, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("expression nested deeper than %d", maxDepth)
	}
	switch x := x.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return nil, fmt.Errorf("literal %s: only strings", x.Value)
		}
		return strconv.Unquote(x.Value)
	case *ast.Ident, *ast.SelectorExpr:
		return e.name(exprName(x))
	case *ast.ParenExpr:
		return e.eval(x.X, depth+1)
	case *ast.UnaryExpr:
		return e.eval(x.X, depth+1)
	case *ast.IndexExpr:
		return e.index(x, depth)
	case *ast.CallExpr:
		return e.call(x, depth)
	case *ast.CompositeLit:
		return e.composite(x, depth)
	}
	return nil, fmt.Errorf("unsupported expression %T", x)
}

func (e *goEval) name(n string) (any, error) {
	switch n {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "nil":
		return nil, nil
	}
	if v, ok := e.vars[n]; ok {
		return v, nil
	}
	if v, ok := e.consts[n]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("unknown name %s", n)
}

func (e *goEval) index(x *ast.IndexExpr, depth int) (any, error) {
	m, err := e.eval(x.X, depth+1)
	if err != nil {
		return nil, err
	}
	k, err := e.eval(x.Index, depth+1)
	if err != nil {
		return nil, err
	}
	mm, ok1 := m.(map[string]any)
	ks, ok2 := k.(string)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("index of %T by %T", m, k)
	}
	v, ok := mm[ks]
	if !ok {
		return nil, fmt.Errorf("no key %q", ks)
	}
	return v, nil
}

func (e *goEval) call(x *ast.CallExpr, depth int) (any, error) {
	if _, conv := x.Fun.(*ast.ArrayType); conv && len(x.Args) == 1 {
		return e.eval(x.Args[0], depth+1) // []byte("..."): the string
	}
	n := exprName(x.Fun)
	f, ok := e.funcs[n]
	if !ok {
		return nil, fmt.Errorf("unknown function %s", n)
	}
	args := make([]any, len(x.Args))
	for i, a := range x.Args {
		v, err := e.eval(a, depth+1)
		if err != nil {
			return nil, fmt.Errorf("%s argument %d: %w", n, i, err)
		}
		args[i] = v
	}
	return f(args)
}

// composite evaluates a slice, map or struct literal: keyed by
// identifiers it is a struct, by other expressions a map.
func (e *goEval) composite(x *ast.CompositeLit, depth int) (any, error) {
	if len(x.Elts) == 0 {
		if _, isMap := x.Type.(*ast.MapType); isMap {
			return map[string]any{}, nil
		}
		if _, isStruct := x.Type.(*ast.Ident); isStruct {
			return map[string]any{}, nil
		}
		// []T{}, or an elided {} (the tables' only one is a slice).
		return []any{}, nil
	}
	if _, keyed := x.Elts[0].(*ast.KeyValueExpr); !keyed {
		out := make([]any, 0, len(x.Elts))
		for _, el := range x.Elts {
			v, err := e.eval(el, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	out := map[string]any{}
	for _, el := range x.Elts {
		kv := el.(*ast.KeyValueExpr)
		var key string
		if id, ok := kv.Key.(*ast.Ident); ok {
			key = id.Name
		} else {
			k, err := e.eval(kv.Key, depth+1)
			if err != nil {
				return nil, err
			}
			key = fmt.Sprint(k)
		}
		v, err := e.eval(kv.Value, depth+1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		out[key] = v
	}
	return out, nil
}

// declared finds the expression assigned to name (name := X, name = X,
// or var name = X) in a Go source excerpt (a function or a var spec).
func declared(path, name string) (ast.Expr, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	text := "package p\n" + string(src)
	if !strings.HasPrefix(strings.TrimSpace(string(src)), "func ") {
		text = "package p\nvar (\n" + string(src) + "\n)\n"
	}
	f, err := parser.ParseFile(token.NewFileSet(), path, text, 0)
	if err != nil {
		return nil, err
	}
	var found ast.Expr
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name == name && found == nil && i < len(n.Rhs) {
					found = n.Rhs[i]
				}
			}
		case *ast.ValueSpec:
			for i, id := range n.Names {
				if id.Name == name && found == nil && i < len(n.Values) {
					found = n.Values[i]
				}
			}
		}
		return found == nil
	})
	if found == nil {
		return nil, fmt.Errorf("%s: no %s", path, name)
	}
	return found, nil
}
