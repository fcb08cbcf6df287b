package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/quiverhq/quiver"
)

// The CLI uses the fleet's configuration the database keeps, as every node serves it: on a
// database given one with quiver apply, quiver tools list lists its OpenAPI operation,
// quiver call calls it under its governance (a confirmation the CLI cannot ask for: it waits,
// and the service is not called), and quiver tools add refuses its name; an import into a
// file says how to make it the fleet's; a configuration file the command would otherwise read
// is named as not read.
func TestCLIUsesTheFleetsConfiguration(t *testing.T) {
	var calls atomic.Int32
	inventory := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `["apple","pear","plum"]`)
	}))
	t.Cleanup(inventory.Close)
	dir := t.TempDir()
	doc, applied, local := filepath.Join(dir, "inventory.yaml"), filepath.Join(dir, "fleet", "quiver.yaml"), filepath.Join(dir, "local.yaml")
	db := filepath.Join(dir, "q.db")
	writeTestFiles(t, map[string]string{
		doc: inventoryDoc,
		applied: "openapi:\n  - {name: inventory, document: '" + doc + "', servers: ['" + inventory.URL + "']}\n" +
			"governance:\n  - tools: [inventory.listItems]\n    requires_confirmation: true\n",
		local: "openapi: []\n",
	})
	t.Setenv(configEnv, "")
	if code, out, errOut := runOwn(t, "", "apply", "-f", applied, "--db", db); code != 0 {
		t.Fatalf("quiver apply: %d\n%s%s", code, out, errOut)
	}

	code, out, errOut := runOwn(t, "", "tools", "list", "--db", db)
	if code != 0 || !strings.Contains(out, "inventory.listItems") {
		t.Fatalf("quiver tools list on the fleet's database: %d\n%s%s", code, out, errOut)
	}
	_, out, errOut = runOwn(t, "", "call", "inventory.listItems", "--db", db)
	var r quiver.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Code != quiver.CodeConfirmationRequired || calls.Load() != 0 {
		t.Fatalf("quiver call of the fleet's operation that requires confirmation: %v %+v (the service was called %d times)\n%s%s",
			err, r, calls.Load(), out, errOut)
	}
	code, out, errOut = runOwn(t, "", "tools", "add", "--db", db, writeToolDefinition(t, dir, "inventory.listItems"))
	if code == 0 || !strings.Contains(out+errOut, `"inventory.listItems"`) {
		t.Fatalf("quiver tools add of the fleet's operation's name: %d\n%s%s", code, out, errOut)
	}

	// An import into a file says that the fleet's configuration is what is served, and how to
	// change it.
	code, out, errOut = runOwn(t, "", "tools", "import-openapi", doc, "--name", "more", "--server", inventory.URL, "--config", local, "--db", db)
	if code != 0 || !strings.Contains(out, "The database keeps the fleet's configuration (version 1), which every node and command serves: quiver apply -f "+local) {
		t.Fatalf("quiver tools import-openapi on the fleet's database: %d\n%s%s", code, out, errOut)
	}

	// A file given: said not to be read, and the fleet's configuration used still.
	code, out, errOut = runOwn(t, "", "tools", "list", "--db", db, "--config", local)
	if code != 0 || !strings.Contains(out, "inventory.listItems") ||
		!strings.Contains(errOut, "the database keeps the fleet's configuration (version 1), which this command uses; "+local+" is not read") {
		t.Fatalf("quiver tools list --config on the fleet's database: %d\n%s%s", code, out, errOut)
	}
}

// writeToolDefinition writes a JavaScript tool's definition called name into dir.
func writeToolDefinition(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, "tool.yaml")
	writeTestFiles(t, map[string]string{path: "name: " + name + "\ndescription: Lists things.\ncode: 'export default () => []'\n" +
		"input_schema: {type: object}\n"})
	return path
}
