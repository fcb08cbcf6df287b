// Package usage meters what a workspace's callers use (calls of tools, model requests, their
// tokens and cost) and answers questions about it: how much, when, by whom and of what.
//
// A Meter counts in the process, by minute and by the dimensions of store.UsageRow, and adds
// what it counted to the store every few seconds, in one write for everything counted since
// the last: a call costs a map update, never a write of its own. What a process counted and
// had not yet written when it died is lost (a few seconds of usage, never a call's record:
// the thread's history is written with the call). Query answers from the store, on any node.
package usage

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/quiverhq/quiver/store"
)

// Outcome is how a call ended, as usage counts it.
type Outcome int

// Call outcomes.
const (
	OK      Outcome = iota
	Error           // an error result other than a refusal
	Refused         // refused before it ran: a limit, an entitlement, a policy
)

// Dims are what a call or request is counted by: the caller's key and user, the agent whose
// run made it (the innermost of a chain), the tool called, the model asked.
type Dims struct {
	Key, User, Agent, Tool, Model string
}

// MaxValueBytes bounds a dimension's value as counted: a longer one is cut (a tool name comes
// from the registry and a key's id from the store, so only a caller's typo of a tool name
// would be long, and it is counted as "(unknown)" anyway).
const MaxValueBytes = 200

// DefaultEvery is how often a Meter writes what it counted, unless Meter.Every says otherwise.
const DefaultEvery = 5 * time.Second

// DefaultMaxRows bounds the distinct rows a Meter keeps between writes, unless MaxRows says
// otherwise: past it, new combinations are counted under the workspace's totals alone (Other).
const DefaultMaxRows = 100_000

// Other is the value every dimension of a row counted past the Meter's bound has.
const Other = "(other)"

// Meter counts usage in the process and writes it to Store. Set its fields before the first
// count; Start begins the writes and Close ends them, writing what is left.
type Meter struct {
	Store store.Usage
	// Every is how often what was counted is written; 0 means DefaultEvery.
	Every time.Duration
	// MaxRows bounds the rows kept between writes; 0 means DefaultMaxRows.
	MaxRows int
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger

	mu     sync.Mutex
	counts map[rowKey]*store.UsageCounts
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// rowKey is a minute row's identity.
type rowKey struct {
	ws     string
	minute int64
	dims   Dims
}

func (m *Meter) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Call counts a call of workspace ws that ended with outcome after took.
func (m *Meter) Call(ws string, d Dims, outcome Outcome, took time.Duration) {
	m.add(ws, d, func(c *store.UsageCounts) {
		c.Calls++
		switch outcome {
		case Error:
			c.Errors++
		case Refused:
			c.Refusals++
		}
		c.Durations[store.UsageBucket(took)]++
	})
}

// Request counts a model request of workspace ws: its tokens and cost (in millionths of the
// price table's unit).
func (m *Meter) Request(ws string, d Dims, input, output, costMicros int64) {
	m.add(ws, d, func(c *store.UsageCounts) {
		c.Requests++
		c.InputTokens += input
		c.OutputTokens += output
		c.CostMicros += costMicros
	})
}

func (m *Meter) add(ws string, d Dims, count func(*store.UsageCounts)) {
	if m == nil || ws == "" {
		return
	}
	k := rowKey{ws: ws, minute: m.now().Unix() / 60 * 60, dims: cut(d)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = map[rowKey]*store.UsageCounts{}
	}
	c := m.counts[k]
	if c == nil {
		if len(m.counts) >= m.maxRows() {
			k.dims = Dims{Key: Other, User: Other, Agent: Other, Tool: Other, Model: Other}
			c = m.counts[k]
		}
		if c == nil {
			c = &store.UsageCounts{}
			m.counts[k] = c
		}
	}
	count(c)
}

// cut bounds d's values (see MaxValueBytes).
func cut(d Dims) Dims {
	for _, v := range []*string{&d.Key, &d.User, &d.Agent, &d.Tool, &d.Model} {
		if len(*v) > MaxValueBytes {
			*v = (*v)[:MaxValueBytes]
		}
	}
	return d
}

// Start writes what the meter counts every Every until Close.
func (m *Meter) Start() {
	m.stop, m.done = make(chan struct{}), make(chan struct{})
	every := m.Every
	if every <= 0 {
		every = DefaultEvery
	}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-tick.C:
				m.Flush(context.Background())
			}
		}
	}()
}

// Close stops the writes and writes what is left.
func (m *Meter) Close(ctx context.Context) error {
	m.once.Do(func() {
		if m.stop != nil {
			close(m.stop)
			<-m.done
		}
	})
	return m.Flush(ctx)
}

// Flush writes what was counted since the last write, in one AddUsage. When the store
// refuses it, the counts are kept for the next try (within MaxRows).
func (m *Meter) Flush(ctx context.Context) error {
	m.mu.Lock()
	counts := m.counts
	m.counts = nil
	m.mu.Unlock()
	if len(counts) == 0 {
		return nil
	}
	err := m.Store.AddUsage(ctx, rows(counts))
	if err != nil {
		m.logger().WarnContext(ctx, "usage: the counts cannot be written; they are kept for the next try", "rows", len(counts), "err", err)
		m.mu.Lock()
		for k, c := range counts {
			if mine := m.counts[k]; mine != nil {
				mine.Add(c)
			} else {
				m.restore(k, c)
			}
		}
		m.mu.Unlock()
	}
	return err
}

// restore puts back counts that could not be written, within the bound.
func (m *Meter) restore(k rowKey, c *store.UsageCounts) {
	if m.counts == nil {
		m.counts = map[rowKey]*store.UsageCounts{}
	}
	if len(m.counts) < m.maxRows() {
		m.counts[k] = c
	}
}

func (m *Meter) maxRows() int { return cmp.Or(m.MaxRows, DefaultMaxRows) }

func (m *Meter) logger() *slog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return slog.Default()
}

// rows are the stored rows a minute's counts add to: the minute's, hour's and day's rows of
// every dimension, the hour's and day's rows of each dimension alone and of none, and the
// day's rows of each pair of dimensions (what the console asks of a month: callers by key and
// user, tokens by agent and model).
func rows(counts map[rowKey]*store.UsageCounts) []*store.UsageRow {
	merged := map[store.UsageRow]*store.UsageRow{}
	var out []*store.UsageRow
	add := func(k store.UsageRow, c *store.UsageCounts) {
		if r := merged[k]; r != nil {
			r.Add(c)
			return
		}
		r := k
		r.UsageCounts = *c
		merged[k] = &r
		out = append(out, &r)
	}
	for k, c := range counts {
		all := store.UsageRow{WorkspaceID: k.ws, Dims: store.UsageAllDims,
			Key: k.dims.Key, User: k.dims.User, Agent: k.dims.Agent, Tool: k.dims.Tool, Model: k.dims.Model}
		for _, span := range []int64{60, 3600, 86400} {
			all.Span, all.Start = span, k.minute/span*span
			add(all, c)
		}
		for _, span := range []int64{3600, 86400} {
			one := store.UsageRow{WorkspaceID: k.ws, Span: span, Start: k.minute / span * span}
			add(one, c) // the totals
			for i, dim := range store.UsageDimensions {
				one := one
				one.Dims = dim
				one.SetValue(dim, all.Value(dim))
				add(one, c)
				if span != 86400 {
					continue
				}
				for _, other := range store.UsageDimensions[i+1:] {
					two := one
					two.Dims = dim + "," + other
					two.SetValue(other, all.Value(other))
					add(two, c)
				}
			}
		}
	}
	return out
}
