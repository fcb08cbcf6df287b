package docgen

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sourceStrings returns every string literal of the module's Go files that are built into
// the binary (tests, the interop and benchmark modules and the test helpers left out) that
// matches re, with the files it is in.
func sourceStrings(t *testing.T, root string, re *regexp.Regexp) map[string][]string {
	t.Helper()
	found := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if slices.Contains([]string{"interop", "bench", ".cache", ".git", "internal/backendtest", "store/storetest", "securitysuite"}, rel) ||
				strings.HasSuffix(rel, "/pgtest") || strings.HasSuffix(rel, "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && re.MatchString(s) {
					found[s] = append(found[s], rel)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestEnvironmentPage: docs/reference/environment.md lists every QUIVER_* and OTEL_* variable
// the code names, and no QUIVER_* variable the code does not name.
func TestEnvironmentPage(t *testing.T) {
	root := filepath.Join("..", "..")
	page, err := os.ReadFile(filepath.Join(root, "docs", "reference", "environment.md"))
	if err != nil {
		t.Fatal(err)
	}
	code := sourceStrings(t, root, regexp.MustCompile(`^(QUIVER|OTEL)_[A-Z0-9_]+$`))
	for name, files := range code {
		if strings.HasPrefix(name, "QUIVER_TEST_") {
			continue
		}
		if !strings.Contains(string(page), "`"+name+"`") {
			t.Errorf("the code reads %s (%s), which docs/reference/environment.md does not list", name, strings.Join(slices.Compact(files), ", "))
		}
	}
	listed := regexp.MustCompile("(?m)^\\| `(QUIVER_[A-Z0-9_]+)`").FindAllStringSubmatch(string(page), -1)
	if len(listed) < 5 {
		t.Fatalf("docs/reference/environment.md lists %d QUIVER_ variables in its table", len(listed))
	}
	for _, m := range listed {
		if _, ok := code[m[1]]; !ok {
			t.Errorf("docs/reference/environment.md lists %s, which the code does not read", m[1])
		}
	}
}

// TestMetricsPage: docs/reference/metrics.md lists every instrument the code makes (the
// metric names of internal/genai), with its Prometheus name, and no other.
func TestMetricsPage(t *testing.T) {
	root := filepath.Join("..", "..")
	page, err := os.ReadFile(filepath.Join(root, "docs", "reference", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "internal", "genai", "genai.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	made := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && strings.HasPrefix(vs.Names[0].Name, "Metric") && len(vs.Values) == 1 {
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok {
				name, _ := strconv.Unquote(lit.Value)
				made[name] = true
			}
		}
		return true
	})
	if len(made) < 5 {
		t.Fatalf("found %d metric names in internal/genai", len(made))
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z_.]+)` \\| `([a-z_]+)` \\| (\\w+) \\|").FindAllStringSubmatch(string(page), -1)
	listed := map[string]bool{}
	for _, m := range rows {
		listed[m[1]] = true
		if !made[m[1]] {
			t.Errorf("docs/reference/metrics.md lists %s, which the code does not make (internal/genai's Metric names)", m[1])
		}
		prom := strings.ReplaceAll(m[1], ".", "_")
		switch {
		case strings.HasSuffix(m[1], ".duration"):
			prom += "_seconds"
		case m[3] == "counter":
			prom += "_total"
		}
		if m[2] != prom {
			t.Errorf("docs/reference/metrics.md says %s is served as %s; the exporter makes %s", m[1], m[2], prom)
		}
	}
	for name := range made {
		if !listed[name] {
			t.Errorf("the code makes the metric %s, which docs/reference/metrics.md does not list", name)
		}
	}
}
