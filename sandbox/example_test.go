package sandbox_test

import (
	"context"
	"fmt"
	"time"

	"github.com/quiverhq/quiver/sandbox"
)

func ExampleRun() {
	r, err := sandbox.Run(context.Background(), sandbox.Options{
		Source: `
			import { rate } from "config"
			export default function (order) {
				console.log("pricing", order.items.length, "items")
				return { total: order.items.reduce((sum, i) => sum + i.price, 0) * (1 + rate) }
			}`,
		Imports:     map[string]any{"config": map[string]any{"rate": 0.5}},
		Execute:     sandbox.Execute{Args: []any{map[string]any{"items": []map[string]int{{"price": 2}, {"price": 4}}}}},
		MemoryLimit: 16 << 20,
		Timeout:     time.Second,
	})
	if err != nil {
		fmt.Println("bad options:", err)
		return
	}
	fmt.Println(r.Status, string(r.Value), r.Logs[0].Text)
	// Output: success {"total":9} pricing 2 items
}

func ExampleStart() {
	h, err := sandbox.Start(context.Background(), sandbox.Options{
		Source: `console.log("working"); export default () => { for (;;) {} }`,
	})
	if err != nil {
		fmt.Println("bad options:", err)
		return
	}
	for len(h.Logs()) == 0 {
		time.Sleep(time.Millisecond)
	}
	h.Terminate("the user cancelled")
	r := h.Wait()
	fmt.Println(r.Status, r.ErrorMessage)
	// Output: terminated the user cancelled
}

// A program that runs untrusted code sends it to worker processes: itself, started again. The
// tests of this package call WorkerMain in TestMain, as main does here.
func ExampleWorkers() {
	// In main, before anything else:
	sandbox.WorkerMain()

	workers, err := sandbox.NewWorkers(sandbox.WorkerConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer workers.Close()
	sandbox.UseWorkers(workers) // every sandbox.Start and Run from now on
	defer sandbox.UseWorkers(nil)

	r, err := sandbox.Run(context.Background(), sandbox.Options{
		Source:  `export default () => { const a = new Float64Array([3, 1, 2]); a.sort(); return Array.from(a) }`,
		Timeout: time.Second,
	})
	if err != nil {
		fmt.Println("bad options:", err)
		return
	}
	fmt.Println(r.Status, string(r.Value))
	// Output: success [1,2,3]
}
