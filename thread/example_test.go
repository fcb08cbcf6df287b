package thread_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
	"github.com/quiverhq/quiver/thread"
)

// A step of an agent loop: store the model's calls, run what is pending through a dispatcher
// that records each result on the thread, then advance.
func Example() {
	st := memstore.New()
	defer st.Close()
	ctx := context.Background()

	th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: "wsp_demo", Name: "demo"})
	if err != nil {
		panic(err)
	}
	reg := &quiver.Registry{}
	_ = reg.Register(quiver.Func("add", "Adds two numbers.", func(_ context.Context, in struct{ A, B int }) (int, error) {
		return in.A + in.B, nil
	}))
	d := &quiver.Dispatcher{Registry: reg, Recorder: th}

	th.AppendUser(ctx, "What is 2+3?")
	th.AppendAssistant(ctx, "", []quiver.Call{{ID: "call_1", Name: "add", Args: json.RawMessage(`{"A":2,"B":3}`)}})
	pending, _ := th.Pending(ctx)
	for _, call := range pending {
		if _, err := d.Dispatch(thread.NewContext(ctx, th), call); err != nil {
			panic(err) // the result could not be stored: stop, and resume later
		}
	}
	th.Advance(ctx, "")

	history, _ := th.History(ctx)
	last := history[len(history)-1]
	fmt.Println(last.Role, last.ToolCallID, string(last.Result.Value))
	fmt.Println("step", th.Execution().StepCount)
	// Output:
	// tool call_1 5
	// step 1
}

// A call naming _outputPath writes its output into the thread's state with its result, in
// one transaction; a second write to the same path is refused with an error result.
func ExampleThread_State() {
	st := memstore.New()
	defer st.Close()
	ctx := context.Background()

	th, _ := thread.Create(ctx, st, thread.Options{WorkspaceID: "wsp_demo"})
	reg := &quiver.Registry{}
	_ = reg.Register(quiver.Func("plan", "Plans a trip.", func(_ context.Context, in struct{ To string }) ([]string, error) {
		return []string{"pack", "go to " + in.To}, nil
	}, quiver.WithMetaFields(schema.OutputPathField)))
	d := &quiver.Dispatcher{Registry: reg, Recorder: th}

	calls := []quiver.Call{
		{ID: "call_1", Name: "plan", Args: json.RawMessage(`{"To":"Oslo","_outputPath":"/trip/steps"}`)},
		{ID: "call_2", Name: "plan", Args: json.RawMessage(`{"To":"Rome","_outputPath":"/trip/steps"}`)},
	}
	th.AppendAssistant(ctx, "", calls)
	for _, call := range calls {
		r, _ := d.Dispatch(thread.NewContext(ctx, th), call)
		if r.IsError() {
			fmt.Println(call.ID, "refused:", r.Code)
		} else {
			fmt.Println(call.ID, "written")
		}
	}
	state, _ := th.State(ctx, "")
	fmt.Println(string(state))
	// Output:
	// call_1 written
	// call_2 refused: state_conflict
	// {"trip":{"steps":["pack","go to Oslo"]}}
}

// A loop's last answer and the thread's end in one write: ended says whether the thread
// took the end, or a message queued meanwhile waits to be answered first.
func ExampleThread_InjectFinal() {
	st := memstore.New()
	defer st.Close()
	ctx := context.Background()

	th, _ := thread.Create(ctx, st, thread.Options{WorkspaceID: "wsp_demo"})
	th.AppendUser(ctx, "Hello")
	end := func(t *store.Thread) error { t.StepCount++; t.Tags = append(t.Tags, "answered"); return nil }

	th.Queue(ctx, &store.Message{Role: store.RoleUser, Content: "And one more thing"})
	ended, _ := th.InjectFinal(ctx, end, &store.Message{Role: store.RoleAssistant, Content: "Hi!"})
	fmt.Println("ended:", ended)

	th.TakeQueued(ctx)
	ended, _ = th.InjectFinal(ctx, end, &store.Message{Role: store.RoleAssistant, Content: "Sure."})
	fmt.Println("ended:", ended, th.Info().Tags, th.Execution().StepCount)
	// Output:
	// ended: false
	// ended: true [answered] 1
}
