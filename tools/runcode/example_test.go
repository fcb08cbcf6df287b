package runcode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/tools/runcode"
)

func Example() {
	d := &quiver.Dispatcher{} // quiver.Default, where importing runcode registered run_code
	r, err := d.Call(context.Background(), runcode.Name, map[string]any{
		"code": "export default ({ n }) => Array.from({ length: n }, (_, i) => i * i)",
		"args": map[string]int{"n": 5},
	})
	if err != nil {
		fmt.Println("runtime failure:", err)
		return
	}
	// How long it ran, and what it printed, are in the metadata.
	var meta runcode.Meta
	if err := json.Unmarshal(r.Meta, &meta); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Status, string(r.Value), meta.DurationMS > 0)
	// Output: success [0,1,4,9,16] true
}

// An operator's own limits: a separate registry with run_code built by New.
func ExampleNew() {
	tool, err := runcode.New(runcode.Limits{MaxMemoryBytes: 16 << 20, DefaultMemoryBytes: 8 << 20, MaxConcurrent: 4,
		DefaultTimeout: 10 * time.Second, MaxTimeout: 10 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := &quiver.Registry{}
	if err := reg.Register(tool); err != nil {
		fmt.Println(err)
		return
	}
	d := &quiver.Dispatcher{Registry: reg}
	r, err := d.Call(context.Background(), runcode.Name, map[string]any{
		"code": "export default () => { const a = []; for (;;) a.push(new Array(1e5).fill(0)) }",
	})
	if err != nil {
		fmt.Println("runtime failure:", err)
		return
	}
	firstLine, _, _ := strings.Cut(r.Error, "\n") // a stack and the console output may follow
	fmt.Println(r.Status, firstLine)
	// Output: error the code ended with status memory: InternalError: out of memory: the code went over its memory limit of 8388608 bytes
}
