package openapi_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/quiverhq/quiver/openapi"
)

// realDocument is a real OpenAPI document shipped by a pinned npm package (.ci/run's
// MCP_NPM_PACKAGES, installed under QUIVER_TEST_NPM): too large, some of them, to be committed.
type realDocument struct {
	name, file string
	src        openapi.Source
	tools      int // the tools it makes, every operation selected
	// skipped: the operations left out (GitHub Enterprise Server's two multipart uploads of
	// its management console: Quiver sends JSON and form bodies).
	skipped int
}

var realDocuments = []realDocument{
	{"github", "@octokit/openapi/generated/api.github.com.json", openapi.Source{MaxOperations: 2000}, 1223, 0},
	{"ghes-3-17", "@octokit/openapi/generated/ghes-3.17.json", openapi.Source{}, 964, 2},
	{"dialogporten", "@digdir/dialogporten-schema/swagger.verified.json", openapi.Source{}, 44, 0},
	{"op-resource", "@interledger/open-payments/dist/openapi/specs/resource-server.yaml", openapi.Source{}, 10, 0},
	{"op-auth", "@interledger/open-payments/dist/openapi/specs/auth-server.yaml", openapi.Source{}, 5, 0},
	{"op-wallet", "@interledger/open-payments/dist/openapi/specs/wallet-address-server.yaml", openapi.Source{}, 3, 0},
}

// readReal reads a real document from the pinned npm packages, skipping the test when they are
// not installed.
func readReal(tb testing.TB, d realDocument) openapi.Source {
	tb.Helper()
	dir := os.Getenv("QUIVER_TEST_NPM")
	if dir == "" {
		if os.Getenv("CI") != "" {
			tb.Fatal("CI is set but QUIVER_TEST_NPM is not: .ci/run installs the pinned npm packages and sets it")
		}
		tb.Skip("set QUIVER_TEST_NPM to a directory with the pinned npm packages (bash .ci/run does) to read the real OpenAPI documents")
	}
	data, err := os.ReadFile(filepath.Join(dir, "node_modules", d.file))
	if err != nil {
		tb.Fatalf("%s: %v (is .ci/run's MCP_NPM_PACKAGES installed?)", d.name, err)
	}
	src := d.src
	src.Name, src.Document, src.Servers = d.name, data, []string{"https://" + d.name + ".example"}
	return src
}

// TestRealDocuments: every operation of GitHub's REST description (its cap raised; the two
// deployment-status operations with a default: "" beside format: uri included), GitHub
// Enterprise Server 3.17's but two multipart uploads, Dialogporten's and Open Payments' three
// is a tool, and two imports
// make the same tools and the same reasons (map order decides nothing).
func TestRealDocuments(t *testing.T) {
	if raceDetector {
		// Importing GitHub's whole description takes minutes under the race detector and
		// races nothing (one goroutine parses): .ci/run runs this test without it.
		t.Skip("under -race: .ci/run runs it without the race detector: go test -run 'TestRealDocuments|TestPrismValidatesCalls' ./openapi/")
	}
	for _, d := range realDocuments {
		t.Run(d.name, func(t *testing.T) {
			src := readReal(t, d)
			var runs [2][]string
			for i := range runs {
				im, err := openapi.Tools(context.Background(), src)
				if err != nil {
					t.Fatal(err)
				}
				if len(im.Tools) != d.tools || len(im.Skipped) != d.skipped {
					t.Fatalf("%d tools, want %d; skipped %+v", len(im.Tools), d.tools, im.Skipped)
				}
				for _, tool := range im.Tools {
					runs[i] = append(runs[i], tool.Name())
				}
				for _, s := range im.Skipped {
					runs[i] = append(runs[i], s.Operation+": "+s.Reason)
				}
			}
			if !slices.Equal(runs[0], runs[1]) {
				t.Errorf("two imports made different tools")
			}
		})
	}
}

// BenchmarkRealDocuments: what importing a real document costs: time and bytes per import,
// and the heap's peak (see peakHeap).
func BenchmarkRealDocuments(b *testing.B) {
	for _, d := range realDocuments {
		b.Run(d.name, func(b *testing.B) {
			src := readReal(b, d)
			b.ReportAllocs()
			var peak uint64
			for b.Loop() {
				peak = max(peak, peakHeap(func() {
					if _, err := openapi.Tools(context.Background(), src); err != nil {
						b.Fatal(err)
					}
				}))
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
}
