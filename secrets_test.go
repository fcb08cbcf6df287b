package quiver_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// unescapedJSON encodes v without HTML escaping, as many JSON producers do.
func unescapedJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSpace(b.Bytes())
}

// uEscaped encodes s as a JSON string with every character as a \u escape.
func uEscaped(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	b.WriteByte('"')
	return b.String()
}

// leaks reports where in r the secret can still be read, "" if nowhere.
func leaks(t testing.TB, r *quiver.Result, secret string) string {
	t.Helper()
	fields := map[string]string{"text": r.Text, "error": r.Error, "stack": r.Stack}
	if r.IsError() || r.Text != "" || len(r.Value) == 0 {
		// Otherwise the model text is the value, checked below as JSON.
		fields["model text"] = r.ModelText()
	}
	for i, p := range r.Problems {
		fields[fmt.Sprintf("problem %d", i)] = p.Message
	}
	for i, c := range r.Content {
		fields[fmt.Sprintf("content %d", i)] = c.Text + c.URI
	}
	for i, a := range r.Attachments {
		fields[fmt.Sprintf("attachment %d", i)] = a.Name + a.Description + a.Path
	}
	for where, s := range fields {
		if strings.Contains(s, secret) {
			return where
		}
	}
	if len(r.Value) > 0 {
		if !json.Valid(r.Value) {
			t.Fatalf("masking broke the value: %s", r.Value)
		}
		v, err := schema.Decode(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if where := leakIn(v, secret, "value"); where != "" {
			return where
		}
	}
	rest := *r
	rest.Value = nil // checked above
	b, err := json.Marshal(rest)
	if err != nil {
		t.Fatalf("result cannot be encoded: %v", err)
	}
	esc, _ := json.Marshal(secret)
	if bytes.Contains(b, esc[1:len(esc)-1]) {
		return "JSON encoding"
	}
	return ""
}

func leakIn(v any, secret, where string) string {
	switch x := v.(type) {
	case string:
		if strings.Contains(x, secret) {
			return where
		}
	case json.Number:
		if strings.Contains(string(x), secret) {
			return where
		}
	case []any:
		for i, e := range x {
			if w := leakIn(e, secret, fmt.Sprintf("%s[%d]", where, i)); w != "" {
				return w
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.Contains(k, secret) {
				return where + " key"
			}
			if w := leakIn(e, secret, where+"."+k); w != "" {
				return w
			}
		}
	}
	return ""
}

func TestSecretsMasked(t *testing.T) {
	secrets := []struct {
		name, value string
	}{
		{"plain", "sk-live-4f9a2b"},
		{"needs JSON escaping", `a"b<c`},
		{"html and unicode", "pässwörd&<>'"},
	}
	type returned func(secret string) (any, error)
	handlers := []struct {
		name   string
		fn     returned
		status quiver.Status
	}{
		{"text", func(s string) (any, error) { return "the key is " + s + ".", nil }, quiver.StatusSuccess},
		{"struct value", func(s string) (any, error) {
			return struct {
				Key  string   `json:"key"`
				List []string `json:"list"`
			}{s, []string{"x" + s + "y"}}, nil
		}, quiver.StatusSuccess},
		{"map key", func(s string) (any, error) { return map[string]int{s: 1}, nil }, quiver.StatusSuccess},
		{"raw JSON without HTML escaping", func(s string) (any, error) { return unescapedJSON(map[string]string{"k": s}), nil }, quiver.StatusSuccess},
		{"raw JSON with unicode escapes", func(s string) (any, error) { return json.RawMessage(`{"k":` + uEscaped(s) + `}`), nil }, quiver.StatusSuccess},
		{"result text and value", func(s string) (any, error) {
			return &quiver.Result{Text: "t " + s, Value: unescapedJSON([]string{s})}, nil
		}, quiver.StatusSuccess},
		{"metadata", func(s string) (any, error) {
			return &quiver.Result{Text: "ran", Meta: unescapedJSON(map[string]any{"logs": []string{"printed " + s}})}, nil
		}, quiver.StatusSuccess},
		{"content and attachment", func(s string) (any, error) {
			return &quiver.Result{Content: []quiver.Content{quiver.TextContent("c " + s)},
				Attachments: []quiver.Attachment{{Name: "note.txt", MimeType: "text/plain", Data: "aGk=", Description: "about " + s}}}, nil
		}, quiver.StatusSuccess},
		{"error", func(s string) (any, error) { return nil, errors.New("auth failed for " + s) }, quiver.StatusError},
		{"wrapped Fail", func(s string) (any, error) {
			return nil, fmt.Errorf("calling api: %w", quiver.Fail(quiver.CodeInvalidArguments, "key %s rejected", s))
		}, quiver.StatusError},
		{"error result", func(s string) (any, error) { return &quiver.Result{Error: "bad " + s}, nil }, quiver.StatusError},
		{"panic", func(s string) (any, error) { panic("crashed holding " + s) }, quiver.StatusError},
		{"panic with error", func(s string) (any, error) { panic(errors.New("crashed holding " + s)) }, quiver.StatusError},
	}
	for _, sec := range secrets {
		for _, h := range handlers {
			t.Run(sec.name+"/"+h.name, func(t *testing.T) {
				tool := quiver.Func("leaky", "Leaks its secret.", func(ctx context.Context, _ struct{}) (any, error) {
					v, ok := quiver.Var(ctx, "api_key")
					if !ok {
						return nil, errors.New("no api_key")
					}
					return h.fn(v)
				}, quiver.WithVariables(quiver.Variable{Name: "api_key", Type: quiver.VarSecret, Required: true},
					quiver.Variable{Name: "region", Type: quiver.VarText}))
				var hooked []*quiver.Result
				rec := &memRecorder{}
				d := &quiver.Dispatcher{
					Registry: newRegistry(t, tool),
					Resolver: quiver.Layered{Thread: quiver.Vars{"api_key": sec.value, "region": "eu"}},
					Hooks: quiver.Hooks{
						AfterSuccess: func(_ context.Context, _ *quiver.Call, r *quiver.Result) { hooked = append(hooked, r) },
						AfterFailure: func(_ context.Context, _ *quiver.Call, r *quiver.Result) { hooked = append(hooked, r) },
					},
					Recorder: rec,
				}
				r := dispatch(t, d, "leaky", "{}")
				if r.Status != h.status {
					t.Fatalf("status %s (%s), want %s", r.Status, r.Error, h.status)
				}
				if where := leaks(t, r, sec.value); where != "" {
					t.Errorf("secret visible in the result's %s: %+v", where, r)
				}
				b, _ := json.Marshal(r)
				if !strings.Contains(string(b), "[REDACTED]") {
					t.Errorf("no [REDACTED] mark in %s", b)
				}
				if len(hooked) != 1 {
					t.Fatalf("hooks saw %d results", len(hooked))
				}
				if where := leaks(t, hooked[0], sec.value); where != "" {
					t.Errorf("secret visible to the hook in %s", where)
				}
				stored := rec.all()
				if len(stored) != 1 {
					t.Fatalf("%d results recorded", len(stored))
				}
				if where := leaks(t, &stored[0].Result, sec.value); where != "" {
					t.Errorf("secret recorded in %s", where)
				}
			})
		}
	}
}

// A numeric secret returned as a JSON number is masked without breaking the value.
func TestSecretMaskingKeepsValueValid(t *testing.T) {
	tests := []struct {
		name   string
		secret string
		value  json.RawMessage
	}{
		{"number", "9876543210", json.RawMessage(`{"pin":9876543210,"n":1}`)},
		{"inside number", "4242", json.RawMessage(`[142420]`)},
		{"word that is a literal", "true", json.RawMessage(`{"ok":true,"s":"true story"}`)},
		{"structural text", `":"`, json.RawMessage(`{"a":"b","c":"x\":\"y"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := quiver.Func("num", "Returns numbers.", func(ctx context.Context, _ struct{}) (json.RawMessage, error) {
				return tt.value, nil
			}, quiver.WithVariables(quiver.Variable{Name: "pin", Type: quiver.VarSecret}))
			d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Resolver: quiver.Layered{User: quiver.Vars{"pin": tt.secret}}}
			r := dispatch(t, d, "num", "{}")
			wantSuccess(t, r)
			if !json.Valid(r.Value) {
				t.Fatalf("masked value is not JSON: %s", r.Value)
			}
			if where := leaks(t, r, tt.secret); where != "" {
				t.Errorf("secret visible in %s: %s", where, r.Value)
			}
			if _, err := json.Marshal(r); err != nil {
				t.Errorf("result cannot be encoded: %v", err)
			}
		})
	}
}

// Text variables are not masked, and a secret contained in another is masked whole.
func TestMaskingScope(t *testing.T) {
	tool := quiver.Func("show", "Shows variables.", func(ctx context.Context, _ struct{}) (string, error) {
		region, _ := quiver.Var(ctx, "region")
		long, _ := quiver.Var(ctx, "long")
		short, _ := quiver.Var(ctx, "short")
		_, sawUndeclared := quiver.Var(ctx, "other_secret")
		return fmt.Sprintf("region=%s long=%s short=%s undeclared=%v", region, long, short, sawUndeclared), nil
	}, quiver.WithVariables(
		quiver.Variable{Name: "region"},
		quiver.Variable{Name: "long", Type: quiver.VarSecret},
		quiver.Variable{Name: "short", Type: quiver.VarSecret},
		quiver.Variable{Name: "empty", Type: quiver.VarSecret},
	))
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Resolver: quiver.Layered{Thread: quiver.Vars{
		"region": "eu-west", "long": "abc123xyz", "short": "123", "empty": "", "other_secret": "zzz"}}}
	r := dispatch(t, d, "show", "{}")
	wantSuccess(t, r)
	if want := "region=eu-west long=[REDACTED] short=[REDACTED] undeclared=false"; r.Text != want {
		t.Errorf("text %q, want %q", r.Text, want)
	}
}

// A handler abandoned after a timeout cannot leak a secret through its late result, and the
// timeout result itself is masked.
func TestSecretsMaskedOnTimeout(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	tool := quiver.Func("slow", "Slow.", func(ctx context.Context, _ struct{}) (string, error) {
		<-ctx.Done()
		k, _ := quiver.Var(ctx, "k")
		return "", errors.New("gave up with " + k)
	}, quiver.WithTimeout(50*time.Millisecond), quiver.WithVariables(quiver.Variable{Name: "k", Type: quiver.VarSecret}))
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Grace: 50 * time.Millisecond,
		Resolver: quiver.Layered{Instance: quiver.Vars{"k": "hunter2"}}}
	r := dispatch(t, d, "slow", "{}")
	wantError(t, r, quiver.CodeTimeout)
	if where := leaks(t, r, "hunter2"); where != "" {
		t.Errorf("secret in %s", where)
	}
}

// transformation is one way a tool may hand back a secret it holds (issue 11, finding 5).
type transformation struct {
	name   string
	encode func(secret string) string
	// reveals reports whether text still shows the secret to someone undoing this
	// transformation. For the masked ones it is written from the attacker's side (decode
	// whatever looks encoded), not from the masker's list of forms.
	reveals func(text, secret string) bool
	// masked says whether masking promises to catch the transformation; why says why not.
	masked bool
	why    string
}

// secretTransformations lists every transformation the masking test tries: first those masking
// promises to catch, then those it does not, each with the reason.
func secretTransformations() []transformation {
	b64 := func(enc *base64.Encoding, prefix, suffix string) func(string) string {
		return func(s string) string { return enc.EncodeToString([]byte(prefix + s + suffix)) }
	}
	jsonInner := func(html bool) func(string) string {
		return func(s string) string {
			b := unescapedJSON(s)
			if html {
				b, _ = json.Marshal(s)
			}
			return string(b[1 : len(b)-1])
		}
	}
	uEsc := func(s string) string { return strings.Trim(uEscaped(s), `"`) }
	passesThrough := func(encode func(string) string) func(text, secret string) bool {
		return func(text, secret string) bool { return strings.Contains(text, encode(secret)) }
	}
	upper := strings.ToUpper
	hexOf := func(s string) string { return hex.EncodeToString([]byte(s)) }
	spaced := func(s string) string { return strings.Join(strings.Split(s, ""), " ") }
	dashed := func(s string) string { return strings.Join(strings.Split(s, ""), "-") }
	halves := func(s string) string {
		r := []rune(s)
		return "first half " + string(r[:len(r)/2]) + ", second half " + string(r[len(r)/2:])
	}
	codes := func(s string) string {
		var parts []string
		for _, r := range s {
			parts = append(parts, strconv.Itoa(int(r)))
		}
		return strings.Join(parts, ",")
	}
	rot13 := func(s string) string {
		return strings.Map(func(r rune) rune {
			switch {
			case 'a' <= r && r <= 'z':
				return 'a' + (r-'a'+13)%26
			case 'A' <= r && r <= 'Z':
				return 'A' + (r-'A'+13)%26
			}
			return r
		}, s)
	}
	double := func(s string) string {
		return base64.StdEncoding.EncodeToString([]byte(base64.StdEncoding.EncodeToString([]byte(s))))
	}
	mime := func(s string) string {
		// 51 bytes ahead are 68 characters: the line break after column 76 falls in the secret.
		e := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 51) + s))
		return e[:76] + "\r\n" + e[76:]
	}
	return []transformation{
		{name: "exact", encode: func(s string) string { return s }, reveals: revealsExact, masked: true},
		{name: "JSON-escaped", encode: jsonInner(true), reveals: revealsJSON, masked: true},
		{name: "JSON-escaped without HTML escapes", encode: jsonInner(false), reveals: revealsJSON, masked: true},
		{name: `\u-escaped`, encode: uEsc, reveals: revealsJSON, masked: true},
		{name: `\u-escaped with upper-case hex`, encode: func(s string) string { return strings.ReplaceAll(upper(uEsc(s)), `\U`, `\u`) }, reveals: revealsJSON, masked: true},
		{name: "base64", encode: b64(base64.StdEncoding, "", ""), reveals: revealsBase64, masked: true},
		{name: "base64 without padding", encode: b64(base64.RawStdEncoding, "", ""), reveals: revealsBase64, masked: true},
		{name: "base64 URL-safe", encode: b64(base64.URLEncoding, "", ""), reveals: revealsBase64, masked: true},
		{name: "base64 URL-safe without padding", encode: b64(base64.RawURLEncoding, "", ""), reveals: revealsBase64, masked: true},
		{name: "base64 inside a blob at offset 1", encode: b64(base64.StdEncoding, "{", `"}`), reveals: revealsBase64, masked: true},
		{name: "base64 inside a blob at offset 2", encode: b64(base64.StdEncoding, "k=", "\n"), reveals: revealsBase64, masked: true},
		{name: "base64 inside a blob at offset 3", encode: b64(base64.StdEncoding, "ab=", ";x"), reveals: revealsBase64, masked: true},
		{name: "base64 URL-safe inside a blob at offset 1", encode: b64(base64.RawURLEncoding, "?", "&"), reveals: revealsBase64, masked: true},
		{name: "base64 URL-safe inside a blob at offset 2", encode: b64(base64.URLEncoding, "t:", "."), reveals: revealsBase64, masked: true},
		{name: "hex", encode: hexOf, reveals: revealsHex, masked: true},
		{name: "hex upper-case", encode: func(s string) string { return upper(hexOf(s)) }, reveals: revealsHex, masked: true},
		{name: "URL query-escaped", encode: url.QueryEscape, reveals: revealsURL, masked: true},
		{name: "URL path-escaped", encode: url.PathEscape, reveals: revealsURL, masked: true},
		{name: "URL-escaped as encodeURIComponent does", encode: encodeURIComponent, reveals: revealsURL, masked: true},
		{name: "reversed", encode: reverse, reveals: revealsReversed, masked: true},

		{name: "upper-case", encode: upper, reveals: passesThrough(upper),
			why: "a change of case is not an encoding; catching it would take case-insensitive matching of every form"},
		{name: "split into characters", encode: spaced, reveals: passesThrough(spaced),
			why: "the separator can be anything, and a secret spread over single characters is only found by a fuzzy search"},
		{name: "joined with dashes", encode: dashed, reveals: passesThrough(dashed),
			why: "as split into characters: any separator between the characters"},
		{name: "two halves", encode: halves, reveals: passesThrough(halves),
			why: "each half is a shorter, different string; masking every part of a secret would mask unrelated text"},
		{name: "character codes", encode: codes, reveals: passesThrough(codes),
			why: "numbers in any base, format and separator are ordinary data, not one string to search for"},
		{name: "ROT13", encode: rot13, reveals: passesThrough(rot13),
			why: "a cipher, not an encoding: there is no end to them"},
		{name: "base64 of base64", encode: double, reveals: passesThrough(double),
			why: "an encoding of an encoding: masking decodes nothing in text (only base64 data fields, once)"},
		{name: "base64 wrapped at 76 columns", encode: mime, reveals: passesThrough(mime),
			why: "a line break can fall anywhere inside the encoded secret, and forms are matched as they are, without white space"},
	}
}

// Masking catches the encodings a careless tool produces (issue 11, finding 5). A tool holding
// a secret returns it transformed in every field of a success and of an error result, logs it
// and passes it to a tool it calls; every transformation masking promises is masked in the
// result returned, in what the hooks see, in what the Recorder stores (arguments included) and
// in the progress and log messages. Those it does not promise are listed with the reason and
// shown to pass through unmasked, so the table is the promise: moving a row from one side to
// the other fails this test.
func TestSecretTransformationsMasked(t *testing.T) {
	table := secretTransformations()
	names := map[string]bool{}
	masked := 0
	for _, tr := range table {
		names[tr.name] = true
		if tr.masked {
			masked++
		} else if tr.why == "" {
			t.Errorf("%s is not masked and the table does not say why", tr.name)
		}
	}
	// The transformations the issue names are all in the table, masked or not.
	for _, n := range []string{"base64", "hex", "reversed", "split into characters", "joined with dashes",
		"upper-case", "two halves", "character codes", `\u-escaped`} {
		if !names[n] {
			t.Errorf("the issue's %q is not in the table", n)
		}
	}
	t.Logf("%d transformations: %d masked, %d not promised", len(table), masked, len(table)-masked)

	const key = "sk-live-4f9a2b7c1d8e"
	secrets := []struct {
		name, value string
		others      quiver.Vars // more secrets of the tool: more forms than one secret has
	}{
		{"API key", key, nil},
		{"password with specials", `p@ss w0rd/+?&"<ü>~x`, nil},
		{"API key among other secrets", key, quiver.Vars{"db_password": "correct horse battery", "signing_key": "k3y-0f-s1gn1ng"}},
	}
	for _, sec := range secrets {
		for _, tr := range table {
			t.Run(sec.name+"/"+tr.name, func(t *testing.T) {
				testTransformation(t, tr, sec.value, sec.others)
			})
		}
	}
}

// testTransformation runs a tool returning secret transformed by tr and checks every place
// the result goes.
func testTransformation(t *testing.T, tr transformation, secret string, others quiver.Vars) {
	vars := quiver.Vars{"api_key": secret}
	decls := []quiver.Variable{{Name: "api_key", Type: quiver.VarSecret, Required: true}}
	for name, v := range others {
		vars[name] = v
		decls = append(decls, quiver.Variable{Name: name, Type: quiver.VarSecret})
	}
	var d *quiver.Dispatcher
	echo := rawTool(t, "echo", `{"type":"object","properties":{"text":{"type":"string"}}}`,
		func(_ context.Context, args json.RawMessage) (any, error) { return string(args), nil })
	leaky := rawTool(t, "leaky", `{"type":"object","properties":{"fail":{"type":"boolean"}}}`,
		func(ctx context.Context, args json.RawMessage) (any, error) {
			k, _ := quiver.Var(ctx, "api_key")
			leak := tr.encode(k)
			if _, err := d.Call(ctx, "echo", map[string]string{"text": leak}); err != nil {
				return nil, err
			}
			quiver.Log(ctx, quiver.LogInfo, "log "+leak)
			quiver.ReportProgress(ctx, 1, 2, "progress "+leak)
			var a struct{ Fail bool }
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, err
			}
			if a.Fail {
				return &quiver.Result{Status: quiver.StatusError, Error: "failed with " + leak,
					Problems: []schema.Problem{{Pointer: "/" + leak, Message: "bad " + leak}}}, nil
			}
			content := []quiver.Content{quiver.TextContent("c " + leak),
				quiver.ImageContent([]byte("\x89PNG\r\n"+leak+"\x00"), "image/png")}
			if others != nil {
				// Several secrets in a long text: masked in one pass of a strings.Replacer.
				content = append(content, quiver.TextContent(strings.Repeat("filler ", 20<<10/7)+leak))
			}
			return &quiver.Result{
				Text:    "token: " + leak + ".",
				Value:   unescapedJSON(map[string]any{"note": "x " + leak + " y", leak: 1, "list": []string{leak}}),
				Content: content,
				Attachments: []quiver.Attachment{{Name: "leak.txt", MimeType: "text/plain", Description: "d " + leak,
					Data: base64.StdEncoding.EncodeToString([]byte("file " + leak + "\n"))}},
			}, nil
		}, func(s *quiver.Spec) { s.Variables = decls })

	// Every text a hook, the Recorder or the caller gets, named by where it was seen.
	var mu sync.Mutex
	var seen []seenText
	see := func(where string, c *quiver.Call, r *quiver.Result) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, seenText{where + " " + c.Name + " arguments", string(c.Args)})
		for _, v := range resultTexts(t, r) {
			seen = append(seen, seenText{where + " " + c.Name + " " + v.where, v.text})
		}
	}
	rec := &memRecorder{}
	d = &quiver.Dispatcher{Registry: newRegistry(t, echo, leaky), Resolver: vars, Recorder: rec,
		Hooks: quiver.Hooks{
			AfterSuccess: func(_ context.Context, c *quiver.Call, r *quiver.Result) { see("AfterSuccess", c, r) },
			AfterFailure: func(_ context.Context, c *quiver.Call, r *quiver.Result) { see("AfterFailure", c, r) },
			BeforeStore: func(_ context.Context, c *quiver.Call, r *quiver.Result) (*quiver.Result, bool) {
				see("BeforeStore", c, r)
				return r, true
			},
		}}
	reports := &recordingReporter{}
	ctx := quiver.WithReporter(context.Background(), reports)
	ok := dispatchCall(t, ctx, d, quiver.Call{Name: "leaky", Args: json.RawMessage(`{}`)})
	wantSuccess(t, ok)
	failed := dispatchCall(t, ctx, d, quiver.Call{Name: "leaky", Args: json.RawMessage(`{"fail":true}`)})
	if !failed.IsError() {
		t.Fatalf("want an error result, got %+v", failed)
	}
	for _, r := range []*quiver.Result{ok, failed} {
		for _, v := range resultTexts(t, r) {
			seen = append(seen, seenText{"returned " + v.where, v.text})
		}
	}
	records := rec.all()
	if len(records) != 4 {
		t.Fatalf("%d records, want 4 (two calls, each with a nested one)", len(records))
	}
	for _, x := range records {
		seen = append(seen, seenText{"recorded " + x.Name + " arguments", x.Args})
		for _, v := range resultTexts(t, &x.Result) {
			seen = append(seen, seenText{"recorded " + x.Name + " " + v.where, v.text})
		}
	}

	if len(reports.events) != 4 {
		t.Fatalf("%d progress and log messages, want 4", len(reports.events))
	}
	for _, e := range reports.events {
		seen = append(seen, seenText{"reported " + e.Kind, e.Message})
	}

	if !tr.masked {
		// Not promised: the transformed secret passes through, as the table says.
		if !tr.reveals(ok.Text, secret) {
			t.Errorf("%s is listed as not masked (%s), but the result's text no longer shows it: %q", tr.name, tr.why, ok.Text)
		}
		return
	}
	if !strings.Contains(ok.Text, "[REDACTED]") {
		t.Errorf("no mask in the text %q", ok.Text)
	}
	for _, s := range seen {
		if how := readable(s.text, secret); how != "" {
			t.Errorf("%s: the secret can be read back (%s) from %q", s.where, how, excerpt(s.text))
		}
	}
}

