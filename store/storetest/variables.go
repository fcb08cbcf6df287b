package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// RunVariables runs the conformance tests of store.Variables against stores returned by open,
// which must also implement store.Variables:
//
//	func TestVariables(t *testing.T) {
//		storetest.RunVariables(t, func(t *testing.T) store.Store { return openTemp(t) })
//	}
func RunVariables(t *testing.T, open Open) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store, vs store.Variables)
	}{
		{"SetAndList", testVarSetAndList},
		{"Replace", testVarReplace},
		{"Delete", testVarDelete},
		{"ThreadMustExist", testVarThreadMustExist},
		{"Invalid", testVarInvalid},
		{"BatchIsAtomic", testVarBatchAtomic},
		{"Lookup", testVarLookup},
		{"LookupNames", testVarLookupNames},
		{"WorkspaceIsolation", testVarIsolation},
		{"RewriteSecrets", testVarRewriteSecrets},
		{"ConcurrentSets", testVarConcurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t)
			vs, ok := s.(store.Variables)
			if !ok {
				t.Fatalf("%T does not implement store.Variables", s)
			}
			tt.fn(t, s, vs)
		})
	}
}

func mustSet(t *testing.T, vs store.Variables, workspace string, layer store.VariableLayer, owner, name, value string, secret, scoped bool) {
	t.Helper()
	if err := vs.SetVariable(ctx, workspace, layer, owner, name, value, secret, scoped); err != nil {
		t.Fatalf("SetVariable(%s %s %s %s): %v", workspace, layer, owner, name, err)
	}
}

// listed renders an owner's values as "NAME=VALUE" with flags, sorted as listed.
func listed(t *testing.T, vs store.Variables, workspace string, layer store.VariableLayer, owner string) []string {
	t.Helper()
	list, err := vs.Variables(ctx, workspace, layer, owner)
	if err != nil {
		t.Fatalf("Variables(%s %s %s): %v", workspace, layer, owner, err)
	}
	out := []string{}
	for _, v := range list {
		if v.WorkspaceID != workspace || v.Layer != layer || v.OwnerID != owner {
			t.Errorf("listed %+v under %s %s %s", v, workspace, layer, owner)
		}
		if v.CreatedAt.IsZero() || v.UpdatedAt.Before(v.CreatedAt) {
			t.Errorf("%s: created %v, updated %v", v.Name, v.CreatedAt, v.UpdatedAt)
		}
		out = append(out, render(v))
	}
	return out
}

func render(v *store.Variable) string {
	s := v.Name + "=" + v.Value
	if v.Secret {
		s += " secret"
	}
	if v.Scoped {
		s += " scoped"
	}
	return s
}

func testVarSetAndList(t *testing.T, s store.Store, vs store.Variables) {
	th := newThread(t, s, ws)
	sealed := "qv1.0123abcd.opaque-sealed-bytes_-" // the store keeps what it is given
	for _, c := range []struct {
		layer          store.VariableLayer
		owner          string
		name, value    string
		secret, scoped bool
	}{
		{store.LayerThread, th.ID, "B", "thread b", false, true},
		{store.LayerThread, th.ID, "A", "thread a", false, false},
		{store.LayerThread, th.ID, "KEY", sealed, true, false},
		{store.LayerAgent, "agent_1", "A", "agent a", false, false},
		{store.LayerPrompt, "support/triage", "A", "prompt a", false, false},
		{store.LayerUser, "usr_1", "A", "user a", false, false},
		{store.LayerInstance, "", "A", "instance a", false, false},
		{store.LayerInstance, "", "UNICODE", "héllo ✓ 'quotes' \"and\" \\ %_", false, false},
		{store.LayerInstance, "", "EMPTY", "", false, false},
	} {
		mustSet(t, vs, ws, c.layer, c.owner, c.name, c.value, c.secret, c.scoped)
	}
	tests := []struct {
		layer store.VariableLayer
		owner string
		want  []string
	}{
		{store.LayerThread, th.ID, []string{"A=thread a", "B=thread b scoped", "KEY=" + sealed + " secret"}},
		{store.LayerAgent, "agent_1", []string{"A=agent a"}},
		{store.LayerPrompt, "support/triage", []string{"A=prompt a"}},
		{store.LayerUser, "usr_1", []string{"A=user a"}},
		{store.LayerInstance, "", []string{"A=instance a", "EMPTY=", "UNICODE=héllo ✓ 'quotes' \"and\" \\ %_"}},
		{store.LayerAgent, "agent_2", []string{}},
		{store.LayerUser, th.ID, []string{}}, // the same owner id on another layer
	}
	for _, tt := range tests {
		if got := listed(t, vs, ws, tt.layer, tt.owner); !slices.Equal(got, tt.want) {
			t.Errorf("%s %s: %q, want %q", tt.layer, tt.owner, got, tt.want)
		}
	}
}

