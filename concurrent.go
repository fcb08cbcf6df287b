package quiver

import (
	"context"
	"errors"
	"sync"
)

// Each dispatches calls one after another, in order: the way calls from one model step
// run. It stops early only when the runtime fails (recording a result), returning the results
// so far and the error.
func (d *Dispatcher) Each(ctx context.Context, calls ...Call) ([]*Result, error) {
	out := make([]*Result, 0, len(calls))
	for _, c := range calls {
		r, err := d.Dispatch(ctx, c)
		out = append(out, r)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// All dispatches calls concurrently and returns every result, in the order of calls.
// The error joins the runtime failures, if any.
func (d *Dispatcher) All(ctx context.Context, calls ...Call) ([]*Result, error) {
	out := make([]*Result, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() { out[i], errs[i] = d.Dispatch(ctx, c) })
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// Any dispatches calls concurrently and returns the first successful result and its index;
// the other calls are cancelled once it arrives. If none succeeds it returns the index
// and result of the first call's failure. It waits for every call to settle, so that no
// handler outlives it unobserved.
func (d *Dispatcher) Any(ctx context.Context, calls ...Call) (int, *Result, error) {
	return d.first(ctx, calls, func(r *Result) bool { return !r.IsError() })
}

// Race dispatches calls concurrently and returns the first result to settle, success or
// failure, and its index; the other calls are cancelled. Like Any, it returns once every
// call has settled (a handler that ignores cancellation delays it by up to the Grace period),
// so that no handler outlives it unobserved.
func (d *Dispatcher) Race(ctx context.Context, calls ...Call) (int, *Result, error) {
	return d.first(ctx, calls, func(*Result) bool { return true })
}

func (d *Dispatcher) first(ctx context.Context, calls []Call, wins func(*Result) bool) (int, *Result, error) {
	if len(calls) == 0 {
		return -1, nil, errors.New("quiver: no calls")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type settled struct {
		i   int
		r   *Result
		err error
	}
	ch := make(chan settled, len(calls))
	for i, c := range calls {
		go func() {
			r, err := d.Dispatch(ctx, c)
			ch <- settled{i, r, err}
		}()
	}
	winner := -1
	results := make([]*Result, len(calls))
	var errs []error
	for range calls {
		s := <-ch
		results[s.i] = s.r
		if s.err != nil {
			errs = append(errs, s.err)
		}
		if winner < 0 && wins(s.r) {
			winner = s.i
			cancel()
		}
	}
	if winner < 0 {
		winner = 0
	}
	return winner, results[winner], errors.Join(errs...)
}
