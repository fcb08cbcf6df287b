package quiver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
)

type nArgs struct {
	N int `json:"n"`
}

func callN(name string, n int) quiver.Call {
	return quiver.Call{Name: name, Args: json.RawMessage(`{"n":` + strconv.Itoa(n) + `}`)}
}

func TestEachRunsInOrder(t *testing.T) {
	var mu sync.Mutex
	var trace []string
	var running atomic.Int32
	step := quiver.Func("step", "One step.", func(_ context.Context, a nArgs) (string, error) {
		if running.Add(1) != 1 {
			t.Errorf("step %d overlaps another", a.N)
		}
		defer running.Add(-1)
		mu.Lock()
		trace = append(trace, fmt.Sprintf("start %d", a.N))
		mu.Unlock()
		time.Sleep(time.Millisecond) // give an overlapping call the chance to show
		mu.Lock()
		trace = append(trace, fmt.Sprintf("end %d", a.N))
		mu.Unlock()
		if a.N == 2 {
			return "", errors.New("step 2 failed")
		}
		return strconv.Itoa(a.N), nil
	})
	d := &quiver.Dispatcher{Registry: newRegistry(t, step)}
	calls := []quiver.Call{callN("step", 0), callN("step", 1), callN("step", 2), callN("step", 3), {Name: "missing"}}
	results, err := d.Each(context.Background(), calls...)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"start 0", "end 0", "start 1", "end 1", "start 2", "end 2", "start 3", "end 3"}
	if !reflect.DeepEqual(trace, want) {
		t.Errorf("trace %v\nwant %v", trace, want)
	}
	if len(results) != 5 {
		t.Fatalf("%d results", len(results))
	}
	// A failed call does not stop the others.
	for i, r := range results {
		switch i {
		case 2:
			wantError(t, r, quiver.CodeToolError, "step 2 failed")
		case 4:
			wantError(t, r, quiver.CodeUnknownTool)
		default:
			wantSuccess(t, r)
			if r.Text != strconv.Itoa(i) {
				t.Errorf("result %d: %q", i, r.Text)
			}
		}
	}
}

// Each stops when the runtime fails to record a result, returning what ran so far.
func TestEachStopsOnRecorderError(t *testing.T) {
	var ran []int
	step := quiver.Func("step", "One step.", func(_ context.Context, a nArgs) (int, error) {
		ran = append(ran, a.N)
		return a.N, nil
	})
	rec := &failAfter{n: 2}
	d := &quiver.Dispatcher{Registry: newRegistry(t, step), Recorder: rec}
	results, err := d.Each(context.Background(), callN("step", 0), callN("step", 1), callN("step", 2), callN("step", 3))
	if err == nil || !errors.Is(err, errStoreDown) {
		t.Fatalf("err = %v", err)
	}
	if len(results) != 3 || !reflect.DeepEqual(ran, []int{0, 1, 2}) {
		t.Errorf("%d results, ran %v", len(results), ran)
	}
}

var errStoreDown = errors.New("store down")

// failAfter records n results, then fails.
type failAfter struct {
	mu sync.Mutex
	n  int
}

func (f *failAfter) RecordResult(context.Context, *quiver.Call, *quiver.Result) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		return errStoreDown
	}
	f.n--
	return nil
}

func TestAllRunsConcurrentlyInCallOrder(t *testing.T) {
	const n = 8
	var started sync.WaitGroup
	started.Add(n)
	allStarted := make(chan struct{})
	go func() { started.Wait(); close(allStarted) }()
	work := quiver.Func("work", "Works.", func(ctx context.Context, a nArgs) (string, error) {
		started.Done()
		// Every call waits for all the others to start: this only finishes if they run at once.
		select {
		case <-allStarted:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		// Finish in reverse order of the calls.
		time.Sleep(time.Duration(n-a.N) * time.Millisecond)
		if a.N == 3 {
			return "", errors.New("three failed")
		}
		return "r" + strconv.Itoa(a.N), nil
	}, quiver.WithTimeout(5*time.Second))
	d := &quiver.Dispatcher{Registry: newRegistry(t, work)}
	calls := make([]quiver.Call, n)
	for i := range calls {
		calls[i] = callN("work", i)
	}
	results, err := d.All(context.Background(), calls...)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		if i == 3 {
			wantError(t, r, quiver.CodeToolError, "three failed")
			continue
		}
		wantSuccess(t, r)
		if r.Text != "r"+strconv.Itoa(i) {
			t.Errorf("result %d is %q: not in call order", i, r.Text)
		}
	}
	// Runtime failures are joined.
	d2 := &quiver.Dispatcher{Registry: newRegistry(t, textTool("x", "x")), Recorder: &memRecorder{err: errStoreDown}}
	results, err = d2.All(context.Background(), quiver.Call{Name: "x"}, quiver.Call{Name: "x"})
	if !errors.Is(err, errStoreDown) || len(results) != 2 || results[0].Text != "x" {
		t.Errorf("All with failing recorder: %v %v", results, err)
	}
}

// slowStarted counts the slow handlers that started: a call cancelled before it starts never
// runs its handler.
var slowStarted atomic.Int32

