package limits

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform/entitle"
)

// Quantity is what a check counts.
type Quantity uint8

// The quantities a limit bounds: of calls (CallsPerSecond to Concurrent), and of model
// requests (InputTokensPerMinute to CostPerMonth).
const (
	CallsPerSecond Quantity = iota
	CallsPerMinute
	CallsPerHour
	CallsPerDay
	Concurrent
	InputTokensPerMinute
	InputTokensPerDay
	OutputTokensPerMinute
	OutputTokensPerDay
	CostPerDay // in millionths of the price table's unit
	CostPerMonth
	lastQuantity = CostPerMonth
)

// Model reports whether q is a quantity of model requests.
func (q Quantity) Model() bool { return q > Concurrent }

// window is how a rate is counted: its period in slots of equal length (see Meter).
type window struct {
	period time.Duration
	slots  int
}

var windows = [...]window{
	CallsPerSecond:        {time.Second, 10},
	CallsPerMinute:        {time.Minute, 60},
	CallsPerHour:          {time.Hour, 60},
	CallsPerDay:           {24 * time.Hour, 96},
	InputTokensPerMinute:  {time.Minute, 60},
	InputTokensPerDay:     {24 * time.Hour, 96},
	OutputTokensPerMinute: {time.Minute, 60},
	OutputTokensPerDay:    {24 * time.Hour, 96},
	CostPerDay:            {24 * time.Hour, 96},
	CostPerMonth:          {30 * 24 * time.Hour, 30},
}

func (q Quantity) String() string {
	return [...]string{"calls per second", "calls per minute", "calls per hour", "calls per day", "concurrent calls",
		"input tokens per minute", "input tokens per day", "output tokens per minute", "output tokens per day",
		"cost per day", "cost per month"}[q]
}

// code is the refusal's code: a call over a daily bound has used its quota; over a shorter
// one, its rate.
func (q Quantity) code() quiver.Code {
	if q == CallsPerDay {
		return quiver.CodeQuotaExhausted
	}
	return quiver.CodeRateLimited
}

// Check is one bound a call must keep: Max of Quantity, counted under Key (the limit, the
// quantity and the call's values of the limit's Per).
type Check struct {
	Limit    string
	Quantity Quantity
	Max      int
	Key      string
}

// Subject is a caller as limits see it: the entitlement rules' subject.
type Subject = entitle.Subject

// Set is a compiled Document: immutable, safe for concurrent use.
type Set struct {
	doc    Document
	limits []compiled
	// selected memoises, per tool, the limits whose tool selector selects it (a *quiver.Tool
	// names one version of one tool); dropped whole past selectedCap.
	selected sync.Map
	size     atomic.Int64
}

type compiled struct {
	*Limit
	rule        quiver.Rule
	group       string // what it counts by: its Per, in a fixed order
	specificity int
}

const selectedCap = 1 << 14

// Compile checks d and returns its Set. The Set keeps its own copy of d.
func Compile(d *Document) (*Set, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	data, _ := json.Marshal(d)
	var doc Document
	_ = json.Unmarshal(data, &doc) // a deep copy
	s := &Set{doc: doc, limits: make([]compiled, len(doc.Limits))}
	for i := range doc.Limits {
		l := &doc.Limits[i]
		var group []string
		for _, dim := range dimensions {
			if slices.Contains(l.Per, dim) {
				group = append(group, dim)
			}
		}
		s.limits[i] = compiled{Limit: l, rule: l.selector().Rule(), group: strings.Join(group, ","), specificity: specificity(l)}
	}
	return s, nil
}

// Document returns the document s was compiled from.
func (s *Set) Document() Document { return s.doc }

// Empty reports whether s bounds nothing (a nil Set neither).
func (s *Set) Empty() bool { return s == nil || len(s.limits) == 0 }

// specificity ranks l among the limits that count the same thing the same way: the more of
// who and which tools it sets, the more specific.
func specificity(l *Limit) int {
	n := 0
	for _, set := range []bool{l.Who.Key != "", l.Who.User != "", l.Who.Role != "", l.Who.Claim != "", l.Who.Agent != "",
		l.Who.Toolset != "", len(l.Tools) > 0, l.Source != "", l.When != (quiver.Hints{})} {
		if set {
			n++
		}
	}
	return n
}

// Match returns the checks a call of t by sub must keep, fewest-first by nothing in
// particular: every matching limit's, the most specific alone among those counting one
// quantity the same way.
func (s *Set) Match(sub *Subject, t *quiver.Tool) []Check {
	if s.Empty() {
		return nil
	}
	var p picker
	for _, i := range s.selecting(t) {
		l := &s.limits[i]
		if !l.Who.Matches(sub) {
			continue
		}
		p.add(l, CallsPerSecond, Concurrent)
	}
	return p.checks(sub, t)
}

