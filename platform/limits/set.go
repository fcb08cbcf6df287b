package limits

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

// The quantities a limit bounds.
const (
	CallsPerSecond Quantity = iota
	CallsPerMinute
	CallsPerHour
	CallsPerDay
	Concurrent
)

// window is how a rate is counted: its period in slots of equal length (see Meter).
type window struct {
	period time.Duration
	slots  int
}

var windows = [...]window{
	CallsPerSecond: {time.Second, 10},
	CallsPerMinute: {time.Minute, 60},
	CallsPerHour:   {time.Hour, 60},
	CallsPerDay:    {24 * time.Hour, 96},
}

func (q Quantity) String() string {
	return [...]string{"calls per second", "calls per minute", "calls per hour", "calls per day", "concurrent calls"}[q]
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
	type best struct {
		specificity int
		limits      []*compiled
	}
	var groups map[string]*best
	for _, i := range s.selecting(t) {
		l := &s.limits[i]
		if !l.Who.Matches(sub) {
			continue
		}
		for q := CallsPerSecond; q <= Concurrent; q++ {
			if l.bound(q) == 0 {
				continue
			}
			if groups == nil {
				groups = map[string]*best{}
			}
			g := l.group + "/" + q.String()
			b := groups[g]
			switch {
			case b == nil || l.specificity > b.specificity:
				groups[g] = &best{l.specificity, []*compiled{l}}
			case l.specificity == b.specificity:
				b.limits = append(b.limits, l)
			}
		}
	}
	var checks []Check
	for g, b := range groups {
		q := quantityOf(g)
		for _, l := range b.limits {
			checks = append(checks, Check{Limit: l.Name, Quantity: q, Max: l.bound(q), Key: l.key(q, sub, t)})
		}
	}
	return checks
}

func quantityOf(group string) Quantity {
	for q := CallsPerSecond; q <= Concurrent; q++ {
		if strings.HasSuffix(group, "/"+q.String()) {
			return q
		}
	}
	return Concurrent
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

// bound is l's bound of q; 0: none.
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
	default:
		return l.Concurrent
	}
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
