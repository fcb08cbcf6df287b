//go:build linux && (amd64 || arm64)

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// quiver serve's side: building it, and storing the filler tools through its API.

const quiverModule = "github.com/quiverhq/quiver"

// moduleRoot walks up from dir to the directory whose go.mod declares Quiver's main module.
func moduleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if f, err := os.Open(filepath.Join(d, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
					if strings.Trim(fields[1], `"`) == quiverModule {
						f.Close()
						return d, nil
					}
					break
				}
			}
			f.Close()
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no directory above %s holds the go.mod of module %s: pass -quiver", dir, quiverModule)
		}
	}
}

// buildQuiver builds ./cmd/quiver of the main module above the working directory into dst.
func buildQuiver(ctx context.Context, dst string, progress io.Writer) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := moduleRoot(wd)
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "serverbench: building %s/cmd/quiver\n", root)
	build := exec.CommandContext(ctx, "go", "build", "-o", dst, "./cmd/quiver")
	build.Dir = root
	build.Stdout, build.Stderr = progress, progress
	if err := build.Run(); err != nil {
		return fmt.Errorf("building quiver in %s: %w", root, err)
	}
	return nil
}

// fillerCode is the function every filler tool runs; the benchmark never calls them.
const fillerCode = "export default (args) => ({ records: [], query: args.query })"

// seedQuiver starts quiver serve on the empty data directory dir, keeps the admin key it
// prints, stores one function and the filler tools through its API, checks that it serves
// them, and stops it.
func seedQuiver(ctx context.Context, t target, dir string, tools int, progress io.Writer) (key string, err error) {
	p, err := start(ctx, t, dir, tools, true)
	if err != nil {
		return "", err
	}
	defer p.stop()
	c := newClients(p.key, "")
	defer c.close()
	sd := &seeder{ctx: ctx, c: c, base: strings.TrimSuffix(p.mcpURL, "/mcp"), progress: progress}
	err = sd.seed(tools)
	if err == nil {
		err = sd.checkServed(t, p.mcpURL, tools)
	}
	if err != nil {
		return "", fmt.Errorf("storing the filler tools: %w; quiver's log: %s", err, p.tail)
	}
	return p.key, nil
}

// seeder stores the filler tools through quiver's API.
type seeder struct {
	ctx      context.Context
	c        *clients
	base     string // quiver's URL
	progress io.Writer
	fnID     string // the function the tools run
	began    time.Time

	mu    sync.Mutex
	next  int   // the next tool to store
	first error // the first failure
}

// seed stores the function, then the filler tools, four at a time: the order of the tools does
// not matter, the time it takes does.
func (sd *seeder) seed(tools int) error {
	var fn struct {
		ID string `json:"id"`
	}
	if err := sd.c.apiJSON(sd.ctx, sd.base+"/v1/functions", map[string]any{"name": "filler"}, &fn); err != nil {
		return err
	}
	version := map[string]any{"code": fillerCode, "input_schema": fillerSchema(0)}
	if err := sd.c.apiJSON(sd.ctx, sd.base+"/v1/functions/"+fn.ID+"/versions", version, nil); err != nil {
		return err
	}
	sd.fnID = fn.ID
	fmt.Fprintf(sd.progress, "serverbench: storing %d filler tools in quiver\n", tools)
	sd.began = time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { sd.storeTools(tools) })
	}
	wg.Wait()
	return sd.first
}

// storeTools stores the next tools, one after the other, until all are stored or one fails.
func (sd *seeder) storeTools(tools int) {
	for {
		i, ok := sd.take(tools)
		if !ok {
			return
		}
		tool := map[string]any{"name": fillerName(i), "description": fillerDesc(i), "target": "server",
			"function_id": sd.fnID, "input_schema": fillerSchema(i)}
		if err := sd.c.apiJSON(sd.ctx, sd.base+"/v1/tools", tool, nil); err != nil {
			sd.mu.Lock()
			sd.first = cmpErr(sd.first, fmt.Errorf("tool %s: %w", fillerName(i), err))
			sd.mu.Unlock()
			return
		}
		if (i+1)%100 == 0 {
			sd.mu.Lock() // progress is written from one goroutine at a time
			fmt.Fprintf(sd.progress, "serverbench: %d tools stored after %s\n", i+1, time.Since(sd.began).Round(time.Millisecond))
			sd.mu.Unlock()
		}
	}
}

// take takes the next tool to store; false once all are taken or one failed.
func (sd *seeder) take(tools int) (int, bool) {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	i := sd.next
	sd.next++
	return i, sd.first == nil && i < tools
}

// checkServed checks that quiver serves the tools over MCP.
func (sd *seeder) checkServed(t target, mcpURL string, tools int) error {
	cs, err := sd.c.connect(sd.ctx, mcpURL)
	if err != nil {
		return err
	}
	names, err := listAll(sd.ctx, cs)
	if err == nil {
		err = sd.c.closeAll([]*mcp.ClientSession{cs})
	}
	if err != nil {
		return err
	}
	return checkListed(t, names, tools)
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// apiJSON POSTs body as JSON to url, expects 201 or 200, and decodes the answer into out
// (unless nil).
func (c *clients) apiJSON(ctx context.Context, url string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	answer, err := c.postJSON(ctx, url, b, http.StatusCreated, http.StatusOK)
	if err != nil {
		return err
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			return fmt.Errorf("POST %s: %w", url, err)
		}
	}
	return nil
}

// checkListed checks one tools/list: the peers list get_current_time and the filler tools,
// quiver serve those and its other built-in tools.
func checkListed(t target, names []string, tools int) error {
	fillers := 0
	for _, n := range names {
		if strings.HasPrefix(n, "filler_") {
			fillers++
		}
	}
	switch {
	case !slices.Contains(names, toolName):
		return fmt.Errorf("tools/list of %s lacks %s (%d tools)", t.label, toolName, len(names))
	case fillers != tools:
		return fmt.Errorf("tools/list of %s has %d filler tools, want %d", t.label, fillers, tools)
	case !t.isQuiver() && len(names) != tools+1:
		return fmt.Errorf("tools/list of %s has %d tools, want %d", t.label, len(names), tools+1)
	}
	return nil
}