func testVarReplace(t *testing.T, s store.Store, vs store.Variables) {
	th := newThread(t, s, ws)
	mustSet(t, vs, ws, store.LayerThread, th.ID, "A", "one", false, false)
	first, _ := vs.Variables(ctx, ws, store.LayerThread, th.ID)
	mustSet(t, vs, ws, store.LayerThread, th.ID, "A", "qv1.sealed", true, true)
	list, err := vs.Variables(ctx, ws, store.LayerThread, th.ID)
	if err != nil || len(list) != 1 {
		t.Fatalf("after replacing: %v, %v", list, err)
	}
	if got := render(list[0]); got != "A=qv1.sealed secret scoped" {
		t.Errorf("replaced: %s", got)
	}
	if !list[0].CreatedAt.Equal(first[0].CreatedAt) || list[0].UpdatedAt.Before(first[0].UpdatedAt) {
		t.Errorf("replacing: created %v -> %v, updated %v -> %v", first[0].CreatedAt, list[0].CreatedAt,
			first[0].UpdatedAt, list[0].UpdatedAt)
	}
	mustSet(t, vs, ws, store.LayerThread, th.ID, "A", "plain again", false, false)
	if got := listed(t, vs, ws, store.LayerThread, th.ID); !slices.Equal(got, []string{"A=plain again"}) {
		t.Errorf("replaced again: %q", got)
	}
	// SetVariables reports the times it stored.
	v := &store.Variable{WorkspaceID: ws, Layer: store.LayerAgent, OwnerID: "agent_1", Name: "T", Value: "x"}
	if err := vs.SetVariables(ctx, []*store.Variable{v}); err != nil {
		t.Fatal(err)
	}
	if v.CreatedAt.IsZero() || v.UpdatedAt.IsZero() {
		t.Errorf("SetVariables left times unset: %+v", v)
	}
}

func testVarDelete(t *testing.T, s store.Store, vs store.Variables) {
	th := newThread(t, s, ws)
	mustSet(t, vs, ws, store.LayerThread, th.ID, "A", "a", false, false)
	mustSet(t, vs, ws, store.LayerThread, th.ID, "B", "b", false, false)
	mustSet(t, vs, ws, store.LayerInstance, "", "A", "i", false, false)
	if err := vs.DeleteVariable(ctx, ws, store.LayerThread, th.ID, "A"); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, vs, ws, store.LayerThread, th.ID); !slices.Equal(got, []string{"B=b"}) {
		t.Errorf("after delete: %q", got)
	}
	if got := listed(t, vs, ws, store.LayerInstance, ""); !slices.Equal(got, []string{"A=i"}) {
		t.Errorf("delete touched another layer: %q", got)
	}
	for _, tt := range []struct {
		name            string
		layer           store.VariableLayer
		owner, variable string
	}{
		{"deleted already", store.LayerThread, th.ID, "A"},
		{"never set", store.LayerThread, th.ID, "C"},
		{"unknown owner", store.LayerAgent, "agent_9", "A"},
		{"other layer", store.LayerUser, th.ID, "B"},
	} {
		if err := vs.DeleteVariable(ctx, ws, tt.layer, tt.owner, tt.variable); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", tt.name, err)
		}
	}
}

func testVarThreadMustExist(t *testing.T, s store.Store, vs store.Variables) {
	other := newThread(t, s, "wsp_other")
	for _, owner := range []string{"thr_nosuchthread", other.ID} {
		err := vs.SetVariable(ctx, ws, store.LayerThread, owner, "A", "a", false, false)
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("thread %s: %v, want ErrNotFound", owner, err)
		}
	}
	// Agents, prompts and users are not checked: they may live elsewhere.
	mustSet(t, vs, ws, store.LayerAgent, "agent_unknown", "A", "a", false, false)
	mustSet(t, vs, ws, store.LayerUser, "usr_unknown", "A", "a", false, false)
	mustSet(t, vs, ws, store.LayerPrompt, "unknown prompt", "A", "a", false, false)
}

