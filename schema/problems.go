package schema

import (
	"cmp"
	"fmt"
	"math/big"
	"slices"
	"strings"

	validator "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var printer = message.NewPrinter(language.English)

// problems flattens the validator's error tree into one line per failed constraint, worded for
// a model that must correct its call: what was expected, and what it sent.
func problems(root *validator.ValidationError) []Problem {
	var l problemList
	l.walk(root)
	// The validator walks maps in random order: sort, so the same call always gets the same text.
	slices.SortStableFunc(l.out, func(a, b Problem) int {
		return cmp.Or(strings.Compare(a.Pointer, b.Pointer), strings.Compare(a.Message, b.Message))
	})
	return l.out
}

// problemList collects problems, each once.
type problemList struct {
	out  []Problem
	seen map[Problem]bool
}

func (l *problemList) walk(e *validator.ValidationError) {
	switch e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		l.walkCauses(e)
	case *kind.AnyOf, *kind.OneOf:
		l.add(Problem{pointer(e.InstanceLocation), unionMessage(e)})
	default:
		if len(e.Causes) > 0 {
			l.walkCauses(e)
			return
		}
		l.add(Problem{pointer(e.InstanceLocation), describe(e.ErrorKind)})
	}
}

func (l *problemList) walkCauses(e *validator.ValidationError) {
	for _, c := range e.Causes {
		l.walk(c)
	}
}

func (l *problemList) add(p Problem) {
	if l.seen == nil {
		l.seen = map[Problem]bool{}
	}
	if !l.seen[p] {
		l.seen[p] = true
		l.out = append(l.out, p)
	}
}

// unionMessage words a failed anyOf or oneOf; a oneOf fails too when several branches match.
func unionMessage(e *validator.ValidationError) string {
	if o, ok := e.ErrorKind.(*kind.OneOf); ok && len(o.Subschemas) > 1 {
		return fmt.Sprintf("matches %d alternatives, must match exactly one", len(o.Subschemas))
	}
	return alternatives(e)
}

// alternatives words a failed anyOf/oneOf: when every branch failed on its type, it says which
// types were allowed; otherwise it lists each branch's complaint.
func alternatives(e *validator.ValidationError) string {
	var types []string
	var got string
	allType := true
	var reasons []string
	for _, c := range e.Causes {
		if t, ok := typeRejection(e, c); ok {
			types = append(types, t.Want...)
			got = t.Got
			continue
		}
		allType = false
		for _, p := range problems(c) {
			// Alternatives nest: without a cap, a schema whose anyOf branches name further
			// anyOfs words its error in a length that grows with the product of their branches.
			reasons = append(reasons, truncate(p.String(), maxReasonText))
		}
	}
	if allType && len(types) > 0 {
		return fmt.Sprintf("expected %s, got %s", strings.Join(types, " or "), got)
	}
	return "matches none of the allowed alternatives: " + strings.Join(reasons, " | ")
}

// typeRejection is the type error of a branch that rejects the value itself by its type. Only
// such a branch says which types were allowed; a type error deeper inside (e.g. /x/label) is a
// reason like any other.
func typeRejection(e, branch *validator.ValidationError) (*kind.Type, bool) {
	leaf := branch
	for len(leaf.Causes) == 1 {
		leaf = leaf.Causes[0]
	}
	t, ok := leaf.ErrorKind.(*kind.Type)
	return t, ok && len(leaf.Causes) == 0 && pointer(leaf.InstanceLocation) == pointer(e.InstanceLocation)
}

// maxReasonText is the longest a failed alternative's reason is worded.
const maxReasonText = 300

func describe(k validator.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		return fmt.Sprintf("expected %s, got %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.Required:
		if len(k.Missing) == 1 {
			return fmt.Sprintf("missing required property %q", k.Missing[0])
		}
		return fmt.Sprintf("missing required properties %s", quoteAll(k.Missing))
	case *kind.AdditionalProperties:
		return fmt.Sprintf("unknown property %s (not in the schema)", quoteAll(k.Properties))
	case *kind.Maximum, *kind.Minimum, *kind.ExclusiveMaximum, *kind.ExclusiveMinimum, *kind.MultipleOf:
		return describeBound(k)
	case *kind.MaxLength, *kind.MinLength, *kind.MaxItems, *kind.MinItems:
		return describeCount(k)
	case *kind.Pattern, *kind.Enum, *kind.Const, *kind.Format:
		return describeValue(k)
	case *kind.FalseSchema:
		return "not allowed here"
	default:
		return k.LocalizedString(printer)
	}
}

// describeBound words a failed numeric bound.
func describeBound(k validator.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Maximum:
		return fmt.Sprintf("maximum %s, got %s", rat(k.Want), rat(k.Got))
	case *kind.Minimum:
		return fmt.Sprintf("minimum %s, got %s", rat(k.Want), rat(k.Got))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("must be less than %s, got %s", rat(k.Want), rat(k.Got))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("must be greater than %s, got %s", rat(k.Want), rat(k.Got))
	case *kind.MultipleOf:
		return fmt.Sprintf("must be a multiple of %s, got %s", rat(k.Want), rat(k.Got))
	}
	return k.LocalizedString(printer)
}

// describeCount words a failed bound on a string's length or an array's items.
func describeCount(k validator.ErrorKind) string {
	switch k := k.(type) {
	case *kind.MaxLength:
		return fmt.Sprintf("maximum length %d, got %d", k.Want, k.Got)
	case *kind.MinLength:
		return fmt.Sprintf("minimum length %d, got %d", k.Want, k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("at most %d items, got %d", k.Want, k.Got)
	case *kind.MinItems:
		return fmt.Sprintf("at least %d items, got %d", k.Want, k.Got)
	}
	return k.LocalizedString(printer)
}

// describeValue words a value that is not one the schema allows: a pattern, enum, const or
// format it fails.
func describeValue(k validator.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Pattern:
		return fmt.Sprintf("must match pattern %s, got %s", k.Want, quoteValue(k.Got))
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = quoteValue(w)
		}
		return fmt.Sprintf("must be one of %s, got %s", strings.Join(want, ", "), quoteValue(k.Got))
	case *kind.Const:
		return fmt.Sprintf("must be %s, got %s", quoteValue(k.Want), quoteValue(k.Got))
	case *kind.Format:
		return fmt.Sprintf("must be a valid %s, got %s", k.Want, quoteValue(k.Got))
	}
	return k.LocalizedString(printer)
}

func rat(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return fmt.Sprint(f)
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", truncate(n, 60))
	}
	return strings.Join(q, ", ")
}