type seenText struct{ where, text string }

// excerpt shortens a long text for a failure message.
func excerpt(s string) string {
	if len(s) <= 400 {
		return s
	}
	return s[:200] + " ... " + s[len(s)-200:]
}

// resultTexts lists every text of r a person or model could read: its fields, the strings
// and keys of its value, the decoded data of its content and attachments, and its JSON.
func resultTexts(t *testing.T, r *quiver.Result) []seenText {
	t.Helper()
	out := []seenText{{"text", r.Text}, {"error", r.Error}, {"stack", r.Stack}, {"code", string(r.Code)}}
	for i, p := range r.Problems {
		out = append(out, seenText{fmt.Sprintf("problem %d", i), p.Pointer + " " + p.Message})
	}
	decoded := func(data string) string {
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			t.Fatalf("masking broke base64 data %q: %v", data, err)
		}
		return string(b)
	}
	for i, c := range r.Content {
		out = append(out, seenText{fmt.Sprintf("content %d", i), c.Text + " " + c.URI + " " + c.MimeType + " " + decoded(c.Data)})
	}
	for i, a := range r.Attachments {
		out = append(out, seenText{fmt.Sprintf("attachment %d", i),
			strings.Join([]string{a.Name, a.Description, a.Path, a.ID, a.Type, a.MimeType, decoded(a.Data)}, " ")})
	}
	if len(r.Value) > 0 {
		v, err := schema.Decode(r.Value)
		if err != nil {
			t.Fatalf("masking broke the value %s: %v", r.Value, err)
		}
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				out = append(out, seenText{"value", x})
			case json.Number:
				out = append(out, seenText{"value", string(x)})
			case []any:
				for _, e := range x {
					walk(e)
				}
			case map[string]any:
				for k, e := range x {
					out = append(out, seenText{"value key", k})
					walk(e)
				}
			}
		}
		walk(v)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("result cannot be encoded: %v", err)
	}
	return append(out, seenText{"JSON", string(b)})
}