func testVarInvalid(t *testing.T, s store.Store, vs store.Variables) {
	th := newThread(t, s, ws)
	big := strings.Repeat("x", store.MaxVariableValueBytes+1)
	tests := []struct {
		name                string
		workspace           string
		layer               store.VariableLayer
		owner, vname, value string
	}{
		{"no workspace", "", store.LayerThread, th.ID, "A", "a"},
		{"unknown layer", ws, "team", "t1", "A", "a"},
		{"empty layer", ws, "", "t1", "A", "a"},
		{"instance with owner", ws, store.LayerInstance, "x", "A", "a"},
		{"agent without owner", ws, store.LayerAgent, "", "A", "a"},
		{"thread without owner", ws, store.LayerThread, "", "A", "a"},
		{"no name", ws, store.LayerThread, th.ID, "", "a"},
		{"NUL in name", ws, store.LayerThread, th.ID, "A\x00B", "a"},
		{"newline in name", ws, store.LayerThread, th.ID, "A\nB", "a"},
		{"name not UTF-8", ws, store.LayerThread, th.ID, "A\xff", "a"},
		{"long name", ws, store.LayerThread, th.ID, strings.Repeat("N", store.MaxVariableNameBytes+1), "a"},
		{"NUL in value", ws, store.LayerThread, th.ID, "A", "a\x00b"},
		{"value not UTF-8", ws, store.LayerThread, th.ID, "A", "\xc3\x28"},
		{"value too large", ws, store.LayerThread, th.ID, "A", big},
		{"NUL in owner", ws, store.LayerAgent, "a\x00b", "A", "a"},
	}
	for _, tt := range tests {
		err := vs.SetVariable(ctx, tt.workspace, tt.layer, tt.owner, tt.vname, tt.value, false, false)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tt.name, err)
		}
	}
	if got := listed(t, vs, ws, store.LayerThread, th.ID); len(got) != 0 {
		t.Errorf("invalid values were stored: %q", got)
	}
	// The largest value is accepted.
	mustSet(t, vs, ws, store.LayerThread, th.ID, "BIG", big[1:], false, false)
	if list, _ := vs.Variables(ctx, ws, store.LayerThread, th.ID); len(list) != 1 || list[0].Value != big[1:] {
		t.Errorf("the largest value did not round-trip")
	}
}

func testVarBatchAtomic(t *testing.T, s store.Store, vs store.Variables) {
	th := newThread(t, s, ws)
	mustSet(t, vs, ws, store.LayerThread, th.ID, "KEEP", "old", false, false)
	batches := map[string][]*store.Variable{
		"a thread that does not exist": {
			{WorkspaceID: ws, Layer: store.LayerThread, OwnerID: th.ID, Name: "KEEP", Value: "new"},
			{WorkspaceID: ws, Layer: store.LayerAgent, OwnerID: "agent_1", Name: "X", Value: "x"},
			{WorkspaceID: ws, Layer: store.LayerThread, OwnerID: "thr_missing", Name: "Y", Value: "y"},
		},
		"an invalid value": {
			{WorkspaceID: ws, Layer: store.LayerThread, OwnerID: th.ID, Name: "KEEP", Value: "new"},
			{WorkspaceID: ws, Layer: store.LayerAgent, OwnerID: "agent_1", Name: "", Value: "x"},
		},
	}
	for name, batch := range batches {
		if err := vs.SetVariables(ctx, batch); err == nil {
			t.Errorf("batch with %s: no error", name)
		}
		if got := listed(t, vs, ws, store.LayerThread, th.ID); !slices.Equal(got, []string{"KEEP=old"}) {
			t.Errorf("batch with %s changed the thread: %q", name, got)
		}
		if got := listed(t, vs, ws, store.LayerAgent, "agent_1"); len(got) != 0 {
			t.Errorf("batch with %s stored %q", name, got)
		}
	}
	if err := vs.SetVariables(ctx, nil); err != nil {
		t.Errorf("empty batch: %v", err)
	}
	ok := []*store.Variable{
		{WorkspaceID: ws, Layer: store.LayerThread, OwnerID: th.ID, Name: "KEEP", Value: "new"},
		{WorkspaceID: ws, Layer: store.LayerThread, OwnerID: th.ID, Name: "MORE", Value: "m", Scoped: true},
		{WorkspaceID: ws, Layer: store.LayerInstance, Name: "I", Value: "i"},
	}
	if err := vs.SetVariables(ctx, ok); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, vs, ws, store.LayerThread, th.ID); !slices.Equal(got, []string{"KEEP=new", "MORE=m scoped"}) {
		t.Errorf("batch: %q", got)
	}
}

