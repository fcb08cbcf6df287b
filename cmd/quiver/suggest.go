package main

import (
	"flag"
	"strings"
)

// unknownFlagPrefix starts the flag package's error for a flag the set does not define; its
// wording is the package's, stable since Go 1.
const unknownFlagPrefix = "flag provided but not defined: -"

// flagError turns a parse error of fs into the usage error the user reads: for a flag fs does
// not define, the closest one it does ("did you mean --db?"), since a typo is the usual cause.
func flagError(fs *flag.FlagSet, err error) error {
	name, ok := strings.CutPrefix(err.Error(), unknownFlagPrefix)
	if !ok {
		return usagef("%v", err)
	}
	name = strings.TrimLeft(name, "-")
	if best := closestFlag(fs, name); best != "" {
		return usagef("unknown flag --%s; did you mean --%s?", name, best)
	}
	return usagef("unknown flag --%s", name)
}

// closestFlag is the flag of fs whose name is nearest to name: one edit away (one more for
// every four letters past the first four), or one that name begins; "" when none is near
// enough for the suggestion to help.
func closestFlag(fs *flag.FlagSet, name string) string {
	best, bestDist := "", -1
	limit := max(1, len(name)/4)
	fs.VisitAll(func(f *flag.Flag) {
		d := editDistance(strings.ToLower(name), f.Name)
		if len(name) >= 3 && strings.HasPrefix(f.Name, strings.ToLower(name)) {
			d = min(d, 1) // an abbreviation: --thr for --thread
		}
		// VisitAll goes in lexical order, so of equally near flags the first is kept.
		if d <= limit && (bestDist < 0 || d < bestDist) {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// editDistance is the number of single-character insertions, deletions, substitutions and
// swaps of neighbours (a common typo: --dbb, --agnet) that turn a into b.
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	// prev2, prev and cur are three rows of the distance table.
	prev2 := make([]int, len(y)+1)
	prev := make([]int, len(y)+1)
	cur := make([]int, len(y)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(x); i++ {
		cur[0] = i
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(y)]
}