// readable names the transformation through which secret can be read in text, "" if none of
// the masked ones.
func readable(text, secret string) string {
	for _, d := range []struct {
		name    string
		reveals func(text, secret string) bool
	}{
		{"as is", revealsExact}, {"JSON escapes", revealsJSON}, {"base64", revealsBase64},
		{"hex", revealsHex}, {"URL escapes", revealsURL}, {"reversed", revealsReversed},
	} {
		if d.reveals(text, secret) {
			return d.name
		}
	}
	return ""
}

// The attacker's decoders: each undoes one family of transformations wherever it can in text.

func revealsExact(text, secret string) bool { return strings.Contains(text, secret) }

// revealsJSON undoes every JSON string escape in text, \u escapes (and surrogate pairs) included.
func revealsJSON(text, secret string) bool {
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		if text[i] != '\\' || i+1 == len(text) {
			b.WriteByte(text[i])
			continue
		}
		i++
		switch c := text[i]; c {
		case 'u':
			r, n := decodeU(text[i-1:])
			if n == 0 {
				b.WriteString(`\u`)
				continue
			}
			if utf16.IsSurrogate(r) {
				if r2, n2 := decodeU(text[i-1+n:]); n2 > 0 {
					r, n = utf16.DecodeRune(r, r2), n+n2
				}
			}
			b.WriteRune(r)
			i += n - 2
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		default: // \" \\ \/ and the rest stand for themselves
			b.WriteByte(c)
		}
	}
	return strings.Contains(b.String(), secret)
}