// lookupIndex renders a lookup's values as "layer/owner/NAME=VALUE" with flags, sorted.
func lookupIndex(l *store.VariableLookup) []string {
	var out []string
	for _, v := range l.Values {
		out = append(out, string(v.Layer)+"/"+v.OwnerID+"/"+render(v))
	}
	slices.Sort(out)
	return out
}

func testVarLookup(t *testing.T, s store.Store, vs store.Variables) {
	root := newThread(t, s, ws)
	child := &store.Thread{WorkspaceID: ws, ParentID: root.ID, AgentID: "agent_2"}
	if err := s.CreateThread(ctx, child); err != nil {
		t.Fatal(err)
	}
	grand := &store.Thread{WorkspaceID: ws, ParentID: child.ID}
	if err := s.CreateThread(ctx, grand); err != nil {
		t.Fatal(err)
	}
	sibling := &store.Thread{WorkspaceID: ws, ParentID: root.ID}
	if err := s.CreateThread(ctx, sibling); err != nil {
		t.Fatal(err)
	}
	mustSet(t, vs, ws, store.LayerThread, root.ID, "A", "root", false, false)
	mustSet(t, vs, ws, store.LayerThread, child.ID, "A", "child", false, true)
	mustSet(t, vs, ws, store.LayerThread, sibling.ID, "A", "sibling", false, false)
	mustSet(t, vs, ws, store.LayerThread, grand.ID, "B", "qv1.x.y", true, false)
	mustSet(t, vs, ws, store.LayerAgent, "agent_1", "A", "agent1", false, false)
	mustSet(t, vs, ws, store.LayerAgent, "agent_2", "A", "agent2", false, false)
	mustSet(t, vs, ws, store.LayerPrompt, "p", "A", "prompt", false, false)
	mustSet(t, vs, ws, store.LayerUser, "usr_1", "A", "user", false, false)
	mustSet(t, vs, ws, store.LayerInstance, "", "A", "instance", false, false)
	mustSet(t, vs, "wsp_other", store.LayerInstance, "", "A", "other workspace", false, false)

	tests := []struct {
		name    string
		q       store.VariableQuery
		threads []string
		values  []string
	}{
		{"grandchild, every owner", store.VariableQuery{ThreadID: grand.ID, AgentID: "agent_1", PromptName: "p", UserID: "usr_1"},
			[]string{grand.ID, child.ID, root.ID},
			[]string{"agent/agent_1/A=agent1", "instance//A=instance", "prompt/p/A=prompt", "thread/" + child.ID + "/A=child scoped",
				"thread/" + grand.ID + "/B=qv1.x.y secret", "thread/" + root.ID + "/A=root", "user/usr_1/A=user"}},
		{"root only", store.VariableQuery{ThreadID: root.ID},
			[]string{root.ID},
			[]string{"instance//A=instance", "thread/" + root.ID + "/A=root"}},
		{"sibling", store.VariableQuery{ThreadID: sibling.ID, AgentID: "agent_2"},
			[]string{sibling.ID, root.ID},
			[]string{"agent/agent_2/A=agent2", "instance//A=instance", "thread/" + root.ID + "/A=root", "thread/" + sibling.ID + "/A=sibling"}},
		{"no thread", store.VariableQuery{UserID: "usr_1"},
			nil,
			[]string{"instance//A=instance", "user/usr_1/A=user"}},
		{"unknown owners", store.VariableQuery{AgentID: "agent_9", PromptName: "q", UserID: "usr_9"},
			nil,
			[]string{"instance//A=instance"}},
	}
	for _, tt := range tests {
		l, err := vs.LookupVariables(ctx, ws, tt.q)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !slices.Equal(l.Threads, tt.threads) {
			t.Errorf("%s: threads %q, want %q", tt.name, l.Threads, tt.threads)
		}
		slices.Sort(tt.values)
		if got := lookupIndex(l); !slices.Equal(got, tt.values) {
			t.Errorf("%s: values\n%q\nwant\n%q", tt.name, got, tt.values)
		}
	}
	for _, id := range []string{"thr_nosuchthread", newThread(t, s, "wsp_other").ID} {
		if _, err := vs.LookupVariables(ctx, ws, store.VariableQuery{ThreadID: id}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("lookup on thread %s: %v, want ErrNotFound", id, err)
		}
	}
}

