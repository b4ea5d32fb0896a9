package openai

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The package is below the edge, the engines and the central plane: it
// imports nothing of Tollgate's, so any of them can use it.
func TestImportsNothingOfTollgate(t *testing.T) {
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".go") {
			continue
		}
		ast, err := parser.ParseFile(fset, f.Name(), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/tollgate-dev/tollgate") {
				t.Errorf("%s imports %s", f.Name(), path)
			}
		}
	}
}