// MatchModel returns the checks a model request of a run by sub must keep, as Match does for a
// call: every limit of tokens or cost whose who selects sub, the most specific alone among
// those counting one quantity the same way.
func (s *Set) MatchModel(sub *Subject) []Check {
	if s.Empty() {
		return nil
	}
	var p picker
	for i := range s.limits {
		if l := &s.limits[i]; l.models() && l.Who.Matches(sub) {
			p.add(l, InputTokensPerMinute, lastQuantity)
		}
	}
	return p.checks(sub, nil)
}

// picker keeps, for each quantity and way of counting it, the most specific limits that bound
// it.
type picker struct {
	groups map[groupKey]*best
}

type groupKey struct {
	per      string
	quantity Quantity
}

type best struct {
	specificity int
	limits      []*compiled
}

// add considers l's bounds of the quantities from first to last.
func (p *picker) add(l *compiled, first, last Quantity) {
	for q := first; q <= last; q++ {
		if l.bound(q) == 0 {
			continue
		}
		if p.groups == nil {
			p.groups = map[groupKey]*best{}
		}
		g := groupKey{l.group, q}
		b := p.groups[g]
		switch {
		case b == nil || l.specificity > b.specificity:
			p.groups[g] = &best{l.specificity, []*compiled{l}}
		case l.specificity == b.specificity:
			b.limits = append(b.limits, l)
		}
	}
}

// checks are the chosen limits' checks for a call of t (nil: a model request) by sub.
func (p *picker) checks(sub *Subject, t *quiver.Tool) []Check {
	var checks []Check
	for g, b := range p.groups {
		for _, l := range b.limits {
			checks = append(checks, Check{Limit: l.Name, Quantity: g.quantity, Max: l.bound(g.quantity), Key: l.key(g.quantity, sub, t)})
		}
	}
	return checks
}

// selecting returns the limits whose tool selector selects t.
func (s *Set) selecting(t *quiver.Tool) []int {
	if v, ok := s.selected.Load(t); ok {
		return v.([]int)
	}
	sel := []int{}
	for i := range s.limits {
		if s.limits[i].rule.Selects(t) {
			sel = append(sel, i)
		}
	}
	if s.size.Add(1) > selectedCap {
		s.selected.Clear()
		s.size.Store(0)
	}
	s.selected.Store(t, sel)
	return sel
}

// bound is l's bound of q (a cost in millionths of the price table's unit); 0: none.
func (l *compiled) bound(q Quantity) int {
	switch q {
	case CallsPerSecond:
		return l.Calls.PerSecond
	case CallsPerMinute:
		return l.Calls.PerMinute
	case CallsPerHour:
		return l.Calls.PerHour
	case CallsPerDay:
		return l.Calls.PerDay
	case Concurrent:
		return l.Concurrent
	case InputTokensPerMinute:
		return int(l.Tokens.InputPerMinute)
	case InputTokensPerDay:
		return int(l.Tokens.InputPerDay)
	case OutputTokensPerMinute:
		return int(l.Tokens.OutputPerMinute)
	case OutputTokensPerDay:
		return int(l.Tokens.OutputPerDay)
	case CostPerDay:
		return micros(l.Cost.PerDay)
	default:
		return micros(l.Cost.PerMonth)
	}
}

// micros is v in millionths, rounded, at least 1 when v is above 0 (a bound of 0.0000001
// bounds, it does not vanish).
func micros(v float64) int {
	if v <= 0 {
		return 0
	}
	return max(1, int(math.Round(v*1e6)))
}

// key is the counter of q that a call of t by sub counts in: the limit's name and the
// quantity, and a hash of the call's values of the limit's Per (a tool's name may be long, a
// counter's key is stored).
func (l *compiled) key(q Quantity, sub *Subject, t *quiver.Tool) string {
	k := l.Name + "/" + quantityKeys[q]
	if l.group == "" {
		return k
	}
	h := sha256.New()
	for _, dim := range strings.Split(l.group, ",") {
		h.Write([]byte(dim + "=" + valueOf(dim, sub, t) + "\x00"))
	}
	return k + "/" + hex.EncodeToString(h.Sum(nil)[:16])
}

// valueOf is the call's value of dim. A caller with no key (an access token's) counts as its
// user; a call outside an agent's run, as the agent "".
func valueOf(dim string, sub *Subject, t *quiver.Tool) string {
	switch dim {
	case PerKey:
		if sub.Key == "" {
			return "user:" + sub.User
		}
		return sub.Key
	case PerUser:
		return sub.User
	case PerAgent:
		if len(sub.Agents) == 0 {
			return ""
		}
		return sub.Agents[len(sub.Agents)-1]
	case PerToolset:
		return sub.Toolset
	default:
		if t == nil {
			return "" // a model request: Check refuses limits of them that count per tool
		}
		return t.Name()
	}
}

// CostMicros is what a request of model that used input and output tokens costs by the
// document's price table (see Document.CostMicros); 0 for a nil Set.
func (s *Set) CostMicros(model string, input, output int64) int64 {
	if s == nil {
		return 0
	}
	return s.doc.CostMicros(model, input, output)
}