func testVarLookupNames(t *testing.T, s store.Store, vs store.Variables) {
	th := newThread(t, s, ws)
	for _, n := range []string{"A", "B", "C", "a", "O'Brien", "x%y_z"} {
		mustSet(t, vs, ws, store.LayerThread, th.ID, n, "v"+n, false, false)
	}
	tests := []struct {
		names []string
		want  []string
	}{
		{nil, []string{"A", "B", "C", "O'Brien", "a", "x%y_z"}},
		{[]string{}, nil},
		{[]string{"B"}, []string{"B"}},
		{[]string{"a", "C", "Z"}, []string{"C", "a"}},
		{[]string{"O'Brien", "x%y_z", "x%"}, []string{"O'Brien", "x%y_z"}},
	}
	for _, tt := range tests {
		l, err := vs.LookupVariables(ctx, ws, store.VariableQuery{ThreadID: th.ID, Names: tt.names})
		if err != nil {
			t.Fatalf("names %q: %v", tt.names, err)
		}
		var got []string
		for _, v := range l.Values {
			if v.Value != "v"+v.Name {
				t.Errorf("%s = %q", v.Name, v.Value)
			}
			got = append(got, v.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, tt.want) || !slices.Equal(l.Threads, []string{th.ID}) {
			t.Errorf("names %q: got %q (threads %q), want %q", tt.names, got, l.Threads, tt.want)
		}
	}
}

func testVarIsolation(t *testing.T, s store.Store, vs store.Variables) {
	const other = "wsp_intruder"
	th := newThread(t, s, ws)
	mustSet(t, vs, ws, store.LayerThread, th.ID, "A", "mine", false, false)
	mustSet(t, vs, ws, store.LayerAgent, "agent_1", "A", "mine", false, false)
	mustSet(t, vs, ws, store.LayerInstance, "", "A", "mine", false, false)
	mustSet(t, vs, ws, store.LayerInstance, "", "S", "qv1.secret", true, false)

	// Reading through the other workspace finds nothing.
	for _, o := range []struct {
		layer store.VariableLayer
		owner string
	}{{store.LayerThread, th.ID}, {store.LayerAgent, "agent_1"}, {store.LayerInstance, ""}} {
		if got := listed(t, vs, other, o.layer, o.owner); len(got) != 0 {
			t.Errorf("%s %s listed through another workspace: %q", o.layer, o.owner, got)
		}
		if err := vs.DeleteVariable(ctx, other, o.layer, o.owner, "A"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s %s deleted through another workspace: %v", o.layer, o.owner, err)
		}
	}
	if _, err := vs.LookupVariables(ctx, other, store.VariableQuery{ThreadID: th.ID}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("lookup of the thread through another workspace: %v", err)
	}
	l, err := vs.LookupVariables(ctx, other, store.VariableQuery{AgentID: "agent_1"})
	if err != nil || len(l.Values) != 0 {
		t.Errorf("lookup through another workspace: %v, %v", lookupIndex(l), err)
	}
	// Writing through the other workspace changes nothing of this one.
	if err := vs.SetVariable(ctx, other, store.LayerThread, th.ID, "A", "theirs", false, false); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("set on the thread through another workspace: %v", err)
	}
	mustSet(t, vs, other, store.LayerAgent, "agent_1", "A", "theirs", false, false)
	mustSet(t, vs, other, store.LayerInstance, "", "A", "theirs", false, false)
	for _, o := range []struct {
		layer store.VariableLayer
		owner string
		want  []string
	}{
		{store.LayerThread, th.ID, []string{"A=mine"}},
		{store.LayerAgent, "agent_1", []string{"A=mine"}},
		{store.LayerInstance, "", []string{"A=mine", "S=qv1.secret secret"}},
	} {
		if got := listed(t, vs, ws, o.layer, o.owner); !slices.Equal(got, o.want) {
			t.Errorf("%s %s after the other workspace wrote: %q", o.layer, o.owner, got)
		}
	}
	if got := listed(t, vs, other, store.LayerInstance, ""); !slices.Equal(got, []string{"A=theirs"}) {
		t.Errorf("the other workspace's instance values: %q", got)
	}
}