// decodeU decodes the \uXXXX at the start of s, returning the code unit and 6, or 0, 0.
func decodeU(s string) (rune, int) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, 0
	}
	v, err := strconv.ParseUint(s[2:6], 16, 16)
	if err != nil {
		return 0, 0
	}
	return rune(v), 6
}

// revealsBase64 decodes every run of base64 characters (either alphabet) in text, from each
// of its first four characters, since a blob may start anywhere in a run.
func revealsBase64(text, secret string) bool {
	isB64 := func(r rune) bool {
		return 'A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || strings.ContainsRune("+/-_", r)
	}
	for _, run := range strings.FieldsFunc(text, func(r rune) bool { return !isB64(r) }) {
		run = strings.NewReplacer("-", "+", "_", "/").Replace(run)
		for skip := 0; skip < 4 && skip < len(run); skip++ {
			r := run[skip:]
			if len(r)%4 == 1 {
				r = r[:len(r)-1]
			}
			if b, err := base64.RawStdEncoding.DecodeString(r); err == nil && strings.Contains(string(b), secret) {
				return true
			}
		}
	}
	return false
}

// revealsHex decodes every run of hex digits in text, from its first and its second digit.
func revealsHex(text, secret string) bool {
	notHex := func(r rune) bool { return !strings.ContainsRune("0123456789abcdefABCDEF", r) }
	for _, run := range strings.FieldsFunc(text, notHex) {
		for skip := 0; skip < 2 && skip < len(run); skip++ {
			r := run[skip:]
			if b, err := hex.DecodeString(r[:len(r)/2*2]); err == nil && strings.Contains(string(b), secret) {
				return true
			}
		}
	}
	return false
}

// revealsURL undoes percent-encoding in text, reading + as a space and as itself.
func revealsURL(text, secret string) bool {
	for _, plus := range []string{" ", "+"} {
		var b strings.Builder
		for i := 0; i < len(text); i++ {
			switch c := text[i]; {
			case c == '%' && i+2 < len(text):
				if v, err := strconv.ParseUint(text[i+1:i+3], 16, 8); err == nil {
					b.WriteByte(byte(v))
					i += 2
					continue
				}
				b.WriteByte(c)
			case c == '+':
				b.WriteString(plus)
			default:
				b.WriteByte(c)
			}
		}
		if strings.Contains(b.String(), secret) {
			return true
		}
	}
	return false
}

func revealsReversed(text, secret string) bool { return strings.Contains(reverse(text), secret) }

func reverse(s string) string {
	r := []rune(s)
	slices.Reverse(r)
	return string(r)
}

// encodeURIComponent escapes s as JavaScript's encodeURIComponent does.
func encodeURIComponent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
