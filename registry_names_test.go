package quiver_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
)

// Names that look like paths, or that hold characters no provider accepts, are refused with
// an error that states the rule (issue 11: "../../evil" was registered, with a warning, and
// served as ".._.._evil"); the names of imported and namespaced tools are accepted.
func TestRegistryRefusesInvalidNames(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"get_weather", true},
		{"everything.echo", true},
		{"everything.get-tiny_image", true},
		{"github/create_issue", true},
		{"a.b/c-d_e", true},
		{"getWeather", true},
		{strings.Repeat("a", 128), true},
		{"../../evil", false},
		{"..", false},
		{".hidden", false},
		{"/etc/passwd", false},
		{"trailing/", false},
		{"trailing.", false},
		{"a..b", false},
		{"a//b", false},
		{"a/./b", false},
		{`..\..\evil`, false},
		{"bad name!", false},
		{"tab\tname", false},
		{"new\nline", false},
		{"名前", false},
		{"semi;colon", false},
		{strings.Repeat("a", 129), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			r := &quiver.Registry{Logger: slog.New(slog.NewTextHandler(&buf, nil))}
			err := r.Register(textTool(tt.name, "ok"), textTool("other_tool", "ok"))
			checkErr := quiver.CheckName(tt.name)
			if tt.ok {
				if err != nil || checkErr != nil {
					t.Fatalf("refused: %v / %v", err, checkErr)
				}
				if _, found := r.Lookup(tt.name); !found {
					t.Fatal("not registered")
				}
				return
			}
			if err == nil || checkErr == nil {
				t.Fatalf("accepted (Register: %v, CheckName: %v)", err, checkErr)
			}
			for _, e := range []error{err, checkErr} {
				if !strings.Contains(e.Error(), quiver.NameRule) {
					t.Errorf("error %q does not state the rule", e)
				}
			}
			if len(r.Tools()) != 0 {
				t.Errorf("the batch was partly registered: %v", names(r.Tools()))
			}
		})
	}
}