func testVarRewriteSecrets(t *testing.T, s store.Store, vs store.Variables) {
	th := newThread(t, s, ws)
	mustSet(t, vs, ws, store.LayerThread, th.ID, "S1", "sealed-1", true, true)
	mustSet(t, vs, ws, store.LayerThread, th.ID, "T", "text", false, false)
	mustSet(t, vs, ws, store.LayerInstance, "", "S2", "sealed-2", true, false)
	mustSet(t, vs, "wsp_other", store.LayerUser, "usr_1", "S3", "sealed-3", true, false)
	before := func() []string {
		return slices.Concat(listed(t, vs, ws, store.LayerThread, th.ID), listed(t, vs, ws, store.LayerInstance, ""),
			listed(t, vs, "wsp_other", store.LayerUser, "usr_1"))
	}
	original := before()

	// An error from fn changes nothing, even after other values were rewritten.
	boom := errors.New("boom")
	calls := 0
	err := vs.RewriteSecrets(ctx, func(v *store.Variable) (string, error) {
		calls++
		if calls == 2 {
			return "", boom
		}
		return "rewritten", nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("RewriteSecrets with a failing fn: %v", err)
	}
	if got := before(); !slices.Equal(got, original) {
		t.Errorf("a failed rewrite changed values: %q", got)
	}
	// An invalid new value is refused and changes nothing.
	if err := vs.RewriteSecrets(ctx, func(v *store.Variable) (string, error) { return "bad\x00", nil }); err == nil {
		t.Error("rewriting to an invalid value: no error")
	}
	if got := before(); !slices.Equal(got, original) {
		t.Errorf("an invalid rewrite changed values: %q", got)
	}

	// Every secret of every workspace, and only secrets, is rewritten.
	var seen []string
	err = vs.RewriteSecrets(ctx, func(v *store.Variable) (string, error) {
		seen = append(seen, v.WorkspaceID+"/"+string(v.Layer)+"/"+v.OwnerID+"/"+render(v))
		v.Value = "ignored: only the returned value counts"
		return "new:" + v.Name, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(seen)
	want := []string{ws + "/instance//S2=sealed-2 secret", ws + "/thread/" + th.ID + "/S1=sealed-1 secret scoped",
		"wsp_other/user/usr_1/S3=sealed-3 secret"}
	slices.Sort(want)
	if !slices.Equal(seen, want) {
		t.Errorf("fn saw %q, want %q", seen, want)
	}
	got := before()
	want = []string{"S1=new:S1 secret scoped", "T=text", "S2=new:S2 secret", "S3=new:S3 secret"}
	if !slices.Equal(got, want) {
		t.Errorf("after rewriting: %q, want %q", got, want)
	}
	// Values set as text stay text: turning one into a secret and back changes what is seen.
	mustSet(t, vs, ws, store.LayerThread, th.ID, "S1", "plain now", false, false)
	seen = nil
	if err := vs.RewriteSecrets(ctx, func(v *store.Variable) (string, error) {
		seen = append(seen, v.Name)
		return v.Value, nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(seen)
	if !slices.Equal(seen, []string{"S2", "S3"}) {
		t.Errorf("after S1 became text, fn saw %q", seen)
	}
}

func testVarConcurrent(t *testing.T, s store.Store, vs store.Variables) {
	th := newThread(t, s, ws)
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Every writer sets its own name and fights over a shared one.
				if err := vs.SetVariable(ctx, ws, store.LayerThread, th.ID, fmt.Sprintf("W%d", w), fmt.Sprint(i), false, false); err != nil {
					errs <- err
					return
				}
				if err := vs.SetVariable(ctx, ws, store.LayerThread, th.ID, "SHARED", fmt.Sprintf("%d-%d", w, i), false, false); err != nil {
					errs <- err
					return
				}
				if _, err := vs.LookupVariables(ctx, ws, store.VariableQuery{ThreadID: th.ID}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	list, err := vs.Variables(ctx, ws, store.LayerThread, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != writers+1 {
		t.Fatalf("%d values, want %d", len(list), writers+1)
	}
	for _, v := range list {
		if v.Name != "SHARED" && v.Value != fmt.Sprint(each-1) {
			t.Errorf("%s = %s, want the last write %d", v.Name, v.Value, each-1)
		}
	}
}