// firstTools are a failing, a winning and a slow tool that records whether it was cancelled.
func firstTools(t *testing.T, loserCancelled *atomic.Int32, winnerGate chan struct{}) *quiver.Dispatcher {
	fails := quiver.Func("fails", "Fails.", func(context.Context, struct{}) (string, error) {
		return "", errors.New("nope")
	})
	wins := quiver.Func("wins", "Wins.", func(ctx context.Context, _ struct{}) (string, error) {
		if winnerGate != nil {
			<-winnerGate
		}
		return "winner", nil
	})
	slow := quiver.Func("slow", "Slow.", func(ctx context.Context, _ struct{}) (string, error) {
		slowStarted.Add(1)
		select {
		case <-ctx.Done():
			loserCancelled.Add(1)
			return "", ctx.Err()
		case <-time.After(5 * time.Second):
			return "slow finished", nil
		}
	})
	return &quiver.Dispatcher{Registry: newRegistry(t, fails, wins, slow), Grace: 200 * time.Millisecond}
}

func TestAny(t *testing.T) {
	var cancelled atomic.Int32
	slowStarted.Store(0)
	d := firstTools(t, &cancelled, nil)
	i, r, err := d.Any(context.Background(), quiver.Call{Name: "slow"}, quiver.Call{Name: "fails"}, quiver.Call{Name: "wins"}, quiver.Call{Name: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	if i != 2 || r.Text != "winner" {
		t.Errorf("Any = %d %+v, want the success at index 2", i, r)
	}
	// Any waits for every call, so every loser that started has seen its cancellation by now
	// (one that had not started when the winner came is never run).
	if got, started := cancelled.Load(), slowStarted.Load(); got != started {
		t.Errorf("%d of %d started losers saw their cancellation", got, started)
	}

	// No success: the first call's failure.
	i, r, err = d.Any(context.Background(), quiver.Call{Name: "fails"}, quiver.Call{Name: "missing"})
	if err != nil {
		t.Fatal(err)
	}
	if i != 0 {
		t.Errorf("index %d, want 0", i)
	}
	wantError(t, r, quiver.CodeToolError, "nope")

	if _, _, err := d.Any(context.Background()); err == nil {
		t.Error("Any without calls succeeded")
	}
}

func TestRace(t *testing.T) {
	var cancelled atomic.Int32
	slowStarted.Store(0)
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	// "wins" ignores its context and waits on a gate that opens only when the test ends, and
	// "slow" runs until cancelled: "fails" is necessarily the first to settle.
	d := firstTools(t, &cancelled, gate)
	done := make(chan struct{})
	var i int
	var r *quiver.Result
	var err error
	go func() {
		defer close(done)
		i, r, err = d.Race(context.Background(), quiver.Call{Name: "wins"}, quiver.Call{Name: "fails"}, quiver.Call{Name: "slow"})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Race hung")
	}
	if err != nil {
		t.Fatal(err)
	}
	if i != 1 {
		t.Errorf("Race index %d, want 1", i)
	}
	wantError(t, r, quiver.CodeToolError, "nope")
	// The slow call either saw its cancellation or, cancelled before it started, never ran.
	if got, started := cancelled.Load(), slowStarted.Load(); got != started {
		t.Errorf("slow call started %d times but saw cancellation %d times", started, got)
	}
	if _, _, err := d.Race(context.Background()); err == nil {
		t.Error("Race without calls succeeded")
	}
}

// Many goroutines dispatch through one Dispatcher while tools come and go; run with -race.
func TestConcurrentDispatch(t *testing.T) {
	type sumArgs struct {
		A int `json:"a"`
		B int `json:"b,omitempty" default:"10"`
	}
	sum := quiver.Func("sum", "Adds.", func(ctx context.Context, a sumArgs) (string, error) {
		key, _ := quiver.Var(ctx, "key")
		return fmt.Sprintf("%d %s", a.A+a.B, key), nil
	}, quiver.WithVariables(quiver.Variable{Name: "key", Type: quiver.VarSecret}))
	reg := newRegistry(t, sum)
	rec := &memRecorder{}
	var after atomic.Int32
	d := &quiver.Dispatcher{Registry: reg, Recorder: rec, Timeout: time.Second,
		Resolver: quiver.Layered{Thread: quiver.Vars{"key": "k-secret"}},
		Hooks:    quiver.Hooks{AfterSuccess: func(context.Context, *quiver.Call, *quiver.Result) { after.Add(1) }}}

	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := "temp_" + strconv.Itoa(i%3)
			_ = reg.Register(textTool(name, name))
			_ = reg.Unregister(name)
			_ = d.Tools()
		}
	})

	const goroutines, perG = 32, 25
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				a := g*1000 + i
				r, err := d.Dispatch(context.Background(), quiver.Call{Name: "sum", Args: json.RawMessage(fmt.Sprintf(`{"a":%d}`, a))})
				if err != nil {
					t.Errorf("runtime error: %v", err)
					return
				}
				if want := fmt.Sprintf("%d [REDACTED]", a+10); r.Text != want {
					t.Errorf("got %q (%s), want %q", r.Text, r.Error, want)
					return
				}
				if i%5 == 0 {
					r := dispatch(t, d, "sum", `{"a":"x"}`)
					if r.Code != quiver.CodeInvalidArguments {
						t.Errorf("invalid call: %s", r.Code)
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	churn.Wait()
	const total = goroutines*perG + goroutines*5
	if got := len(rec.all()); got != total {
		t.Errorf("%d results recorded, want %d", got, total)
	}
	if got := after.Load(); got != goroutines*perG {
		t.Errorf("AfterSuccess ran %d times, want %d", got, goroutines*perG)
	}
}
