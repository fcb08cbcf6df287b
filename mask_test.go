package quiver

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The aligned base64 cores are found wherever the secret sits in a larger blob, and each is
// as long as the bytes around the secret allow.
func TestBase64CoresInBlobs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	for range 2000 {
		secret := randBytes(1 + rng.IntN(40))
		prefix, suffix := randBytes(rng.IntN(7)), randBytes(rng.IntN(4))
		offset := len(prefix) % 3
		shifted := append(make([]byte, offset), secret...)
		var f formWriter
		f.appendBase64Core(shifted, offset)
		core := string(f.buf)
		// Characters 0 to skip-1 and the last partial one are shared with neighbouring bytes.
		want := 8*(offset+len(secret))/6 - [3]int{0, 2, 3}[offset]
		if len(core) != max(want, 0) {
			t.Fatalf("offset %d, %d bytes: core %q has %d characters, want %d", offset, len(secret), core, len(core), want)
		}
		blob := base64.StdEncoding.EncodeToString(append(append(prefix, secret...), suffix...))
		if !strings.Contains(blob, core) {
			t.Fatalf("core %q (offset %d) not in %q", core, offset, blob)
		}
		if !strings.Contains(base64.RawURLEncoding.EncodeToString(append(append(prefix, secret...), suffix...)),
			string(urlSafeBase64([]byte(core)))) {
			t.Fatalf("URL-safe core of %q not in the URL-safe blob", core)
		}
	}
}

// Derived forms too short to mean anything are left out; the value itself never is.
func TestShortSecretForms(t *testing.T) {
	for _, s := range []string{"a", "ab", "abc", "abcd"} {
		forms := secretForms(s)
		if len(forms) == 0 || forms[0] != s {
			t.Fatalf("forms of %q = %q: the value itself comes first", s, forms)
		}
		for _, f := range forms[1:] {
			if len(f) < minFormLen {
				t.Errorf("forms of %q include %q, shorter than %d", s, f, minFormLen)
			}
		}
	}
	if got := secretForms(""); got != nil {
		t.Errorf("forms of the empty secret = %q", got)
	}
}

// One secret is always searched for form by form; several, in a long text, with a
// strings.Replacer: the regression test's "among other secrets" case takes that path.
func TestMaskerPaths(t *testing.T) {
	one := newMasker(nil, []string{"sk-live-4f9a2b7c1d8e"})
	special := newMasker(nil, []string{`p@ss w0rd/+?&"<ü>~x`})
	three := newMasker(nil, []string{"sk-live-4f9a2b7c1d8e", "correct horse battery", "k3y-0f-s1gn1ng"})
	if len(one.forms) > indexLimit || len(special.forms) > indexLimit {
		t.Errorf("one secret has %d and %d forms, more than indexLimit (%d)", len(one.forms), len(special.forms), indexLimit)
	}
	if len(three.forms) <= indexLimit {
		t.Errorf("three secrets have %d forms, not more than indexLimit (%d)", len(three.forms), indexLimit)
	}
	short := `{"city":"Paris","days":3,"summary":"sunny"}`
	long := strings.Repeat("The forecast for Paris is sunny. ", trieMinText/32+1)
	for _, m := range []*masker{one, three} {
		for _, text := range []string{short, long} {
			if n := testing.AllocsPerRun(20, func() { m.Replace(text) }); n != 0 {
				t.Errorf("%d forms, %d bytes: %v allocations for a text without secrets", len(m.forms), len(text), n)
			}
			if got := m.Replace(text + "key sk-live-4f9a2b7c1d8e."); got != text+"key [REDACTED]." {
				t.Errorf("%d forms, %d bytes: the secret is not masked", len(m.forms), len(text))
			}
		}
	}
	if one.repl != nil {
		t.Error("one secret built a Replacer")
	}
	if three.repl == nil {
		t.Error("three secrets in a long text did not use a Replacer")
	}
}

// Both ways of masking replace exactly what a strings.Replacer over the same forms does: the
// leftmost match, the longest at one position, then on after it.
func TestMaskerMatchesReplacer(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	word := func(n int) string { // from a two-letter alphabet, so that forms overlap often
		b := make([]byte, n)
		for i := range b {
			b[i] = "ab"[rng.IntN(2)]
		}
		return string(b)
	}
	for range 3000 {
		var values []string
		for range 1 + rng.IntN(25) {
			values = append(values, word(1+rng.IntN(5)))
		}
		// Sorted and deduplicated as a masker's forms are, without the encodings, so that the
		// values alone make the overlaps.
		m := newMasker([]*masker{{forms: values}}, nil)
		var pairs []string
		for _, f := range m.forms {
			pairs = append(pairs, f, mask)
		}
		want := strings.NewReplacer(pairs...)
		for range 5 {
			s := word(rng.IntN(60))
			w := want.Replace(s)
			if got, changed := replaceByIndex(s, m.forms); got != w || changed != (w != s) {
				t.Fatalf("replaceByIndex: forms %q in %q: got %q (changed %v), want %q", m.forms, s, got, changed, w)
			}
			if got, changed := m.replaceByTrie(s); got != w || changed != (w != s) {
				t.Fatalf("replaceByTrie: forms %q in %q: got %q (changed %v), want %q", m.forms, s, got, changed, w)
			}
		}
	}
}

// BenchmarkMaskForms compares the two ways of searching a text for the forms of secrets that
// masker.replace chooses between (see indexLimit), on texts without a secret.
func BenchmarkMaskForms(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	bin := make([]byte, 1<<20)
	for i := range bin {
		bin[i] = byte(rng.UintN(256))
	}
	texts := []struct{ name, text string }{
		{"50B", `{"city":"Paris","days":3,"summary":"sunny"}`},
		{"64KiB", strings.Repeat("The forecast for Paris is sunny, 21 degrees, wind 3 km/h. ", 1130)},
		{"1MiB-binary", string(bin)},
	}
	for _, n := range []int{1, 2, 3} {
		var secrets []string
		for i := range n {
			secrets = append(secrets, fmt.Sprintf("sk-live-%d-4f9a2b7c1d%d", i, 7*i))
		}
		m := newMasker(nil, secrets)
		var pairs []string
		for _, f := range m.forms {
			pairs = append(pairs, f, mask)
		}
		repl := strings.NewReplacer(pairs...)
		// A masker lives for one call, so its Replacer is built on every call that needs one.
		b.Run(fmt.Sprintf("forms=%d/build-replacer", len(m.forms)), func(b *testing.B) {
			for b.Loop() {
				strings.NewReplacer(pairs...).Replace("x")
			}
		})
		for _, tc := range texts {
			b.Run(fmt.Sprintf("forms=%d/%s/index", len(m.forms), tc.name), func(b *testing.B) {
				b.SetBytes(int64(len(tc.text)))
				for b.Loop() {
					replaceByIndex(tc.text, m.forms)
				}
			})
			b.Run(fmt.Sprintf("forms=%d/%s/replacer", len(m.forms), tc.name), func(b *testing.B) {
				b.SetBytes(int64(len(tc.text)))
				w := &maskWriter{}
				for b.Loop() {
					w.src, w.same, w.buf = tc.text, false, w.buf[:0]
					repl.WriteString(w, tc.text)
				}
			})
		}
	}
}
